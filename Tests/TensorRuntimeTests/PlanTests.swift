import FixtureSupport
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// What a plan holds: values sharing arena bytes when their lives do not
/// overlap, shape arithmetic folded, one plan per input shape.
@Suite("Plans of the tensor engine")
struct PlanTests {
    static func engine(_ path: String) throws -> TensorEngine {
        let file = try ModelFile.open(Fixtures.path(path))
        return try withExtendedLifetime(file) {
            try TensorEngine(program: file.specification.root, interface: ModelInterface(ModelSummary(file)),
                             modelDirectory: file.modelDirectory)
        }
    }

    @Test("values whose lives do not overlap share the arena", arguments: [4, 31, 64])
    func arenaIsReused(length: Int) throws {
        let engine = try Self.engine("Parity/Zoo/bert_fp32.mlpackage")
        let plan = try engine.plan(for: ["input_ids": [1, length]])
        let computed = plan.values.indices.filter { plan.offsets[$0] != nil }
        let total = computed.reduce(0) { $0 + plan.values[$1].count * 4 }
        let largest = computed.map { plan.values[$0].count * 4 }.max() ?? 0
        #expect(plan.arenaBytes >= largest)
        #expect(plan.arenaBytes * 3 < total, "arena \(plan.arenaBytes) bytes for \(total) bytes of values")
        // Two values alive at once never overlap: check every step's reads and writes.
        func range(_ id: Int) -> Range<Int>? {
            plan.offsets[id].map { $0..<($0 + max(plan.values[id].count, 1) * 4) }
        }
        for step in plan.steps {
            for write in step.writes {
                for read in step.reads where read != write {
                    guard let a = range(write), let b = range(read), a != b || plan.values[write].count == 0 else { continue }
                    #expect(!a.overlaps(b), "\(step.operation): output \(write) overlaps input \(read)")
                }
            }
        }
    }

    @Test("shape arithmetic is folded: no shape, gather of shapes or fill runs at prediction")
    func shapeArithmeticFolds() throws {
        let engine = try Self.engine("Parity/Zoo/bert_fp32.mlpackage")
        let plan = try engine.plan(for: ["input_ids": [1, 9]])
        #expect(!plan.steps.contains { $0.kind == "shape" || $0.kind == "fill" })
        #expect(plan.steps.allSatisfy { step in step.kind != "concat" || step.reads.contains { plan.values[$0].constant == nil } })
    }

    @Test("a steady stream of predictions reuses one state: no arena is made after the first, outputs unchanged")
    func steadyStateReusesTheArena() throws {
        let engine = try Self.engine("Parity/Zoo/mobilenet_v3_small_fp32.mlpackage")
        let pixels: [Double] = (0..<3072).map { (index: Int) -> Double in Double((index * 29) % 17) / 8 - 1 }
        let inputs: [String: FeatureValue] = ["pixel_values": .multiArray(MultiArray(pixels, shape: [1, 3, 32, 32], dataType: .float32))]
        let first = try #require(engine.predict(inputs).values.first?.multiArrayValue?.floats)
        let resident = engine.residentBytes
        for _ in 0..<4 {
            let again = try #require(engine.predict(inputs).values.first?.multiArrayValue?.floats)
            #expect(again == first)
            #expect(engine.residentBytes == resident, "a prediction after the first made another state")
        }
    }

    @Test("one plan per input shape, cached")
    func plansAreCached() throws {
        let engine = try Self.engine("Parity/Zoo/gpt2_fp32.mlpackage")
        let first = try engine.plan(for: ["input_ids": [1, 5]])
        let again = try engine.plan(for: ["input_ids": [1, 5]])
        let other = try engine.plan(for: ["input_ids": [1, 7]])
        #expect(first.memory === again.memory)
        #expect(first.memory !== other.memory)
        #expect(other.values.contains { $0.shape == [1, 7, 96] })
    }

    @Test("a shape decided at run time ends the plan; the rest is planned per shape it gives, cached and bounded")
    func runTimeShapesAreStaged() throws {
        let engine = try Self.engine("Parity/TensorOps/runtime_shapes.mlpackage")
        let plan = try engine.plan(for: ["x": [4, 5], "b": [2], "e": [2], "n": [1]])
        let continuation = try #require(plan.continuation)
        #expect(continuation.operation.type == "slice_by_index")
        // What the rest reads stays alive to the end of the plan before it.
        #expect(continuation.carried.keys.contains("x"))
        func run(_ begin: [Int32], _ end: [Int32], _ count: Int32) throws -> [Int] {
            var inputs: [String: FeatureValue] = [
                "x": .multiArray(MultiArray([Double](repeating: 1, count: 20), shape: [4, 5], dataType: .float32)),
                "b": .multiArray(MultiArray(begin.map(Double.init), shape: [2], dataType: .int32)),
                "e": .multiArray(MultiArray(end.map(Double.init), shape: [2], dataType: .int32)),
            ]
            inputs["n"] = .multiArray(MultiArray([Double(count)], shape: [1], dataType: .int32))
            return try engine.predict(inputs)["window"]?.multiArrayValue?.shape ?? []
        }
        #expect(try run([1, 2], [3, 5], 3) == [2, 3])
        #expect(continuation.cachedPlans == 1)
        #expect(try run([0, 1], [4, 3], 1) == [4, 2])
        #expect(continuation.cachedPlans == 2)
        // The same shapes again: no new plan.
        #expect(try run([1, 2], [3, 5], 3) == [2, 3])
        #expect(continuation.cachedPlans == 2)
        for row in 0..<4 { _ = try run([Int32(row), 0], [4, 5], 3) }
        for column in 0..<4 { _ = try run([0, Int32(column)], [4, 5], 3) }
        #expect(continuation.cachedPlans <= PlanContinuation.cacheLimit)
    }

    @Test("a program whose shapes are all known has no continuation")
    func fixedShapesAreOnePlan() throws {
        let engine = try Self.engine("Parity/Zoo/bert_fp32.mlpackage")
        #expect(try engine.plan(for: ["input_ids": [1, 9]]).continuation == nil)
    }
}
