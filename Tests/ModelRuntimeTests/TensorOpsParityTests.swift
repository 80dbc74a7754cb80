import ModelRuntime
import Testing

/// One small ML program per family of operations (Fixtures/Parity/TensorOps,
/// made by Fixtures/tensor_ops.py with coremltools' MIL builder), run on the
/// tensor engine against NumPy float64 computed from the operation definitions.
@Suite("Tensor engine operations agree with NumPy float64")
struct TensorOpsParityTests {
    static let files = ParityFile.all(in: "TensorOps")

    @Test("the operation fixtures are there")
    func fixturesExist() {
        #expect(Self.files.count >= 15)
        let sampling = ["resample", "affine", "crop_resize_ios15", "crop_resize_ios17"].map { "TensorOps/\($0)" }
        #expect(Set(sampling).isSubset(of: Set(Self.files.map(\.name))))
    }

    @Test("each family of operations", arguments: files)
    func operations(_ file: ParityFile) throws {
        try file.check()
    }

    /// Shapes decided by values computed at prediction (`non_zero`, slices
    /// with computed bounds, `range_1d`, `fill`, `tile`, `reshape`, a `cond`
    /// whose branches differ in shape, a loop whose variable grows): exact
    /// shapes, from the source and compiled, two predictions at once.
    @Test("shapes decided at run time", arguments: ["runtime_shapes", "runtime_loop", "lists", "resize_ios17", "non_maximum_suppression", "non_maximum_suppression_ios17", "integer_matmul", "upsample_nearest_fractional", "unseeded_certain_random", "scatter_unvalidated_indices"])
    func runTimeShapes(_ name: String) throws {
        let file = ParityFile(name: "TensorOps/\(name)")
        try file.check(exactShapes: true)
        try file.check(compiled: true, concurrently: 2, exactShapes: true)
    }
}
