import SystemIO

/// A MIL blob storage file (`weights/weight.bin`), format version 2: the
/// weight file of ML programs, and of modelc's compiled bundles.
///
/// Layout (all integers little-endian): a 64-byte header (`UInt32` blob
/// count, `UInt32` version = 2, 56 reserved bytes), then per blob a 64-byte
/// metadata record (`UInt32` sentinel `0xDEADBEEF`, `UInt32` data type code,
/// `UInt64` size in bytes, `UInt64` absolute data offset, `UInt64` padding
/// bits, 32 reserved bytes) followed by the data. Records and data start on
/// 64-byte boundaries. A program refers to a blob by its record's offset.
///
/// Every offset and size is checked against the file before it is used.
public struct MILBlobFile: Sendable {
    public static let headerSize = 64
    public static let metadataSize = 64
    public static let alignment = 64
    public static let sentinel: UInt32 = 0xDEAD_BEEF
    public static let version: UInt32 = 2

    /// The data type codes of blob storage.
    public enum DataType: UInt32, Sendable, CaseIterable {
        case float16 = 1, float32 = 2, uint8 = 3, int8 = 4, bfloat16 = 5, int16 = 6, uint16 = 7
        case int4 = 8, uint1 = 9, uint2 = 10, uint4 = 11, uint3 = 12, uint6 = 13
        case int32 = 14, uint32 = 15, float8E4M3FN = 16, float8E5M2 = 17

        /// The name the bundle format uses (docs/bundle-format.md), e.g. `float32`.
        public var name: String {
            switch self {
            case .float16: "float16"
            case .float32: "float32"
            case .uint8: "uint8"
            case .int8: "int8"
            case .bfloat16: "bfloat16"
            case .int16: "int16"
            case .uint16: "uint16"
            case .int4: "int4"
            case .uint1: "uint1"
            case .uint2: "uint2"
            case .uint4: "uint4"
            case .uint3: "uint3"
            case .uint6: "uint6"
            case .int32: "int32"
            case .uint32: "uint32"
            case .float8E4M3FN: "float8E4M3FN"
            case .float8E5M2: "float8E5M2"
            }
        }

        /// Bits per element.
        public var bitWidth: Int {
            switch self {
            case .uint1: 1
            case .uint2: 2
            case .uint3: 3
            case .int4, .uint4: 4
            case .uint6: 6
            case .uint8, .int8, .float8E4M3FN, .float8E5M2: 8
            case .float16, .bfloat16, .int16, .uint16: 16
            case .float32, .int32, .uint32: 32
            }
        }
    }

    /// One blob's metadata record.
    public struct BlobMetadata: Equatable, Sendable {
        /// The raw data type code (see `DataType`).
        public var dataTypeCode: UInt32
        public var sizeInBytes: UInt64
        /// Where the data starts, from the start of the file.
        public var dataOffset: UInt64
        /// Unused bits at the end of sub-byte data.
        public var paddingBits: UInt64

        public var dataType: DataType? { DataType(rawValue: dataTypeCode) }
    }

    public let path: String
    private let file: MappedFile
    /// The blob count the header records.
    public let blobCount: UInt32

    /// Opens and checks the header of the blob file at `path`.
    public init(path: String) throws(BlobFileError) {
        self.path = path
        do {
            file = try MappedFile(path: path)
        } catch {
            switch error {
            case .system(let failure): throw .cannotRead(path: path, reason: "\(failure.call) failed: \(failure.reason)")
            case .notRegularFile: throw .cannotRead(path: path, reason: "not a regular file")
            }
        }
        let bytes = file.bytes
        guard bytes.count >= Self.headerSize else {
            throw .tooSmall(path: path, size: bytes.count)
        }
        // Checking reads the header and records only; without this hint the
        // kernel's readahead would bring in weights nobody asked for yet.
        // Callers that then read the data call `adviseNormalAccess()`.
        file.adviseRandomAccess()
        let version = bytes.littleEndian(UInt32.self, at: 4)
        guard version == Self.version else {
            throw .unsupportedVersion(path: path, version: version)
        }
        blobCount = bytes.littleEndian(UInt32.self, at: 0)
    }

    /// The file's bytes; valid while this value is alive.
    public var bytes: UnsafeRawBufferPointer { file.bytes }

    /// Drops the file's pages from this process's memory (the page cache
    /// keeps them; reading maps them back in).
    public func releasePages() {
        file.releasePages(in: 0..<file.bytes.count)
    }

    /// Drops the pages wholly inside `data` (a blob's bytes from `data(at:)`)
    /// from this process's memory; reading them again maps them back in.
    public func releasePages(of data: UnsafeRawBufferPointer) {
        guard let start = data.baseAddress, let base = file.bytes.baseAddress else { return }
        let lower = start - base
        file.releasePages(in: lower..<(lower + data.count))
    }

    /// Lets the kernel read ahead again: for use once the records have been
    /// checked and the data is about to be read (the file is opened with
    /// readahead off, so checking it reads no weights).
    public func adviseNormalAccess() {
        file.adviseNormalAccess()
    }

