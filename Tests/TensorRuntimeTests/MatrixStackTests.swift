import Foundation
import Testing
@testable import TensorRuntime

/// Attention reads its operands' matrices where they lie (`MatrixStack`): a
/// grouped-query decoder's key and value heads sliced out of a cache,
/// repeated for their query heads and transposed (tile, reshape, transpose,
/// as coremltools converts `repeat_interleave`) are read in the cache, and
/// those copies leave the plan; the result is attention with each query head
/// on its key/value head, in float64.
@Suite("Matrix stacks")
struct MatrixStackTests {
    static let heads = 4, groups = 2, width = 8, context = 6

    static func op(_ type: String, _ output: String, _ shape: [Int], _ arguments: [String: [GraphArgument]]) -> GraphOperation {
        GraphOperation(type: type, arguments: arguments, outputs: [ConvolutionThreadingTests.value(output, shape)], blocks: [])
    }

    static func ints(_ values: [Int]) -> GraphArgument { .constant(Tensor(ints: values.map(Int32.init), shape: [values.count])) }

    /// The cache's first `end` positions of every key/value head, each repeated for its query heads, as `[1, heads, end, width]`.
    static func repeated(_ cache: String, _ name: String, end: Int) -> [GraphOperation] {
        let kv = heads / groups
        return [
            op("slice_by_index", "\(name)_s", [1, kv, end, width], ["x": [.value(cache)], "begin": [ints([0, 0, 0, 0])], "end": [ints([1, kv, end, width])]]),
            op("transpose", "\(name)_t", [kv, 1, end, width], ["x": [.value("\(name)_s")], "perm": [ints([1, 0, 2, 3])]]),
            op("tile", "\(name)_r", [heads, 1, end, width], ["x": [.value("\(name)_t")], "reps": [ints([groups, 1, 1, 1])]]),
            op("reshape", "\(name)_g", [groups, kv, 1, end, width], ["x": [.value("\(name)_r")], "shape": [ints([groups, kv, 1, end, width])]]),
            op("transpose", "\(name)_p", [kv, groups, 1, end, width], ["x": [.value("\(name)_g")], "perm": [ints([1, 0, 2, 3, 4])]]),
            op("reshape", "\(name)_h", [heads, 1, end, width], ["x": [.value("\(name)_p")], "shape": [ints([heads, 1, end, width])]]),
            op("transpose", name, [1, heads, end, width], ["x": [.value("\(name)_h")], "perm": [ints([1, 0, 2, 3])]]),
        ]
    }

    @Test("grouped-query attention over a cache runs without its slice, repeat and transpose copies, equal to float64", arguments: [1, 5])
    func groupedQueryAttention(end: Int) throws {
        let (heads, groups, width, context) = (Self.heads, Self.groups, Self.width, Self.context)
        let kv = heads / groups
        let block = GraphBlock(operations: Self.repeated("keys", "k", end: end) + Self.repeated("values", "v", end: end) + [
            Self.op("scaled_dot_product_attention", "a", [1, heads, 1, width], ["query": [.value("q")], "key": [.value("k")], "value": [.value("v")]]),
        ], outputs: ["a"], constants: [:])
        let function = GraphFunction(name: "main", inputs: [
            ConvolutionThreadingTests.value("q", [1, heads, 1, width]),
            ConvolutionThreadingTests.value("keys", [1, kv, context, width]),
            ConvolutionThreadingTests.value("values", [1, kv, context, width]),
        ], block: block)
        let plan = try Planner.plan(function, shapes: ["q": [1, heads, 1, width], "keys": [1, kv, context, width], "values": [1, kv, context, width]],
                                    threads: 1)
        #expect(plan.steps.map(\.kind) == ["scaled_dot_product_attention"], "\(plan.steps.map(\.operation))")
        let q = (0..<(heads * width)).map { Float(($0 * 7) % 11) * 0.1 - 0.5 }
        let keys = (0..<(kv * context * width)).map { Float(($0 * 5) % 13) * 0.1 - 0.6 }
        let values = (0..<(kv * context * width)).map { Float(($0 * 3) % 17) * 0.1 - 0.8 }
        let state = TensorState(plan: plan)
        for (name, data) in [("q", q), ("keys", keys), ("values", values)] {
            let id = try #require(plan.inputs[name])
            data.withUnsafeBytes { state.table[id].copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        try state.run()
        let out = try #require(plan.outputs["a"])
        let got = Array(UnsafeBufferPointer(start: state.buffers.floats(out), count: heads * width))
        for head in 0..<heads {
            let group = head / groups
            let scores = (0..<end).map { p in
                (0..<width).reduce(0.0) { $0 + Double(q[head * width + $1]) * Double(keys[(group * context + p) * width + $1]) } / Double(width).squareRoot()
            }
            let largest = scores.max() ?? 0
            let weights = scores.map { Foundation.exp($0 - largest) }, total = weights.reduce(0, +)
            for c in 0..<width {
                let want = (0..<end).reduce(0.0) { $0 + weights[$1] / total * Double(values[(group * context + $1) * width + c]) }
                #expect(abs(Double(got[head * width + c]) - want) <= 1e-5, "head \(head) column \(c): \(got[head * width + c]), float64 \(want)")
            }
        }
    }
}
