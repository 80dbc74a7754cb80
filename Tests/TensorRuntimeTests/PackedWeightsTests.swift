import CWeightKernels
import Foundation
import ModelSpec
import Testing
@testable import TensorRuntime

/// Weights kept as stored (`PackedWeights`) and the kernels reading them
/// (`CWeightKernels`): every stored form — int4/uint4/int8/uint8 codes with
/// per-block scales and offsets, 1- to 6-bit codes with per-block tables,
/// half floats — decoded, multiplied by a vector from either side, and
/// planned as a `linear` / `matmul` / `gather`, against float64 on the
/// values the form stands for. Shapes where the vector loops apply (blocks
/// of 16 or 32 codes) and where they do not (odd widths, rows starting
/// mid-byte), one row to many, 1 to 3 threads. `make test` runs this suite
/// again with `MODELC_MAX_CPU_ISA=avx2` and `generic`.
@Suite("Weights kept as stored")
struct PackedWeightsTests {
    /// One stored form, with the float64 value of every element.
    struct Form: CustomStringConvertible {
        var name: String
        var rows: Int
        var columns: Int
        var weights: PackedWeights
        var values: [Double]
        var description: String { "\(name) \(rows)×\(columns)" }
    }

    /// A deterministic sequence of codes in `0 ..< 2^bits`.
    static func codes(_ count: Int, bits: Int, seed: Int) -> [Int] {
        (0..<count).map { (($0 * 7_919 + seed * 104_729) ^ ($0 >> 3)) % (1 << bits) }
    }