    /// The metadata record at `offset`, checked: inside the file, with the
    /// sentinel, a known data type, and data that lies inside the file.
    public func metadata(at offset: UInt64) throws(BlobFileError) -> BlobMetadata {
        let bytes = file.bytes
        let size = UInt64(bytes.count)
        guard offset >= UInt64(Self.headerSize), offset <= size, size - offset >= UInt64(Self.metadataSize) else {
            throw .recordOutOfRange(path: path, offset: offset, fileSize: size)
        }
        let start = Int(offset)
        let sentinel = bytes.littleEndian(UInt32.self, at: start)
        guard sentinel == Self.sentinel else {
            throw .badSentinel(path: path, offset: offset, found: sentinel)
        }
        let record = BlobMetadata(
            dataTypeCode: bytes.littleEndian(UInt32.self, at: start + 4),
            sizeInBytes: bytes.littleEndian(UInt64.self, at: start + 8),
            dataOffset: bytes.littleEndian(UInt64.self, at: start + 16),
            paddingBits: bytes.littleEndian(UInt64.self, at: start + 24))
        guard record.dataType != nil else {
            throw .unknownDataType(path: path, offset: offset, code: record.dataTypeCode)
        }
        guard record.dataOffset <= size, record.sizeInBytes <= size - record.dataOffset else {
            throw .dataOutOfRange(path: path, offset: offset, dataOffset: record.dataOffset,
                                  size: record.sizeInBytes, fileSize: size)
        }
        return record
    }

    /// The data of the blob whose record is at `offset`; valid while this value is alive.
    public func data(at offset: UInt64) throws(BlobFileError) -> UnsafeRawBufferPointer {
        let record = try metadata(at: offset)
        return UnsafeRawBufferPointer(rebasing: file.bytes[Int(record.dataOffset)..<Int(record.dataOffset + record.sizeInBytes)])
    }
}

/// Why a blob file or one of its records cannot be used.
public enum BlobFileError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotRead(path: String, reason: String)
    case tooSmall(path: String, size: Int)
    case unsupportedVersion(path: String, version: UInt32)
    case recordOutOfRange(path: String, offset: UInt64, fileSize: UInt64)
    case badSentinel(path: String, offset: UInt64, found: UInt32)
    case unknownDataType(path: String, offset: UInt64, code: UInt32)
    case dataOutOfRange(path: String, offset: UInt64, dataOffset: UInt64, size: UInt64, fileSize: UInt64)

    public var description: String {
        switch self {
        case .cannotRead(let path, let reason):
            "\(path): \(reason)"
        case .tooSmall(let path, let size):
            "\(path): \(size) bytes, too small for a blob file header (64 bytes)"
        case .unsupportedVersion(let path, let version):
            "\(path): blob file version \(version), this reader knows version 2"
        case .recordOutOfRange(let path, let offset, let fileSize):
            "\(path): blob record at offset \(offset) lies outside the file (\(fileSize) bytes)"
        case .badSentinel(let path, let offset, let found):
            "\(path): no blob record at offset \(offset) (sentinel 0x\(String(found, radix: 16)), expected 0xdeadbeef)"
        case .unknownDataType(let path, let offset, let code):
            "\(path): blob at offset \(offset) has unknown data type code \(code)"
        case .dataOutOfRange(let path, let offset, let dataOffset, let size, let fileSize):
            "\(path): blob at offset \(offset) claims \(size) bytes at \(dataOffset), past the end of the file (\(fileSize) bytes)"
        }
    }
}

extension BlobFileError {
    /// The problem without the file's path, for messages that name the
    /// reference instead (`@model_path/weights/weight.bin at offset 64: …`).
    public var detail: String {
        switch self {
        case .cannotRead(_, let reason): reason
        case .tooSmall(_, let size): "the file has \(size) bytes, too few for a blob file header (64)"
        case .unsupportedVersion(_, let version): "blob file version \(version), expected 2"
        case .recordOutOfRange(_, _, let fileSize): "no record fits there (the file has \(fileSize) bytes)"
        case .badSentinel(_, _, let found): "no blob record there (sentinel 0x\(String(found, radix: 16)), expected 0xdeadbeef)"
        case .unknownDataType(_, _, let code): "the record has unknown data type code \(code)"
        case .dataOutOfRange(_, _, let dataOffset, let size, let fileSize):
            "the record claims \(size) bytes at \(dataOffset), past the end of the file (\(fileSize) bytes)"
        }
    }
}

extension UnsafeRawBufferPointer {
    /// The little-endian integer at `offset`; the caller has checked the bounds.
    package func littleEndian<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

/// Reads blob metadata for a model's ML program, opening each weight file once.
package final class BlobMetadataReader {
    private let model: ModelFile
    private var files: [String: Result<MILBlobFile, BlobFileError>] = [:]

    package init(model: ModelFile) {
        self.model = model
    }

    /// The record for `reference` (as the program names the file) at `offset`.
    package func metadata(file reference: String, offset: UInt64) -> Result<MILBlobFile.BlobMetadata, BlobFileError> {
        guard let path = model.resolveProgramFile(reference) else {
            return .failure(.cannotRead(path: reference, reason: "not a path inside the model"))
        }
        let opened = files[path] ?? Result { () throws(BlobFileError) in try MILBlobFile(path: path) }
        files[path] = opened
        return opened.flatMap { file in Result { () throws(BlobFileError) in try file.metadata(at: offset) } }
    }
}
