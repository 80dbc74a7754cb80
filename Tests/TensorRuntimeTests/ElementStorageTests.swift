import CVectorMath
import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing
@testable import TensorRuntime

/// Typed storage: a state declared fp16 is held as halves (two bytes each);
/// the operations a decoder's cache goes through read it as it lies (views,
/// widening copies, attention over halves), any other operation is given a
/// widened copy; and the half-float kernels attention uses agree with
/// float64 on the same halves.
@Suite("Element storage: fp16 states as halves")
struct ElementStorageTests {
    // MARK: Kernels

    /// Halves from a seeded sweep of magnitudes (some subnormal, some rounding to ±65504 or beyond).
    static func halves(_ count: Int, seed: Int) -> [UInt16] {
        (0..<count).map { index in
            let x = sin(Double(index * 7 + seed) * 0.618) * pow(2, Double((index * 5 + seed) % 20) - 12)
            return Float16(Float(x)).bitPattern
        }
    }

    static func double(_ half: UInt16) -> Double { Double(Float(Float16(bitPattern: half))) }

    @Test("rows of halves times a vector, and a weighted sum of rows of halves, are float64's on the same halves within 1e-5 of the sum of magnitudes",
          arguments: [(1, 1), (1, 64), (7, 8), (8, 64), (9, 65), (17, 100), (428, 64), (33, 128)])
    func halfRowKernels(rows: Int, columns: Int) {
        let stride = columns + 3  // rows apart by more than their length, as a cache's heads are
        let a = Self.halves(rows * stride, seed: rows)
        let x = (0..<max(rows, columns)).map { Float(cos(Double($0) * 0.37)) }
        let scale: Float = 0.125
        var dot = [Float](repeating: .nan, count: rows), combined = [Float](repeating: .nan, count: columns)
        a.withUnsafeBytes { halves in
            modelc_half_rows_dot(halves.baseAddress, rows, columns, stride, x, scale, &dot)
            modelc_half_rows_combine(halves.baseAddress, rows, columns, stride, x, scale, &combined)
        }
        for r in 0..<rows {
            let terms = (0..<columns).map { Self.double(a[r * stride + $0]) * Double(x[$0]) }
            let want = Double(scale) * terms.reduce(0, +), magnitude = Double(scale) * terms.map(abs).reduce(0, +)
            #expect(abs(Double(dot[r]) - want) <= 1e-5 * max(magnitude, 1e-30), "dot row \(r) of \(rows)×\(columns): \(dot[r]), float64 \(want)")
        }
        for c in 0..<columns {
            let terms = (0..<rows).map { Self.double(a[$0 * stride + c]) * Double(x[$0]) }
            let want = Double(scale) * terms.reduce(0, +), magnitude = Double(scale) * terms.map(abs).reduce(0, +)
            #expect(abs(Double(combined[c]) - want) <= 1e-5 * max(magnitude, 1e-30), "combine column \(c) of \(rows)×\(columns): \(combined[c]), float64 \(want)")
        }
    }

    @Test("floats stored as halves round to nearest, ties to even, as Float16 does, and widen back exactly")
    func halvesRoundTrip() {
        let ties: [Float] = [1 + 1.0 / 2048, 1 + 3.0 / 2048, 2049, 2051, 65520, -65520, 5.9604645e-8 / 2, 1e-8]
        let floats = (0..<1000).map { Float(sin(Double($0)) * pow(10, Double($0 % 13) - 6)) } + ties + [0, -0, .infinity, -.infinity, 70000]
        for count in [1, 7, 8, 9, floats.count] {
            var stored = [UInt16](repeating: 0, count: count), back = [Float](repeating: .nan, count: count)
            stored.withUnsafeMutableBytes { ElementConversion.narrow(floats, count: count, into: $0.baseAddress!) }
            stored.withUnsafeBytes { halves in
                back.withUnsafeMutableBytes { ElementConversion.widen(halves.baseAddress!, count: count, into: $0.baseAddress!) }
            }
            for index in 0..<count {
                #expect(stored[index] == Float16(floats[index]).bitPattern, "\(floats[index])")
                #expect(back[index].bitPattern == Float(Float16(floats[index])).bitPattern, "\(floats[index])")
            }
        }
        var nan = [UInt16](repeating: 0, count: 1)
        nan.withUnsafeMutableBytes { ElementConversion.narrow([Float.nan], count: 1, into: $0.baseAddress!) }
        #expect(Float16(bitPattern: nan[0]).isNaN)
    }

    @Test("an fp16 array's elements widened in bulk are its elements one at a time, bit for bit, for any range")
    func widenedFloats() {
        let sweep: [Double] = (0..<1_000).map { index -> Double in sin(Double(index)) * pow(10, Double(index % 11) - 5) }
        let values = sweep + [0, -0, 65504, -65504, 1e-7, .infinity, -.infinity]
        let array = MultiArray(values, shape: [values.count], dataType: .float16)
        for range in [0..<values.count, 3..<3, 7..<8, 990..<values.count, 1..<1_000] {
            #expect(array.widenedFloats(range).map(\.bitPattern) == array.floats(range).map(\.bitPattern), "\(range)")
        }
        let floats = MultiArray(values, shape: [values.count], dataType: .float32)
        #expect(floats.widenedFloats(5..<50) == floats.floats(5..<50))
    }

    // MARK: States

