import CoreMLSchema
import Glibc
import ModelSpec

/// Where the values of one weight site come from, as bytes ready to store.
enum BlobSource {
    /// Bytes stored as they are.
    case bytes(UnsafeRawBufferPointer)
    /// Float32 values stored as float16 (`--fp16`).
    case float32AsFloat16(UnsafeBufferPointer<Float>)

    var storedByteCount: Int {
        switch self {
        case .bytes(let bytes): bytes.count
        case .float32AsFloat16(let values): values.count * 2
        }
    }

    /// The bytes the stored data is made from (before any conversion).
    var sourceBytes: UnsafeRawBufferPointer {
        switch self {
        case .bytes(let bytes): bytes
        case .float32AsFloat16(let values): UnsafeRawBufferPointer(values)
        }
    }

    var isConverted: Bool {
        if case .float32AsFloat16 = self { true } else { false }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether both buffers hold the same bytes.
    func sameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0, let base = baseAddress, let otherBase = other.baseAddress else { return true }
        return memcmp(base, otherBase, count) == 0
    }
}

/// One weight site and the blob that will hold its values.
struct PlannedWeight {
    let site: WeightLocation
    /// How the source stored the values (`floatValue`, `blobFileValue`, …).
    let sourceForm: String
    let dataType: MILBlobFile.DataType
    let count: Int
    let quantizationBits: Int?
    let paddingBits: UInt64
    let data: BlobSource
    /// Where the data lies in a source weight file, when it does.
    var origin: BlobOrigin? = nil
    /// Index into `WeightPlan.blobs`.
    var blob: Int = 0
}

/// A blob of a source MIL blob storage file: the file's path and the offset
/// of the blob's record.
struct BlobOrigin: Equatable {
    let path: String
    let recordOffset: UInt64
}

/// One distinct blob of the weight file: identical weights share one.
struct PlannedBlob {
    let dataType: MILBlobFile.DataType
    let paddingBits: UInt64
    let data: BlobSource
    var origin: BlobOrigin? = nil
    var recordOffset: UInt64 = 0
    var dataOffset: UInt64 { recordOffset + UInt64(MILBlobFile.metadataSize) }
}

/// Decides, for every weight site of a specification, what the weight file
/// stores: the values, their blob data type, and which sites share a blob.
///
/// Nothing is copied: the plan points into the unpacked specification and
/// the source weight files, which must stay alive until the plan is written.
struct WeightPlan {
    /// ML program constants with fewer elements than this stay inline.
    static let minimumProgramConstantCount = 10

    private(set) var weights: [PlannedWeight] = []
    private(set) var blobs: [PlannedBlob] = []
    /// Source weight files of ML programs, kept open while the plan lives.
    private var sourceFiles: [String: MILBlobFile] = [:]

    /// Plans the weights of `model`.
    ///
    /// - Throws: `CompileError.sourceWeights` when an ML program's weight
    ///   file or blob cannot be read.
    init(model: ModelFile, sites: [WeightLocation], fp16: Bool) throws(CompileError) {
        for site in sites {
            switch site.holder {
            case .weightParams(let params):
                if let weight = Self.plan(site: site, params: params.pointee, fp16: fp16) { weights.append(weight) }
            case .programValue(let value):
                if let weight = try plan(site: site, value: value.pointee, model: model) { weights.append(weight) }
            }
        }
        deduplicate()
        layOut()
    }

    private static func plan(site: WeightLocation, params: CoreML__Specification__WeightParams, fp16: Bool) -> PlannedWeight? {
        if params.n_floatvalue > 0, let values = params.floatvalue {
            let buffer = UnsafeBufferPointer(start: values, count: params.n_floatvalue)
            return PlannedWeight(site: site, sourceForm: "floatValue", dataType: fp16 ? .float16 : .float32,
                                 count: buffer.count, quantizationBits: nil, paddingBits: 0,
                                 data: fp16 ? .float32AsFloat16(buffer) : .bytes(UnsafeRawBufferPointer(buffer)))
        }
        if let bytes = binary(params.float16value) {
            return PlannedWeight(site: site, sourceForm: "float16Value", dataType: .float16, count: bytes.count / 2,
                                 quantizationBits: nil, paddingBits: 0, data: .bytes(bytes))
        }
        if let bytes = binary(params.rawvalue) {
            let bits = params.quantization.map { Int(clamping: $0.pointee.numberofbits) } ?? 8
            return PlannedWeight(site: site, sourceForm: "rawValue", dataType: .uint8,
                                 count: bits > 0 ? bytes.count * 8 / bits : 0, quantizationBits: bits,
                                 paddingBits: 0, data: .bytes(bytes))
        }
        if let bytes = binary(params.int8rawvalue) {
            return PlannedWeight(site: site, sourceForm: "int8RawValue", dataType: .int8, count: bytes.count,
                                 quantizationBits: nil, paddingBits: 0, data: .bytes(bytes))
        }
        return nil
    }

