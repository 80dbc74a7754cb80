import CoreMLSchema


/// A Core ML specification (`CoreML.Specification.Model`) unpacked by protobuf-c.
///
/// Owns the C message tree and frees it when released. The tree is never
/// changed after unpacking, so a `Specification` may be shared across threads;
/// views into it (`root`) must not outlive it.
public final class Specification: @unchecked Sendable {
    /// The root message; valid while `self` is alive.
    package let root: UnsafePointer<CoreML__Specification__Model>

    private init(root: UnsafePointer<CoreML__Specification__Model>) {
        self.root = root
    }

    deinit {
        protobuf_c_message_free_unpacked(
            UnsafeMutableRawPointer(mutating: root).assumingMemoryBound(to: ProtobufCMessage.self), nil)
    }

    /// Checks and unpacks serialized specification bytes.
    ///
    /// - Parameter path: the file the bytes came from, for error messages.
    /// - Throws: `ModelSpecError` — `.emptyFile`, `.notCoreML` (another file
    ///   format, or not protobuf), `.truncated`, `.malformed`, or
    ///   `.unknownModelType` when the model's type is a field this schema lacks.
    public static func unpack(_ bytes: UnsafeRawBufferPointer, path: String) throws(ModelSpecError) -> Specification {
        try unpack(bytes, path: path, release: { _ in })
    }

    /// Checks and unpacks; `release` is told each range of `bytes` whose
    /// contents have been copied out (a mapped file can drop those pages).
    static func unpack(
        _ bytes: UnsafeRawBufferPointer, path: String, release: (Range<Int>) -> Void
    ) throws(ModelSpecError) -> Specification {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { throw .emptyFile(path: path) }
        if let format = FileFormatSniffer.identify(bytes) {
            throw .notCoreML(path: path, detail: "the file is \(format)")
        }
        let descriptor = messageDescriptor(core_ml__specification__model__init, CoreML__Specification__Model())
        let largeFields: [WireFormatGuard.LargeWeightField]
        do {
            largeFields = try WireFormatGuard.check(bytes, as: descriptor)
        } catch {
            switch error {
            case .truncated(let detail): throw .truncated(path: path, detail: detail)
            case .malformed(let detail): throw .malformed(path: path, detail: detail)
            case .notCoreML(let detail): throw .notCoreML(path: path, detail: detail)
            }
        }
        let skeleton = largeFields.isEmpty
            ? nil : SkeletonUnpacker.unpack(bytes, fields: largeFields, descriptor: descriptor, release: release)
        guard let message = skeleton ?? protobuf_c_message_unpack(
            descriptor, nil, bytes.count, base.assumingMemoryBound(to: UInt8.self))
        else {
            throw .malformed(path: path, detail: "protobuf-c rejected the message")
        }
        let specification = Specification(
            root: UnsafeRawPointer(message).assumingMemoryBound(to: CoreML__Specification__Model.self))
        if specification.root.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE__NOT_SET {
            let unknown = MessageView(specification.root).unknownFieldNumbers
            if !unknown.isEmpty { throw .unknownModelType(path: path, fieldNumbers: unknown) }
        }
        return specification
    }
}
