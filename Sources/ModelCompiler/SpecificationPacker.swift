import BundleFormat
import CoreMLSchema
import Glibc
import ModelSpec

/// Serializes the specification as a bundle stores it: every planned weight's
/// values replaced by a reference into the bundle's weight file.
///
/// The unpacked tree is changed in place for the length of one `pack` call
/// and restored before it returns, so the caller must hold the only reference
/// to it (the compiler opens its own `ModelFile`).
package enum SpecificationPacker {
    /// Runs `body` while every planned weight of the tree at `root` refers to
    /// its blob in the bundle's weight file instead of holding its values.
    static func withStrippedWeights<Result>(
        _ root: UnsafePointer<CoreML__Specification__Model>, plan: WeightPlan, _ body: () -> Result
    ) -> Result {
        var undo: [() -> Void] = []
        defer { for step in undo.reversed() { step() } }
        for weight in plan.weights {
            let blob = plan.blobs[weight.blob]
            switch weight.site.holder {
            case .weightParams(let params):
                undo.append(strip(params))
            case .programValue(let value):
                undo.append(point(value, at: blob.recordOffset))
            }
        }
        return body()
    }

    /// Serializes `specification` as it was unpacked.
    package static func pack(_ specification: Specification) -> [UInt8] {
        withExtendedLifetime(specification) { pack(specification.root) }
    }

    /// Serializes a message tree with protobuf-c.
    package static func pack(_ root: UnsafePointer<CoreML__Specification__Model>) -> [UInt8] {
        let message = UnsafeRawPointer(root).assumingMemoryBound(to: ProtobufCMessage.self)
        let size = protobuf_c_message_get_packed_size(message)
        var bytes = [UInt8](repeating: 0, count: size)
        let written = bytes.withUnsafeMutableBufferPointer { buffer in
            protobuf_c_message_pack(message, buffer.baseAddress)
        }
        precondition(written == size, "protobuf-c packed \(written) bytes, announced \(size)")
        return bytes
    }

    /// Empties every value field of a `WeightParams`; returns how to undo it.
    private static func strip(_ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>) -> () -> Void {
        let saved = params.pointee
        params.pointee.n_floatvalue = 0
        params.pointee.float16value.len = 0
        params.pointee.rawvalue.len = 0
        params.pointee.int8rawvalue.len = 0
        return {
            params.pointee.n_floatvalue = saved.n_floatvalue
            params.pointee.float16value.len = saved.float16value.len
            params.pointee.rawvalue.len = saved.rawvalue.len
            params.pointee.int8rawvalue.len = saved.int8rawvalue.len
        }
    }

    /// Makes an ML program value refer to the bundle's weight file at
    /// `offset`; returns how to undo it.
    private static func point(_ value: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>, at offset: UInt64) -> () -> Void {
        let reference = strdup(BundleLayout.programWeightReference)
        if value.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
           let blob = value.pointee.blobfilevalue {
            let saved = blob.pointee
            blob.pointee.filename = reference
            blob.pointee.offset = offset
            return {
                blob.pointee.filename = saved.filename
                blob.pointee.offset = saved.offset
                free(reference)
            }
        }
        // An inline constant: swap in a blob reference for the call.
        let savedCase = value.pointee.value_case
        let savedImmediate = value.pointee.immediatevalue
        let blob = UnsafeMutablePointer<CoreML__Specification__MILSpec__Value__BlobFileValue>.allocate(capacity: 1)
        core_ml__specification__milspec__value__blob_file_value__init(blob)
        blob.pointee.filename = reference
        blob.pointee.offset = offset
        value.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE
        value.pointee.blobfilevalue = blob
        return {
            value.pointee.value_case = savedCase
            value.pointee.immediatevalue = savedImmediate
            free(reference)
            blob.deallocate()
        }
    }
}
