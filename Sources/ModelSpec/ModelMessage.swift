import CoreMLSchema

/// One model of a specification, the root or a pipeline stage at any depth,
/// as the runtime prepares it: its stages, the parameters of a classic kind
/// as values, and the message itself for the tensor engine, which still reads
/// neural networks and ML programs from the protobuf-c tree (issue 40).
///
/// Borrows the tree of a `Specification`, which must outlive it.
package struct ModelMessage {
    /// The message; only for handing to the tensor engine.
    package let pointer: UnsafePointer<CoreML__Specification__Model>

    package init(_ pointer: UnsafePointer<CoreML__Specification__Model>) {
        self.pointer = pointer
    }

    /// A pipeline's models in order; empty for any other kind.
    package var stages: [ModelMessage] {
        ModelSummary.pipelineModels(pointer.pointee).map { ModelMessage(UnsafePointer($0)) }
    }

    /// The parameters of a classic model kind; `nil` for any other.
    package var classicModel: ClassicModel? { ClassicModel(pointer) }
}

extension Specification {
    /// The root model; valid while `self` is alive.
    package var model: ModelMessage { ModelMessage(root) }

    /// The size of the specification as protobuf: about what its unpacked tree takes.
    package var packedSize: Int {
        Int(clamping: core_ml__specification__model__get_packed_size(root))
    }
}