    private mutating func plan(
        site: WeightLocation, value: CoreML__Specification__MILSpec__Value, model: ModelFile
    ) throws(CompileError) -> PlannedWeight? {
        let tensorType = value.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
            ? value.type?.pointee.tensortype?.pointee : nil
        let count = tensorType.map(elementCount) ?? 0
        switch value.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            guard let blob = value.blobfilevalue?.pointee else { return nil }
            let reference = text(blob.filename)
            let file = try sourceFile(reference, model: model)
            let record: MILBlobFile.BlobMetadata
            let data: UnsafeRawBufferPointer
            do {
                record = try file.metadata(at: blob.offset)
                data = try file.data(at: blob.offset)
            } catch {
                throw .sourceWeights(error)
            }
            guard let dataType = record.dataType else { return nil }
            return PlannedWeight(site: site, sourceForm: "blobFileValue", dataType: dataType, count: count,
                                 quantizationBits: nil, paddingBits: record.paddingBits, data: .bytes(data),
                                 origin: BlobOrigin(path: file.path, recordOffset: blob.offset))
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            guard count >= Self.minimumProgramConstantCount, let tensorType,
                  let immediate = value.immediatevalue?.pointee,
                  immediate.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR,
                  let tensor = immediate.tensor?.pointee,
                  let (dataType, bytes) = Self.inlineTensor(tensor, type: tensorType.datatype, count: count)
            else { return nil }
            return PlannedWeight(site: site, sourceForm: "immediateValue", dataType: dataType, count: count,
                                 quantizationBits: nil, paddingBits: 0, data: .bytes(bytes))
        default:
            return nil
        }
    }

    /// The bytes of an inline tensor that a blob can hold, when its element
    /// count matches its type; `nil` for types blobs do not store (bool,
    /// string, int64, fp64, sub-byte) — those stay inline.
    static func inlineTensor(
        _ tensor: CoreML__Specification__MILSpec__TensorValue, type: CoreML__Specification__MILSpec__DataType, count: Int
    ) -> (MILBlobFile.DataType, UnsafeRawBufferPointer)? {
        switch tensor.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS:
            guard type == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT32,
                  let floats = tensor.floats?.pointee, floats.n_values == count, let values = floats.values
            else { return nil }
            return (.float32, UnsafeRawBufferPointer(UnsafeBufferPointer(start: values, count: count)))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS:
            guard type == CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32,
                  let ints = tensor.ints?.pointee, ints.n_values == count, let values = ints.values
            else { return nil }
            return (.int32, UnsafeRawBufferPointer(UnsafeBufferPointer(start: values, count: count)))
        case CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES:
            let byteTypes: [(CoreML__Specification__MILSpec__DataType, MILBlobFile.DataType)] = [
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT16, .float16),
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16, .bfloat16),
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8, .int8),
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT8, .uint8),
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT16, .int16),
                (CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT16, .uint16),
            ]
            guard let blobType = byteTypes.first(where: { $0.0 == type })?.1,
                  let bytes = tensor.bytes.flatMap({ binary($0.pointee.values) }),
                  bytes.count == count * blobType.bitWidth / 8
            else { return nil }
            return (blobType, bytes)
        default:
            return nil
        }
    }

    private mutating func sourceFile(_ reference: String, model: ModelFile) throws(CompileError) -> MILBlobFile {
        guard let path = model.resolveProgramFile(reference) else {
            throw .sourceWeights(.cannotRead(path: reference, reason: "not a path inside the model"))
        }
        if let open = sourceFiles[path] { return open }
        do {
            let file = try MILBlobFile(path: path)
            file.adviseNormalAccess()  // every blob will be read in order
            sourceFiles[path] = file
            return file
        } catch {
            throw .sourceWeights(error)
        }
    }

    /// Gives identical weights (same data type, padding and bytes) one blob.
    ///
    /// Candidates are grouped by type and size and compared with `memcmp`,
    /// which stops at the first differing byte: distinct tensors cost almost
    /// nothing, and only true duplicates are read in full.
    private mutating func deduplicate() {
        struct Group: Hashable {
            let dataType: MILBlobFile.DataType
            let paddingBits: UInt64
            let converted: Bool
            let byteCount: Int
        }
        var groups: [Group: [Int]] = [:]
        for index in weights.indices {
            let weight = weights[index]
            let group = Group(dataType: weight.dataType, paddingBits: weight.paddingBits,
                              converted: weight.data.isConverted, byteCount: weight.data.sourceBytes.count)
            if let existing = groups[group, default: []].first(where: { blobs[$0].data.sourceBytes.sameBytes(as: weight.data.sourceBytes) }) {
                weights[index].blob = existing
            } else {
                groups[group, default: []].append(blobs.count)
                weights[index].blob = blobs.count
                blobs.append(PlannedBlob(dataType: weight.dataType, paddingBits: weight.paddingBits, data: weight.data,
                                         origin: weight.origin))
            }
        }
    }

    /// Assigns each blob its record offset: after the header, 64-byte aligned.
    private mutating func layOut() {
        var offset = UInt64(MILBlobFile.headerSize)
        for index in blobs.indices {
            blobs[index].recordOffset = offset
            offset = alignedUp(blobs[index].dataOffset + UInt64(blobs[index].data.storedByteCount))
        }
    }

    /// The source weight file that the file this plan writes would be a
    /// byte-for-byte copy of, if there is one: every blob comes from it, at
    /// the offset it has there, and the header, every record and the zero
    /// bytes between blobs are what the plan writes, up to the end of the file.
    /// Then the file can be copied in the kernel (`copy_file_range`) instead
    /// of being written from memory.
    ///
    /// Reads the header and records of the source only, never its data.
    var verbatimSource: MILBlobFile? {
        guard let path = blobs.first?.origin?.path, let file = sourceFiles[path],
              UInt64(file.bytes.count) == fileSize, Int(file.blobCount) == blobs.count
        else { return nil }
        let bytes = file.bytes
        func zeros(_ range: Range<Int>) -> Bool { !range.contains { bytes[$0] != 0 } }
        guard bytes.littleEndian(UInt32.self, at: 4) == MILBlobFile.version, zeros(8..<MILBlobFile.headerSize) else { return nil }
        var end = MILBlobFile.headerSize
        for blob in blobs {
            guard blob.origin == BlobOrigin(path: path, recordOffset: blob.recordOffset), !blob.data.isConverted else { return nil }
            let record = Int(blob.recordOffset)
            guard zeros(end..<record),
                  bytes.littleEndian(UInt32.self, at: record) == MILBlobFile.sentinel,
                  bytes.littleEndian(UInt32.self, at: record + 4) == blob.dataType.rawValue,
                  bytes.littleEndian(UInt64.self, at: record + 8) == UInt64(blob.data.storedByteCount),
                  bytes.littleEndian(UInt64.self, at: record + 16) == blob.dataOffset,
                  bytes.littleEndian(UInt64.self, at: record + 24) == blob.paddingBits,
                  zeros((record + 32)..<(record + MILBlobFile.metadataSize))
            else { return nil }
            end = Int(blob.dataOffset) + blob.data.storedByteCount
        }
        return file
    }

    /// The size of the weight file this plan writes.
    var fileSize: UInt64 {
        guard let last = blobs.last else { return UInt64(MILBlobFile.headerSize) }
        return last.dataOffset + UInt64(last.data.storedByteCount)
    }
}

/// `value` rounded up to the blob alignment (64).
func alignedUp(_ value: UInt64) -> UInt64 {
    let alignment = UInt64(MILBlobFile.alignment)
    return (value + alignment - 1) / alignment * alignment
}

/// The bytes of a protobuf-c `bytes` field, or `nil` when empty.
func binary(_ data: ProtobufCBinaryData) -> UnsafeRawBufferPointer? {
    guard data.len > 0, let base = data.data else { return nil }
    return UnsafeRawBufferPointer(start: base, count: data.len)
}
