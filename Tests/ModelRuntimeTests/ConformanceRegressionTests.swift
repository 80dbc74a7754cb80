import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// The defects coremltools' own operation tests found (issue 25), each on the
/// smallest model that showed it (`Fixtures/conformance_regressions.py`,
/// `Fixtures/Parity/Regressions/`): every output must have exactly the shape
/// of NumPy's float64 reference and values within 1e-5 relative to
/// max(1, |want|), from the source model and from its compiled bundle.
@Suite("Conformance regressions: shapes and values as coremltools' definitions give them")
struct ConformanceRegressionTests {
    /// Runs the regression file `name` both ways with exact shapes.
    private func check(_ name: String) throws {
        let file = ParityFile(name: "Regressions/\(name)")
        try file.check(exactShapes: true)
        try file.check(compiled: true, exactShapes: true)
    }

    @Test("every regression fixture is checked by a test here")
    func everyFixtureIsCovered() {
        let covered: Set<String> = [
            "nn_channel_layers_batch1", "nn_channel_layers_batch2", "nn_channel_layers_rank5", "nn_pool_leading_ones", "nn_pad_rank2", "nn_upsample_batch",
            "program_gather_batch_dims", "nn_batched_matmul_constant_transpose", "program_upsample_bilinear_modes",
            "program_instance_norm_defaults", "nn_batchnorm_batch", "program_transpose_negative_axes",
            "program_matmul_batch_broadcast", "program_reshape_zero_dims", "nn_l2_normalize_epsilon",
            "program_flexible_channels", "program_cast_of_constexpr", "nn_batched_matmul_rank1",
            "nn_convolution_weights_input", "program_upsample_bilinear_fractional", "nn_upsample_fractional",
            "nn_tile_dynamic_reps", "nn_slice_dynamic_defaults", "nn_rank_from_values",
            "nn_squeeze_all_rank1", "nn_split_nd_uneven", "nn_batched_matmul_rank1_second", "nn_batched_matmul_quantized_per_channel",
            "nn_non_maximum_suppression", "nn_non_maximum_suppression_inputs", "nn_scatter_rank2_indices",
            "nn_tile_short_reps", "nn_slice_by_size_input_begin", "nn_rank_kept_by_converter_layers",
            "nn_rank5_sequence_length", "nn_image_input_nhwc_transpose", "nn_loop_break_continue",
            "nn_non_maximum_suppression_inverted_boxes", "nn_gather_nd_stacked_indices", "program_lstm_initial_state_rows",
        ]
        #expect(Set(ParityFile.all(in: "Regressions").map { String($0.name.dropFirst("Regressions/".count)) }) == covered)
    }

    /// 1. Neural-network layers keep the leading dimensions of a rank-4 input
    /// ([Batch, C, H, W]) and run each item of a batch on its own: an average
    /// pool over (1, 2, 1, 2) gives (1, 2, 1, 1), not (2, 1, 1).
    @Test("1: channel-first layers keep rank 4 and leading 1s, padding rank 2", arguments: ["nn_channel_layers_batch1", "nn_pool_leading_ones", "nn_pad_rank2"])
    func channelLayersKeepRank(_ name: String) throws {
        try check(name)
    }

    /// 1. A batch of more than one is not folded into the channels, and a
    /// rank-5 [Seq, Batch, C, H, W] blob keeps both leading dimensions.
    @Test("1: channel-first layers run a batch item by item", arguments: ["nn_channel_layers_batch2", "nn_channel_layers_rank5", "nn_upsample_batch"])
    func channelLayersKeepTheBatch(_ name: String) throws {
        try check(name)
    }

    /// 2. iOS16 `gather` honours `batch_dims`.
    @Test("2: gather with batch_dims")
    func gatherBatchDims() throws {
        try check("program_gather_batch_dims")
    }

    /// 3. A neural-network batched matmul with constant weights ignores `transposeA`.
    @Test("3: batched matmul with constant weights ignores transposeA")
    func batchedMatMulConstantTranspose() throws {
        try check("nn_batched_matmul_constant_transpose")
    }

    /// 3. A rank-1 first operand of a two-input batched matmul is read as (1, D)
    /// (the layer engine refuses it; the tensor engine runs it through the lowering).
    @Test("3: batched matmul of a rank-1 first input")
    func batchedMatMulRank1() throws {
        try check("nn_batched_matmul_rank1")
    }

    /// 4. iOS16 `upsample_bilinear` with neither aligned corners nor half-pixel centres.
    @Test("4: upsample_bilinear sampling modes")
    func upsampleBilinearModes() throws {
        try check("program_upsample_bilinear_modes")
    }

