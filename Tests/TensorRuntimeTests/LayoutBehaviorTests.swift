import Foundation
import Testing
@testable import TensorRuntime

/// What every operation declares of its layout (`LayoutBehavior`) holds:
/// each operation declared `elementwise`, run on a tensor laid out
/// channels-last (and its second operand laid out the same way), gives the
/// channels-last layout of what it gives on MIL's layout; each declared
/// `reducesAxes` gives, over the remapped axes, the same values. A wrong
/// declaration would make `ChannelsLastLayout` change a model's results.
@Suite("Layout behaviour declared by each operation")
struct LayoutBehaviorTests {
    static let (n, c, h, w) = (1, 3, 2, 4)

    /// Values in (0.1, 0.9): inside every elementwise operation's domain (acos, log, atanh, division).
    static func values(_ seed: Int) -> [Float] {
        (0..<(n * c * h * w)).map { Float(0.1 + 0.8 * (0.5 + 0.5 * sin(Double($0 * 7 + seed) * 0.91))) }
    }

    /// `[N, C, H, W]` values laid out as `[N, H, W, C]`.
    static func channelsLast(_ values: [Float]) -> [Float] {
        var result: [Float] = []
        for y in 0..<h { for x in 0..<w { for k in 0..<c { result.append(values[(k * h + y) * w + x]) } } }
        return result
    }

    /// Runs `type` on `x` (and `y` when it takes one) of `shape`, with `extra` constant arguments.
    static func run(_ type: String, shape: [Int], x: [Float], y: [Float]?, extra: [String: [GraphArgument]] = [:],
                    output: [Int?]? = nil) throws -> [Float] {
        let value = ValueType(element: .float32, shape: shape.map { Optional($0) })
        var arguments = extra
        arguments["x"] = [.value("x")]
        var inputs: [(name: String, type: ValueType)] = [("x", value)]
        if y != nil {
            arguments["y"] = [.value("y")]
            inputs.append(("y", value))
        }
        let op = GraphOperation(type: type, arguments: arguments, outputs: [("o", ValueType(element: .float32, shape: output ?? value.shape))], blocks: [])
        let function = GraphFunction(name: "main", inputs: inputs, block: GraphBlock(operations: [op], outputs: ["o"], constants: [:]))
        let plan = try Planner.plan(function, shapes: Dictionary(uniqueKeysWithValues: inputs.map { ($0.name, shape) }))
        let state = TensorState(plan: plan)
        for (name, given) in [("x", x), ("y", y ?? [])] where !given.isEmpty {
            let id = try #require(plan.inputs[name])
            for index in given.indices { state.buffers.floats(id)[index] = given[index] }
        }
        try state.run()
        return state.tensor(try #require(plan.outputs["o"])).floats
    }

    static func same(_ a: [Float], _ b: [Float]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.bitPattern == $1.bitPattern || ($0.isNaN && $1.isNaN) }
    }

    @Test("every operation declared elementwise commutes with the channels-last layout")
    func elementwise() throws {
        let declared = OperationRegistry.fileOperations.filter { $0.value.layout == .elementwise }.keys.sorted()
        #expect(declared.count == 57, "\(declared)")
        let x = Self.values(1), y = Self.values(5)
        for type in declared {
            let binary = OperationRegistry.fileOperations[type]?.parameters.contains("y") == true
            let mil = try Self.run(type, shape: [Self.n, Self.c, Self.h, Self.w], x: x, y: binary ? y : nil)
            let last = try Self.run(type, shape: [Self.n, Self.h, Self.w, Self.c], x: Self.channelsLast(x), y: binary ? Self.channelsLast(y) : nil)
            #expect(Self.same(last, Self.channelsLast(mil)), "\(type)")
        }
    }

    @Test("every operation declared to reduce over axes gives the same values over the remapped axes")
    func reductions() throws {
        let declared = OperationRegistry.fileOperations.filter { $0.value.layout == .reducesAxes }.keys.sorted()
        #expect(declared.count == 10, "\(declared)")
        let x = Self.values(3), keep = GraphArgument.constant(Tensor(ints: [1], shape: [], type: .bool))
        let axes = { (values: [Int32]) in GraphArgument.constant(Tensor(ints: values, shape: [values.count])) }
        for type in declared {
            // Over H and W (a spatial mean), and over C; MIL's axes mapped by ChannelsLastLayout.axisMap.
            for milAxes in [[2, 3], [1]] {
                let mapped = milAxes.map { Int32(ChannelsLastLayout.axisMap[$0]) }
                var milShape = [Self.n, Self.c, Self.h, Self.w], lastShape = [Self.n, Self.h, Self.w, Self.c]
                for axis in milAxes { milShape[axis] = 1 }
                for axis in mapped { lastShape[Int(axis)] = 1 }
                let mil = try Self.run(type, shape: [Self.n, Self.c, Self.h, Self.w], x: x, y: nil,
                                       extra: ["axes": [axes(milAxes.map(Int32.init))], "keep_dims": [keep]], output: milShape.map { Optional($0) })
                let last = try Self.run(type, shape: [Self.n, Self.h, Self.w, Self.c], x: Self.channelsLast(x), y: nil,
                                        extra: ["axes": [axes(mapped)], "keep_dims": [keep]], output: lastShape.map { Optional($0) })
                // Over H and W the results are [C] either way; over C, [H, W] in the same order either way.
                #expect(Self.same(last, mil), "\(type) over \(milAxes)")
            }
        }
    }
}
