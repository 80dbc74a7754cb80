import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// How a rank-5 neural network lowers: consecutive channel-first layers stay
/// on the `[N, C, H, W]` view of their blobs, so that the fusion pass and the
/// channels-last layout see a convolution followed by its batch norm,
/// activation and residual sum (docs/runtime.md, "Neural networks on the
/// tensor engine"). The numbers themselves are checked by
/// `NetworkLoweringTests` and `ZooParityTests` against NumPy and PyTorch.
@Suite("Neural networks lowered onto [N, C, H, W] views")
struct LoweringViewTests {
    /// The block the tensor engine runs for a network fixture: lowered, folded, fused, laid out.
    static func planned(_ path: String) throws -> GraphBlock {
        let file = try ModelFile.open(Fixtures.path(path))
        return try withExtendedLifetime(file) {
            // The fixture's weights are float32 values.
            let weights = NetworkWeightReader { params, _, _, _ throws(RuntimeError) in
                params.map { Array(UnsafeBufferPointer(start: $0.pointee.floatvalue, count: $0.pointee.n_floatvalue)) }
            }
            let lowered = try NetworkLowering.lower(file.specification.root, interface: ModelInterface(ModelSummary(file)), weights: weights)
            #expect(lowered.rank5Inputs)
            let function = lowered.function
            return ChannelsLastLayout.run(FusionPass.run(Planner.foldConstants(function.block)), inputs: function.inputs)
        }
    }

    @Test("convolution, batchnorm, clip and the residual add of a rank-5 network become three fused_conv in one channels-last chain")
    func mobileNetBlock() throws {
        // stem conv → batchnorm → clip, depthwise conv → clip, pointwise conv + residual add, pooling, innerProduct, softmax.
        let block = try Self.planned("Parity/Networks/mobilenet_block.mlmodel")
        let types = block.operations.map(\.type)
        #expect(types.filter { $0 == "fused_conv" }.count == 3, "\(types)")
        for unfused in ["conv", "clip", "batch_norm", "add", "mul"] { #expect(!types.contains(unfused), "\(unfused) in \(types)") }
        // Into the chain once (the scaled image), out once (the pooled features).
        #expect(types.filter { $0 == "layout_transpose" }.count == 2, "\(types)")
        // The rank-5 blobs between the layers are never made: every reshape is the view's way in or out.
        #expect(types.filter { $0 == "reshape" }.count <= 5, "\(types)")
    }
}