    @Test("an fp16 state takes two bytes an element: the accumulator's 16, and the decoder's caches")
    func stateBytes() throws {
        let accumulator = try Model(contentsOf: Fixtures.path("Models/StatefulProgram.mlpackage"), configuration: ModelConfiguration(threads: 1))
        #expect(try #require(accumulator.makeState()).bytes == 16 * 2)
        // LlamaDecoder: keyCache and valueCache [layers 2, 1, kv heads 2, context 32, head 16] in fp16.
        let decoder = try Model(contentsOf: Fixtures.path("Models/LlamaDecoderFP16.mlpackage"), configuration: ModelConfiguration(threads: 1))
        #expect(try #require(decoder.makeState()).bytes == 2 * (2 * 1 * 2 * 32 * 16) * 2)
    }

    /// The decoder's plans for a prompt of `q` tokens at `end`, fused as the engine fuses.
    static func decoderPlan(q: Int, end: Int, threads: Int) async throws -> TensorPlan {
        var function = try await AttentionFusionTests.graph("Models/LlamaDecoderInt4.mlpackage")
        function.block = FusionPass.run(function.block)
        return try Planner.plan(function, shapes: ["inputIds": [1, q], "causalMask": [1, 1, q, end]], threads: threads)
    }

    @Test("the decoder's caches stay halves through its plan: attention reads them where they lie, nothing widens them whole",
          arguments: [(1, 9), (3, 3), (5, 20)])
    func decoderReadsHalvesInPlace(q: Int, end: Int) async throws {
        for threads in [1, 2] {
            let plan = try await Self.decoderPlan(q: q, end: end, threads: threads)
            #expect(plan.states.count == 2)
            for id in plan.states.values { #expect(plan.values[id].storage == .float16) }
            #expect(!plan.steps.contains { $0.kind == "widen" }, "\(plan.steps.filter { $0.kind == "widen" }.map(\.operation))")
            #expect(plan.steps.filter { $0.kind == "update_state_slice" }.count >= 1)
            // The arena holds no copy of a cache: its values' bytes are the states' own.
            let stateBytes = plan.states.values.map { plan.values[$0].bytes }.reduce(0, +)
            #expect(stateBytes == 2 * (2 * 1 * 2 * 32 * 16) * 2)
        }
    }

    /// `x + read_state(s)` (an operation that reads floats only) with `s` fp16, then `s ← x` rounded to halves.
    static func accumulate(_ type: ElementType) -> GraphFunction {
        let value = ValueType(element: type, shape: [2, 5])
        return GraphFunction(name: "main", inputs: [("x", value), ("s", ValueType(element: type, shape: [2, 5], isState: true))], block: GraphBlock(operations: [
            GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("r", value)], blocks: []),
            GraphOperation(type: "add", arguments: ["x": [.value("x")], "y": [.value("r")]], outputs: [("y", value)], blocks: []),
            GraphOperation(type: "write_state", arguments: ["input": [.value("s")], "data": [.value("y")]], outputs: [], blocks: []),
            GraphOperation(type: "read_state", arguments: ["input": [.value("s")]], outputs: [("after", value)], blocks: []),
            GraphOperation(type: "mul", arguments: ["x": [.value("after")], "y": [.constant(Tensor(floats: [3], shape: []))]], outputs: [("z", value)], blocks: []),
        ], outputs: ["y", "z", "after"], constants: [:]))
    }

    @Test("operations that read floats are given the fp16 state widened, and a write rounds into it; an fp32 state keeps its floats")
    func widenedForOtherReaders() throws {
        for type in [ElementType.float16, .float32] {
            let fused = Self.accumulate(type)
            var function = fused
            function.block = FusionPass.run(fused.block)
            let plan = try Planner.plan(function, shapes: ["x": [2, 5]])
            let state = TensorState(plan: plan)
            let x = (0..<10).map { Float($0) * 0.3337 + 1000 }
            let s = try #require(plan.states["s"])
            #expect(plan.values[s].storage == (type == .float16 ? .float16 : .float32))
            // The state starts at 1/3 (as halves: 0.33325195), in its slot of the arena.
            state.useOwnSlot(forState: s, views: plan.stateViews["s"] ?? [])
            let third = Float(Float16(Float(1.0 / 3)))
            if type == .float16 {
                let halves = [UInt16](repeating: Float16(Float(1.0 / 3)).bitPattern, count: 10)
                halves.withUnsafeBytes { state.table[s].copyMemory(from: $0.baseAddress!, byteCount: 20) }
            } else {
                for index in 0..<10 { state.buffers.floats(s)[index] = third }
            }
            let input = try #require(plan.inputs["x"])
            for index in 0..<10 { state.buffers.floats(input)[index] = x[index] }
            try state.run()
            let y = state.tensor(try #require(plan.outputs["y"])).floats
            let after = state.tensor(try #require(plan.outputs["after"])).floats
            let z = state.tensor(try #require(plan.outputs["z"])).floats
            for index in 0..<10 {
                let sum = x[index] + third
                #expect(y[index] == sum)
                // Written into an fp16 state: rounded to halves (1000.33 → 1000.5 at this magnitude's spacing of 0.5).
                let stored = type == .float16 ? Float(Float16(sum)) : sum
                #expect(after[index] == stored)
                #expect(z[index] == stored * 3)
            }
        }
    }
}