    /// Codes packed as MIL stores them: `bits` each, from the lowest bit of each byte up.
    static func pack(_ codes: [Int], bits: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: (codes.count * bits + 7) / 8)
        for (index, code) in codes.enumerated() {
            for bit in 0..<bits where code >> bit & 1 == 1 {
                let position = index * bits + bit
                bytes[position / 8] |= 1 << UInt8(position % 8)
            }
        }
        return bytes
    }

    static func blockScaled(_ name: String, rows: Int, columns: Int, bits: Int, signed: Bool, blockRows: Int, blockColumns: Int,
                            offsets: Bool, seed: Int, roundsToHalf: Bool = false, halfScales: Bool = false) -> Form {
        let raw = codes(rows * columns, bits: bits, seed: seed)
        let blocks = (rows / blockRows) * (columns / blockColumns)
        var scale = (0..<blocks).map { Float(($0 * 37 + seed) % 17 + 3) * 0.0123 }
        let offset = offsets ? (0..<blocks).map { Float(($0 * 5 + seed) % 7) - 3 } : nil
        var scales = PackedWeights.BlockScales.floats(scale)
        if halfScales {
            // An fp16 program's scales: half floats read where the weight file maps them.
            let halves = scale.map { Float16($0) }
            scale = halves.map { Float($0) }
            scales = .mapped(try! HalfBlob(bytes: halves.flatMap { [UInt8($0.bitPattern & 0xFF), UInt8($0.bitPattern >> 8)] }, count: blocks).values)
        }
        let packed = PackedWeights.codes(packed: pack(raw, bits: bits), shape: [rows, columns], bits: bits, isSigned: signed)!
        let weights = packed.decoded(by: .shiftScale(scale: scales, offset: offset), blockRows: blockRows, blockColumns: blockColumns,
                                     roundsToHalf: roundsToHalf)!
        let values = raw.enumerated().map { index, raw in
            let code = signed && raw >= 1 << (bits - 1) ? raw - (1 << bits) : raw
            let block = (index / columns / blockRows) * (columns / blockColumns) + index % columns / blockColumns
            let value = (Float(code) - (offset?[block] ?? 0)) * scale[block]
            return Double(roundsToHalf ? Float(Float16(value)) : value)
        }
        return Form(name: name, rows: rows, columns: columns, weights: weights, values: values)
    }

    static func lookup(_ name: String, rows: Int, columns: Int, bits: Int, blockRows: Int, blockColumns: Int, seed: Int) -> Form {
        let raw = codes(rows * columns, bits: bits, seed: seed)
        let entries = 1 << bits, blocks = (rows / blockRows) * (columns / blockColumns)
        let table = (0..<(blocks * entries)).map { Float(($0 * 29 + seed) % 41) * 0.05 - 1 }
        let packed = PackedWeights.codes(packed: pack(raw, bits: bits), shape: [rows, columns], bits: bits, isSigned: false)!
        let weights = packed.decoded(by: .lookup(table: table, entries: entries), blockRows: blockRows, blockColumns: blockColumns, roundsToHalf: false)!
        let values = raw.enumerated().map { index, code in
            let block = (index / columns / blockRows) * (columns / blockColumns) + index % columns / blockColumns
            return Double(table[block * entries + code])
        }
        return Form(name: name, rows: rows, columns: columns, weights: weights, values: values)
    }

    static func halves(rows: Int, columns: Int) throws -> Form {
        let values = (0..<(rows * columns)).map { Float16(Float(($0 * 13) % 29) * 0.07 - 1) }
        let bytes = values.flatMap { [UInt8($0.bitPattern & 0xFF), UInt8($0.bitPattern >> 8)] }
        // Halves are read where a weight file maps them: a blob file written for the test.
        let mapped = try HalfBlob(bytes: bytes, count: values.count)
        let weights = try #require(PackedWeights.halves(mapped.values, shape: [rows, columns]))
        return Form(name: "fp16", rows: rows, columns: columns, weights: weights, values: values.map { Double(Float($0)) })
    }

    /// Every form: the vector loops' layouts and the general ones.
    static func forms() throws -> [Form] {
        [
            blockScaled("int4 per block of 32", rows: 48, columns: 128, bits: 4, signed: true, blockRows: 1, blockColumns: 32, offsets: false, seed: 1),
            blockScaled("uint4 per block of 16 with offsets", rows: 5, columns: 96, bits: 4, signed: false, blockRows: 1, blockColumns: 16, offsets: true, seed: 2),
            blockScaled("int4 per block, fp16 output", rows: 9, columns: 64, bits: 4, signed: true, blockRows: 1, blockColumns: 32, offsets: false, seed: 3,
                        roundsToHalf: true),
            // fp16 programs' 4-bit codes: vector products take their input as integers (a group of 64 inputs and one of 32; wider blocks; offsets).
            blockScaled("int4 per block of 32, fp16 output, 96 columns", rows: 7, columns: 96, bits: 4, signed: true, blockRows: 1, blockColumns: 32,
                        offsets: false, seed: 14, roundsToHalf: true),
            blockScaled("uint4 per block of 64 with offsets, fp16 output", rows: 5, columns: 192, bits: 4, signed: false, blockRows: 1, blockColumns: 64,
                        offsets: true, seed: 15, roundsToHalf: true),
            // Scales as the file stores them (halves, read in place): pairs of adjacent block scales, a last group of 32, a
            // block of 128 over two rows, and the float loops of an fp32 program.
            blockScaled("int4 per block of 32, half scales, 320 columns", rows: 6, columns: 320, bits: 4, signed: true, blockRows: 1, blockColumns: 32,
                        offsets: false, seed: 20, roundsToHalf: true, halfScales: true),
            blockScaled("int4 per block of 32, half scales, 96 columns", rows: 5, columns: 96, bits: 4, signed: true, blockRows: 1, blockColumns: 32,
                        offsets: false, seed: 21, roundsToHalf: true, halfScales: true),
            blockScaled("uint4 per block of 128 over two rows with offsets, half scales", rows: 4, columns: 256, bits: 4, signed: false, blockRows: 2,
                        blockColumns: 128, offsets: true, seed: 22, roundsToHalf: true, halfScales: true),
            blockScaled("int8 per block of 32, half scales", rows: 3, columns: 128, bits: 8, signed: true, blockRows: 1, blockColumns: 32,
                        offsets: false, seed: 23, roundsToHalf: true, halfScales: true),
            blockScaled("int4 per block of 32, half scales, fp32 program", rows: 5, columns: 128, bits: 4, signed: true, blockRows: 1, blockColumns: 32,
                        offsets: false, seed: 24, halfScales: true),
            blockScaled("int4 per block of 128 over two rows, fp16 output", rows: 6, columns: 256, bits: 4, signed: true, blockRows: 2, blockColumns: 128,
                        offsets: false, seed: 16, roundsToHalf: true),
            // 8-bit codes of fp16 programs (integer inputs on AVX-512 VNNI): per channel over 96 columns, per block of 32 with offsets.
            blockScaled("int8 per channel, fp16 output, 96 columns", rows: 5, columns: 96, bits: 8, signed: true, blockRows: 1, blockColumns: 96,
                        offsets: false, seed: 18, roundsToHalf: true),
            blockScaled("uint8 per block of 32 with offsets, fp16 output", rows: 4, columns: 128, bits: 8, signed: false, blockRows: 1, blockColumns: 32,
                        offsets: true, seed: 19, roundsToHalf: true),
            blockScaled("int4, odd width (rows start mid-byte)", rows: 4, columns: 37, bits: 4, signed: true, blockRows: 2, blockColumns: 37, offsets: false, seed: 4),
            blockScaled("int8 per channel", rows: 7, columns: 80, bits: 8, signed: true, blockRows: 1, blockColumns: 80, offsets: false, seed: 5),
            blockScaled("uint8 per tensor with a zero point", rows: 3, columns: 50, bits: 8, signed: false, blockRows: 3, blockColumns: 50, offsets: true, seed: 6),
            blockScaled("int8 per block of 32 with offsets", rows: 6, columns: 256, bits: 8, signed: true, blockRows: 2, blockColumns: 32, offsets: true, seed: 7),
            blockScaled("int8, one row", rows: 1, columns: 64, bits: 8, signed: true, blockRows: 1, blockColumns: 64, offsets: false, seed: 8),
            lookup("3-bit table per two rows", rows: 6, columns: 40, bits: 3, blockRows: 2, blockColumns: 40, seed: 9),
            lookup("6-bit table per block", rows: 4, columns: 30, bits: 6, blockRows: 1, blockColumns: 15, seed: 10),
            lookup("4-bit single table", rows: 8, columns: 64, bits: 4, blockRows: 8, blockColumns: 64, seed: 11),
            lookup("1-bit table", rows: 3, columns: 21, bits: 1, blockRows: 3, blockColumns: 21, seed: 12),
            lookup("2-bit table per column block", rows: 2, columns: 24, bits: 2, blockRows: 2, blockColumns: 8, seed: 13),
            try halves(rows: 9, columns: 70),
            try halves(rows: 3, columns: 64),
        ]
    }

    /// The worst of |got − want| / (1e-6 + Σ|terms|) over a product's outputs,
    /// beyond what `allowance` (per output) lets it err.
    static func worst(_ got: [Float], _ want: [Double], _ magnitude: [Double], allowance: [Double]? = nil) -> Double {
        zip(zip(got, want), magnitude).enumerated().map { index, element in
            let ((value, expected), size) = element
            return max(0, abs(Double(value) - expected) - (allowance?[index] ?? 0)) / (1e-6 + size)
        }.max() ?? .infinity
    }

    /// How far a product of `rows` of the form by `x` may be off when it
    /// takes `x` as integers (`PackedWeights.productsQuantizeInputs`, where this
    /// CPU has the integer loops: the vector products', or with `prefill` the
    /// many-row products' of `modelc_packed_multiply_integer`): each input by at
    /// most max|x| / 65024 of its block of 32, times the weights it meets; and
    /// each weight is (q − o) · s as the codes give it, not yet rounded to fp16
    /// (off by at most 2⁻¹¹ of itself). `nil` where the product is exact.
    static func integerInputAllowance(_ form: Form, x: [Float], rows: Range<Int>, prefill: Bool = false) -> [Double]? {
        let integer = form.weights.withMatrix { prefill ? modelc_packed_multiply_quantize_inputs($0) : modelc_packed_dot_rows_quantize_inputs($0) }
        guard integer != 0 else { return nil }
        return rows.map { r in
            stride(from: 0, to: form.columns, by: 32).reduce(0.0) { total, first in
                let block = first..<min(first + 32, form.columns)
                let step = Double(block.map { abs(x[$0]) }.max() ?? 0) / 65_024
                return total + block.reduce(0.0) { sum, c in
                    let weight = abs(form.values[r * form.columns + c])
                    return sum + step * weight + abs(Double(x[c])) * weight * 0x1p-11
                }
            }
        }
    }

    @Test("every form decodes to its values, in whole and as a window")
    func decoding() throws {
        for form in try Self.forms() {
            #expect(form.weights.decodedFloats.map(Double.init) == form.values, "\(form)")
            // A window from the second row and third column, written into rows 5 floats wider.
            let (rows, columns) = (max(1, form.rows - 1), max(1, form.columns - 3))
            var window = [Float](repeating: .nan, count: rows * (columns + 5))
            form.weights.withMatrix { matrix in
                modelc_packed_decode_block(matrix, form.rows - rows, rows, form.columns - columns, columns, &window, columns + 5)
            }
            for r in 0..<rows {
                for c in 0..<columns {
                    #expect(Double(window[r * (columns + 5) + c]) == form.values[(form.rows - rows + r) * form.columns + form.columns - columns + c],
                            "\(form) at \(r), \(c)")
                }
            }
        }
    }

    @Test("a small matrix's floats are decoded once and kept (its constant read there by a plan); a larger one's never")
    func keptFloats() throws {
        for form in try Self.forms() {
            let kept = try #require(form.weights.keptFloats(), "\(form)")
            #expect(Array(kept).map(Double.init) == form.values, "\(form)")
            #expect(form.weights.keptFloats()?.baseAddress == kept.baseAddress, "\(form): decoded again")
            let memory = ConstantMemory()
            let address = memory.store(Tensor(type: .float32, shape: [form.rows, form.columns], storage: .packed(form.weights)))
            #expect(UnsafeRawPointer(address) == UnsafeRawPointer(kept.baseAddress!), "\(form): copied into the plan's memory")
        }
        let rows = PackedWeights.keptFloatsMaximum / 64 + 1
        let large = try #require(PackedWeights.codes(packed: Self.pack(Self.codes(rows * 64, bits: 4, seed: 3), bits: 4), shape: [rows, 64],
                                                     bits: 4, isSigned: false))
        #expect(large.keptFloats() == nil)
        #expect(large.decodedFloats.count == rows * 64)
    }

    @Test("a vector times every form's rows and columns equals float64's")
    func vectorProducts() throws {
        for form in try Self.forms() {
            let x = (0..<form.columns).map { Float(($0 * 11) % 19) * 0.1 - 0.9 }
            var y = [Float](repeating: .nan, count: form.rows - 1)
            // Rows from the second: the loops index their output from their first row.
            form.weights.withMatrix { modelc_packed_dot_rows($0, x, &y, 1, form.rows - 1) }
            let want = (1..<form.rows).map { r in (0..<form.columns).reduce(0.0) { $0 + Double(x[$1]) * form.values[r * form.columns + $1] } }
            let size = (1..<form.rows).map { r in (0..<form.columns).reduce(0.0) { $0 + abs(Double(x[$1]) * form.values[r * form.columns + $1]) } }
            let allowance = Self.integerInputAllowance(form, x: x, rows: 1..<form.rows)
            if form.rows > 1 { #expect(Self.worst(y, want, size, allowance: allowance) <= 1e-6, "\(form): rows") }
            // x · W over the columns from the third.
            let v = (0..<form.rows).map { Float(($0 * 5) % 7) * 0.3 - 1 }
            let first = min(2, form.columns - 1), count = form.columns - first
            var z = [Float](repeating: .nan, count: count)
            form.weights.withMatrix { modelc_packed_combine_rows($0, v, &z, first, count) }
            let columnsWant = (first..<form.columns).map { c in (0..<form.rows).reduce(0.0) { $0 + Double(v[$1]) * form.values[$1 * form.columns + c] } }
            let columnsSize = (first..<form.columns).map { c in (0..<form.rows).reduce(0.0) { $0 + abs(Double(v[$1]) * form.values[$1 * form.columns + c]) } }
            #expect(Self.worst(z, columnsWant, columnsSize) <= 1e-6, "\(form): columns")
        }
    }

    /// `rows` products of the form by `x` with `modelc_packed_dot_rows`, integer inputs allowed or not.
    static func dotRows(_ form: Form, _ x: [Float], integerInputs: Bool) -> [Float] {
        var y = [Float](repeating: .nan, count: form.rows)
        form.weights.withMatrix { matrix in
            var copy = matrix.pointee
            copy.quantize_inputs = integerInputs ? copy.quantize_inputs : 0
            modelc_packed_dot_rows(&copy, x, &y, 0, form.rows)
        }
        return y
    }

    @Test("an fp16 program's 4-bit products with integer inputs stay within their bound at a decoder's width; NaN and infinity pass through",
          arguments: [false, true])
    func integerInputs(halfScales: Bool) throws {
        let form = Self.blockScaled("int4 per block of 32, fp16 output", rows: 24, columns: 2_816, bits: 4, signed: true, blockRows: 1, blockColumns: 32,
                                    offsets: false, seed: 17, roundsToHalf: true, halfScales: halfScales)
        #expect(form.weights.productsQuantizeInputs)
        // Blocks of every kind: zeros, one large value among small ones, all equal, alternating signs.
        let x = (0..<form.columns).map { i -> Float in
            switch (i / 32) % 4 {
            case 0: 0
            case 1: i % 32 == 5 ? 40 : Float(i % 7) * 1e-3
            case 2: -0.75
            default: Float((i * 13) % 31) * (i % 2 == 0 ? 0.1 : -0.1)
            }
        }
        let rows = 0..<form.rows
        let want = rows.map { r in (0..<form.columns).reduce(0.0) { $0 + Double(x[$1]) * form.values[r * form.columns + $1] } }
        let size = rows.map { r in (0..<form.columns).reduce(0.0) { $0 + abs(Double(x[$1]) * form.values[r * form.columns + $1]) } }
        let allowance = Self.integerInputAllowance(form, x: x, rows: rows)
        #expect(Self.worst(Self.dotRows(form, x, integerInputs: true), want, size, allowance: allowance) <= 1e-6)
        #expect(Self.worst(Self.dotRows(form, x, integerInputs: false), want, size) <= 1e-6)
        // A value that is not finite takes the float loops: the result is what they give.
        for special in [Float.nan, .infinity, -.infinity] {
            var y = x
            y[100] = special
            let integer = Self.dotRows(form, y, integerInputs: true), float = Self.dotRows(form, y, integerInputs: false)
            #expect(zip(integer, float).allSatisfy { $0.isNaN ? $1.isNaN : $0 == $1 }, "\(special)")
            #expect(integer.allSatisfy { !$0.isFinite }, "\(special)")
        }
    }

    /// `x [rows, k] · W` as a plan runs it: a linear layer over `[n, k]`
    /// weights with a bias, or a matmul over `[k, n]` ones plus a residual.
    /// `special` puts a value at one index of `x`: the outputs of its row must
    /// be NaN or infinite, and every other within float64's bound with no
    /// allowance for integer inputs (the product took float tiles).
    static func product(_ form: Form, rows: Int, linear: Bool, threads: Int, special: (index: Int, value: Float)? = nil) throws {
        let k = linear ? form.columns : form.rows, n = linear ? form.rows : form.columns
        let weight = Tensor(type: .float32, shape: [form.rows, form.columns], storage: .packed(form.weights))
        let bias = (0..<n).map { Float($0 % 5) * 0.25 - 0.5 }
        var operations = [GraphOperation]()
        if linear {
            operations.append(GraphOperation(type: "linear", arguments: ["x": [.value("x")], "weight": [.value("w")], "bias": [.value("b")]],
                                             outputs: [ConvolutionThreadingTests.value("out", [rows, n])], blocks: []))
        } else {
            operations.append(GraphOperation(type: "matmul", arguments: ["x": [.value("x")], "y": [.value("w")]],
                                             outputs: [ConvolutionThreadingTests.value("p", [rows, n])], blocks: []))
            operations.append(GraphOperation(type: "add", arguments: ["x": [.value("p")], "y": [.value("r")]],
                                             outputs: [ConvolutionThreadingTests.value("out", [rows, n])], blocks: []))
        }
        let residual = (0..<(rows * n)).map { Float($0 % 9) * 0.1 }
        let block = GraphBlock(operations: operations, outputs: ["out"], constants: [
            "w": weight, "b": Tensor(floats: bias, shape: [n]), "r": Tensor(floats: residual, shape: [rows, n]),
        ])
        var function = GraphFunction(name: "main", inputs: [ConvolutionThreadingTests.value("x", [rows, k])], block: block)
        function.block = FusionPass.run(function.block)
        var input = (0..<(rows * k)).map { Float(($0 * 17) % 23) * 0.1 - 1.1 }
        if let special { input[special.index] = special.value }
        let run = try WorkSplit.$minimumPerThread.withValue(1) { try PlannedRun(function, input: input, shape: [rows, k], threads: threads) }
        // The weights were never copied into the plan's memory as floats.
        let copied = run.plan.constantAddresses.keys.filter { if case .packed? = run.plan.values[$0].constant?.storage { true } else { false } }
        #expect(copied.isEmpty, "\(form): packed weights copied into the plan")
        var got = try run.floats("out")
        var want: [Double] = [], size: [Double] = [], allowance: [Double]? = nil
        if linear && special == nil {
            let prefill = rows > LinearAlgebraOperations.packedVectorRows
            let perRow = (0..<rows).map { r in Self.integerInputAllowance(form, x: Array(input[(r * k)..<(r * k + k)]), rows: 0..<n, prefill: prefill) }
            if perRow.allSatisfy({ $0 != nil }) { allowance = perRow.flatMap { $0 ?? [] } }
        }
        for r in 0..<rows {
            for c in 0..<n {
                var sum = linear ? Double(bias[c]) : Double(residual[r * n + c]), magnitude = abs(sum)
                for i in 0..<k {
                    let term = Double(input[r * k + i]) * (linear ? form.values[c * k + i] : form.values[i * n + c])
                    sum += term
                    magnitude += abs(term)
                }
                want.append(sum)
                size.append(magnitude)
            }
        }
        let name = "\(form), \(rows) rows, \(threads) threads, \(linear ? "linear" : "matmul")"
        if let special {
            let row = special.index / k, outputs = (row * n)..<(row * n + n)
            #expect(got[outputs].allSatisfy { !$0.isFinite }, "\(name): \(special.value)")
            // That row is checked; the others go on to the bound below.
            got.replaceSubrange(outputs, with: repeatElement(0, count: n))
            want.replaceSubrange(outputs, with: repeatElement(0, count: n))
            size.replaceSubrange(outputs, with: repeatElement(0, count: n))
        }
        #expect(Self.worst(got, want, size, allowance: allowance) <= 1e-6, "\(name)")
    }

    @Test("linear and matmul over every form equal float64's: one row, a few, a prefill's many", arguments: [1, 2, 3])
    func plannedProducts(threads: Int) throws {
        for form in try Self.forms() {
            for rows in [1, 3, 5, 70] {
                try Self.product(form, rows: rows, linear: true, threads: threads)
                try Self.product(form, rows: rows, linear: false, threads: threads)
            }
        }
    }

    /// Weights a prefill's products take integer inputs for (fp16 programs' 4- and 8-bit codes):
    /// signed and unsigned, offsets, half scales, blocks of 64 and of 128 over two rows, per channel;
    /// columns a multiple of 32 but not of 64, outputs not a multiple of the 64-row tile.
    static func prefillForms() -> [Form] {
        [
            blockScaled("int4 per block of 32, fp16 output", rows: 70, columns: 96, bits: 4, signed: true, blockRows: 1, blockColumns: 32, offsets: false,
                        seed: 30, roundsToHalf: true),
            blockScaled("uint4 per block of 64 with offsets, half scales", rows: 33, columns: 192, bits: 4, signed: false, blockRows: 1, blockColumns: 64,
                        offsets: true, seed: 31, roundsToHalf: true, halfScales: true),
            blockScaled("int4 per block of 128 over two rows, half scales", rows: 130, columns: 256, bits: 4, signed: true, blockRows: 2, blockColumns: 128,
                        offsets: false, seed: 32, roundsToHalf: true, halfScales: true),
            blockScaled("int8 per channel, fp16 output", rows: 65, columns: 160, bits: 8, signed: true, blockRows: 1, blockColumns: 160, offsets: false,
                        seed: 33, roundsToHalf: true),
            blockScaled("uint8 per block of 32 with offsets, fp16 output", rows: 17, columns: 224, bits: 8, signed: false, blockRows: 1, blockColumns: 32,
                        offsets: true, seed: 34, roundsToHalf: true),
        ]
    }

    @Test("a prefill's linear over an fp16 program's codes equals float64's within the integer inputs' bound", arguments: [1, 2, 3])
    func prefillProducts(threads: Int) throws {
        for form in Self.prefillForms() {
            for rows in [5, 17, 64, 128] { try Self.product(form, rows: rows, linear: true, threads: threads) }
        }
        // A NaN or an infinity anywhere in the input sends the whole product to the float tiles.
        let form = Self.prefillForms()[0]
        for (index, value) in [(0, Float.nan), (17 * 96 + 50, .infinity), (21 * 96 - 1, -.infinity)] {
            try Self.product(form, rows: 21, linear: true, threads: threads, special: (index, value))
        }
    }

    @Test("the integer product writes the weight rows asked for and nothing else; rounding refuses NaN and infinity")
    func integerProductWindow() throws {
        for form in Self.prefillForms() {
            let quantizes = form.weights.withMatrix { modelc_packed_multiply_quantize_inputs($0) } != 0
            let inputs = 7, k = form.columns, stride = form.rows + 3, first = min(10, form.rows - 1), count = form.rows - first - 1
            let x = (0..<(inputs * k)).map { Float(($0 * 29) % 37) * 0.05 - 0.9 }
            var rounded = [UInt8](repeating: 0, count: modelc_rounded_rows_bytes(inputs, k))
            #expect(modelc_round_rows(x, inputs, k, &rounded) == (quantizes ? 1 : 0), "\(form)")
            guard quantizes else { continue }
            var buffer = [UInt8](repeating: 0, count: form.weights.withMatrix { modelc_packed_multiply_buffer_bytes($0) })
            var y = [Float](repeating: .nan, count: inputs * stride)
            form.weights.withMatrix { modelc_packed_multiply_integer($0, rounded, inputs, &y, stride, first, count, &buffer) }
            for i in 0..<inputs {
                let row = Array(x[(i * k)..<(i * k + k)]), outputs = first..<(first + count)
                let want = outputs.map { r in (0..<k).reduce(0.0) { $0 + Double(row[$1]) * form.values[r * k + $1] } }
                let size = outputs.map { r in (0..<k).reduce(0.0) { $0 + abs(Double(row[$1]) * form.values[r * k + $1]) } }
                let got = Array(y[(i * stride + first)..<(i * stride + first + count)])
                #expect(Self.worst(got, want, size, allowance: Self.integerInputAllowance(form, x: row, rows: outputs, prefill: true)) <= 1e-6, "\(form)")
                let untouched = (i * stride)..<(i * stride + first), after = (i * stride + first + count)..<(i * stride + stride)
                #expect(y[untouched].allSatisfy(\.isNaN) && y[after].allSatisfy(\.isNaN), "\(form): wrote outside its rows")
            }
            for special in [Float.nan, .infinity, -.infinity] {
                var z = x
                z[inputs * k - 1] = special
                #expect(modelc_round_rows(z, inputs, k, &rounded) == 0, "\(special)")
            }
        }
    }

    @Test("a gather of rows from packed weights widens the rows asked for, counting negative indices from the end")
    func gatherRows() throws {
        let form = Self.blockScaled("embedding", rows: 12, columns: 64, bits: 4, signed: true, blockRows: 1, blockColumns: 32, offsets: false, seed: 14)
        let weight = Tensor(type: .float32, shape: [12, 64], storage: .packed(form.weights))
        let operation = GraphOperation(type: "gather", arguments: ["x": [.value("w")], "indices": [.value("x")]],
                                       outputs: [(name: "out", type: ValueType(element: .float32, shape: [3, 64]))], blocks: [])
        let function = GraphFunction(name: "main", inputs: [(name: "x", type: ValueType(element: .int32, shape: [3]))],
                                     block: GraphBlock(operations: [operation], outputs: ["out"], constants: ["w": weight]))
        let plan = try Planner.plan(function, shapes: ["x": [3]], threads: 1)
        let state = TensorState(plan: plan)
        let indices: [Int32] = [7, 0, -1]
        let x = try #require(plan.inputs["x"])
        for (index, value) in indices.enumerated() { state.buffers.ints(x)[index] = value }
        try state.run()
        let out = try #require(plan.outputs["out"])
        let got = Array(UnsafeBufferPointer(start: state.buffers.floats(out), count: 3 * 64)).map(Double.init)
        let want = [7, 0, 11].flatMap { form.values[($0 * 64)..<(($0 + 1) * 64)] }
        #expect(got == want)
        #expect(plan.constantAddresses.isEmpty)
    }
}

/// Half floats in a weight file of their own, mapped as a program's are.
private struct HalfBlob {
    let values: MappedValues

    init(bytes: [UInt8], count: Int) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-halves-\(UUID().uuidString).bin").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // One blob: the 64-byte header, a 64-byte record, then the data at offset 128.
        var file = [UInt8](repeating: 0, count: 128)
        func put(_ value: UInt64, at offset: Int, bytes width: Int) { for i in 0..<width { file[offset + i] = UInt8(value >> (8 * UInt64(i)) & 0xFF) } }
        put(1, at: 0, bytes: 4)
        put(2, at: 4, bytes: 4)
        put(0xDEAD_BEEF, at: 64, bytes: 4)
        put(1, at: 68, bytes: 4)
        put(UInt64(bytes.count), at: 72, bytes: 8)
        put(128, at: 80, bytes: 8)
        file += bytes
        try Data(file).write(to: URL(fileURLWithPath: path))
        let blob = try MILBlobFile(path: path)
        let data = UnsafeRawBufferPointer(rebasing: blob.bytes[128..<(128 + bytes.count)])
        values = try #require(MappedValues(file: blob, bytes: data, count: count, half: true))
    }
}