    /// `upsample_bilinear` with fractional scales samples Xin / Xout apart (the
    /// recomputed scale), not 1 / scale: [0, 1] × 2.6 gives [0, 0.1, 0.5, 0.9, 1]
    /// (coremltools' iOS14 `TestUpsampleBilinear`, neural-network backend).
    @Test("upsample_bilinear with fractional scales", arguments: ["program_upsample_bilinear_fractional", "nn_upsample_fractional"])
    func upsampleBilinearFractional(_ name: String) throws {
        try check(name)
    }

    /// A neural-network `tile` whose repetitions are its second input (once
    /// refused, exit 94): the output's shape follows each prediction's repetitions
    /// (coremltools' iOS14 `TestDynamicTile`).
    @Test("tile with repetitions computed at run time")
    func tileDynamicReps() throws {
        try check("nn_tile_dynamic_reps")
    }

    /// A neural-network `sliceDynamic` carrying coremltools' builder defaults
    /// (five masks and strides) on a rank-3 input (once invalid: "stride has 5
    /// values for rank 3"; coremltools' iOS14 `TestSliceBySize`).
    @Test("sliceDynamic with five-value default parameters on rank 3")
    func sliceDynamicDefaults() throws {
        try check("nn_slice_dynamic_defaults")
    }

    /// Neural-network `fillDynamic`, `reshapeDynamic` and `broadcastToDynamic`
    /// whose shape input has a flexible length (once refused, exit 94: "the rank
    /// of its output depends on values computed at run time"): a result only
    /// returned takes the rank of each prediction's shape (coremltools' iOS14
    /// `TestFill` and `TestReshape`, symbolic).
    @Test("a returned result whose rank comes from a shape of flexible length")
    func rankFromValues() throws {
        try check("nn_rank_from_values")
    }

    /// 5. `instance_norm` without `gamma` and `beta` (and with `gamma` only, and rank 3).
    @Test("5: instance_norm without gamma and beta")
    func instanceNormDefaults() throws {
        try check("program_instance_norm_defaults")
    }

    /// 6. A neural-network batchnorm reads channels at axis -3 of a rank-4 input.
    @Test("6: batchnorm on a batch of 4")
    func batchnormBatch() throws {
        try check("nn_batchnorm_batch")
    }

    /// 7. `transpose` with negative axes.
    @Test("7: transpose with negative axes")
    func transposeNegativeAxes() throws {
        try check("program_transpose_negative_axes")
    }

    /// 8. `matmul` broadcasts batch dimensions of different ranks.
    @Test("8: matmul broadcasts batch dimensions")
    func matmulBatchBroadcast() throws {
        try check("program_matmul_batch_broadcast")
    }

    /// 9. iOS17 `reshape`: a 0 copies the dimension counted from the end.
    @Test("9: iOS17 reshape with 0")
    func reshapeZeros() throws {
        try check("program_reshape_zero_dims")
    }

    /// Found by the same tests: L2 normalize divides by sqrt(Σx² + ε), not
    /// sqrt(max(Σx², ε)), over each item's C, H, W.
    @Test("L2 normalize adds epsilon")
    func l2NormalizeEpsilon() throws {
        try check("nn_l2_normalize_epsilon")
    }

    /// Found by coremltools' iOS14 TestConv weights-input stress test: a
    /// convolution may take its weights [C_out, C_in / groups, kH, kW] as its
    /// second input; grouped, biased, padded and strided, it matches NumPy.
    @Test("a convolution runs with its weights as a second input")
    func convolutionWeightsInput() throws {
        try check("nn_convolution_weights_input")
    }

    /// Found by the same tests: a flexible input whose default shape does not
    /// fit the weights is not an invalid model; the shape given is planned.
    @Test("a flexible input's default need not fit the weights")
    func flexibleChannels() throws {
        try check("program_flexible_channels")
    }

    /// Found by the same tests: `cast` of a constant (a constexpr's result,
    /// cast by a float16 conversion) runs instead of being refused.
    @Test("cast of a constant")
    func castOfConstant() throws {
        try check("program_cast_of_constexpr")
    }

    /// Found by coremltools' converter tests (issue 37, test_numpy_nn_layers
    /// and test_nn_builder): a neural network's squeezeAll never gives rank 0;
    /// splitND into uneven parts follows np.array_split; a rank-1 second
    /// operand of a batched matmul is (D, 1) and keeps its axis; weights
    /// quantized per output channel of a batched matmul are valid; the
    /// NonMaximumSuppression layer runs, its thresholds parameters or inputs;
    /// scatter takes indices of rank 2; tile repeats as np.tile; an int
    /// vector the lowering reshapes stays int (sliceBySize's begin input); a
    /// slice of a rank-1 blob stays rank 1; gatherND's rank follows constant
    /// indices; a copy may write over an input's blob; a rank-5 network takes
    /// its sequence length from the input.
    @Test("issue 37: neural-network layers as the converter tests check them",
          arguments: ["nn_squeeze_all_rank1", "nn_split_nd_uneven", "nn_batched_matmul_rank1_second", "nn_batched_matmul_quantized_per_channel",
                      "nn_non_maximum_suppression", "nn_non_maximum_suppression_inputs", "nn_scatter_rank2_indices",
                      "nn_tile_short_reps", "nn_slice_by_size_input_begin", "nn_rank_kept_by_converter_layers",
                      "nn_rank5_sequence_length"])
    func converterTestLayers(_ name: String) throws {
        try check(name)
    }

    /// Found by test_model's test_multiarray_to_image_input_util_HWC_format
    /// (issue 37): a transpose of fewer axes than its input permutes the
    /// trailing ones. make_image_input's NHWC transpose [1, 2, 0] after a
    /// rank-aware network's [1, 3, H, W] image input was refused ("not a
    /// permutation of 4 axes"); it gives the (H, W, C) pixels, as Core ML does.
    @Test("issue 37: make_image_input's NHWC transpose after an image input")
    func imageInputNHWCTranspose() throws {
        try check("nn_image_input_nhwc_transpose")
    }

    /// Found by the converter tests with NumPy 2.3 (TestEinsum, a diagonal
    /// taken with dynamic shapes): a gatherND whose indices are a stack of
    /// ranges computed from the input's shape. The indices' last dimension
    /// was not known at load, so the result's rank was taken as 4 and the
    /// prediction refused; a stack along its last axis has a column per input.
    @Test("gatherND by a stack of ranges: the indices' last dimension from the stack")
    func gatherNDStackedIndices() throws {
        try check("nn_gather_nd_stacked_indices")
    }

    /// Found by the converter tests with NumPy 2.3 (TestLSTMWithPackedSequence):
    /// coremltools gives a packed sequence's LSTM zero initial states with a row
    /// per step of the longest sequence, not per batch item; Core ML runs it,
    /// modelc refused it. The first rows are read.
    @Test("an LSTM whose initial states have more rows than its batch")
    func lstmInitialStateRows() throws {
        try check("program_lstm_initial_state_rows")
    }

    /// Found running test_numpy_nn_layers in full (issue 37's audit:
    /// test_power_iteration_cpu): a loopBreak ends its loop and a
    /// loopContinue the iteration, the body's layers after them not run
    /// (both were refused: no lowering rule).
    @Test("loopBreak and loopContinue inside a loop's branches")
    func loopBreakAndContinue() throws {
        try check("nn_loop_break_continue")
    }

    /// Found running test_torch_ops' TestNms in full (issue 37's audit):
    /// boxes of negative width or height (torchvision's unordered corners)
    /// keep their corners as given, so they overlap nothing; modelc put the
    /// corners in order and suppressed other boxes with them.
    @Test("NonMaximumSuppression of boxes of negative width or height")
    func suppressionOfInvertedBoxes() throws {
        try check("nn_non_maximum_suppression_inverted_boxes")
    }
}

/// Valid networks modelc does not run (`Fixtures/Parity/Regressions/Unsupported`)
/// are refused at load as unsupported, naming the layer and what it lacks,
/// never as invalid models.
@Suite("Valid models modelc cannot run are refused as unsupported, not invalid")
struct UnsupportedValidModelTests {
    static let refused: [(file: String, error: RuntimeError)] = [
        ("nn_custom_layer", .unsupportedLayer(layer: "scale", kind: "custom",
                                              reason: "the tensor engine's lowering has no rule for this layer kind yet")),
        ("nn_rank_from_values_read", .unsupportedLayer(layer: "fill", kind: "fillDynamic",
                                                       reason: "the rank of its output depends on values computed at run time, and the model does not declare it")),
    ]

    @Test("every fixture is listed here")
    func everyFixtureIsListed() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("Parity/Regressions/Unsupported"))
        #expect(Set(names) == Set(Self.refused.map { "\($0.file).mlmodel" }))
    }

    @Test("Model(contentsOf:) throws unsupportedLayer", arguments: refused.map(\.file))
    func refusedAtLoad(_ file: String) throws {
        let expected = try #require(Self.refused.first { $0.file == file }?.error)
        #expect(throws: ModelError.runtime(expected)) {
            _ = try Model(contentsOf: Fixtures.path("Parity/Regressions/Unsupported/\(file).mlmodel"))
        }
    }
}
