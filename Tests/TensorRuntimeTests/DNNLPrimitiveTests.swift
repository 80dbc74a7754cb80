import CDNNL
import Foundation
import SystemIO
import Testing
@testable import TensorRuntime

/// The tensor engine's one oneDNN primitive type, as products use it: packed
/// weights shared between primitives, runs through slots, and concurrent
/// runs of one primitive, each with its own workspace.
@Suite("oneDNN primitives")
struct DNNLPrimitiveTests {
    /// `rows × 3` inputs times a `3 × 2` matrix plus a bias, in float64.
    static func reference(_ input: [Float], rows: Int, weights: [Float], bias: [Float]) -> [Float] {
        var result: [Float] = []
        for r in 0..<rows {
            for c in 0..<2 {
                var sum = Double(bias[c])
                for k in 0..<3 { sum += Double(input[r * 3 + k]) * Double(weights[k * 2 + c]) }
                result.append(Float(sum))
            }
        }
        return result
    }

    /// Expects `output` within 1e-5 (relative to max(1, |value|)) of float64's
    /// GELU(input [rows, k] · weights [k, n] + bias), plus `addend` if given.
    static func expectProductGELU(_ output: [Float], input: [Float], weights: [Float], bias: [Float], rows: Int, k: Int, n: Int,
                                  plus addend: [Float]? = nil, gelu: Bool = true) {
        var worst = 0.0
        for r in 0..<rows {
            for c in 0..<n {
                var sum = Double(bias[c])
                for i in 0..<k { sum += Double(input[r * k + i]) * Double(weights[i * n + c]) }
                let expected = (gelu ? 0.5 * sum * (1 + erf(sum / 2.0.squareRoot())) : sum) + Double(addend?[r * n + c] ?? 0)
                worst = max(worst, abs(Double(output[r * n + c]) - expected) / max(1, abs(expected)))
            }
        }
        #expect(worst <= 1e-5, "worst relative difference \(worst)")
    }

    /// Whether oneDNN packs a product's constant weights as plain rows on
    /// this processor (AVX2), which column blocks read in place, rather than
    /// blocked (AVX-512).
    static func packsPlainRows() throws -> Bool {
        let product = try (0..<(64 * 128)).map { Float($0 % 5) }.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([1, 64]), weights: .init([64, 128]), destination: .init([1, 128]), constantWeights: values,
                                   bias: nil, activation: nil, residual: nil, threads: 1)
        }
        return try product.layout(of: Int32(DNNL_ARG_WEIGHTS)).plainRows != nil
    }

    /// Whether oneDNN reads plain rows for one block of columns of a large
    /// product, as the planner makes it (`[k, width]` columns of `[k, n]`
    /// weights, writing its columns of a `rows × n` result): on AVX-512 such
    /// blocks may be plain where a whole product is packed blocked.
    static func packsPlainRows(columnBlockOf k: Int, _ n: Int, width: Int, rows: Int = 1) throws -> Bool {
        let product = try (0..<(k * n)).map { Float($0 % 5) }.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([rows, k]), weights: .init(dims: [k, width], strides: [n, 1]),
                                   destination: .init(dims: [rows, width], strides: [n, 1]),
                                   constantWeights: UnsafeBufferPointer(rebasing: values[0..<((k - 1) * n + width)]),
                                   bias: nil, activation: nil, residual: nil, threads: 1)
        }
        return try product.layout(of: Int32(DNNL_ARG_WEIGHTS)).plainRows != nil
    }

    @Test("a product over the same constant weights reads the other's packed copy and computes the same")
    func sharedPackedWeights() throws {
        #expect(DNNL.isAvailable)
        let weights: [Float] = [1, -2, 0.5, 3, -1, 4], bias: [Float] = [0.25, -0.5]
        func product(rows: Int, sharing other: DNNLPrimitive?) throws -> DNNLPrimitive {
            try weights.withUnsafeBufferPointer { values in
                try DNNLKernels.matmul(source: .init([rows, 3]), weights: .init([3, 2]), destination: .init([rows, 2]), constantWeights: values,
                                       bias: bias, activation: nil, residual: nil, threads: 1, sharingWeightsWith: other)
            }
        }
        let first = try product(rows: 4, sharing: nil)
        let second = try product(rows: 1, sharing: first)
        #expect(first.constantBytes >= weights.count * 4)
        // The second packed nothing of its own but its bias.
        #expect(second.constantBytes == bias.count * 4)
        for (primitive, rows) in [(first, 4), (second, 1)] {
            var input = (0..<(rows * 3)).map { Float($0) * 0.5 - 1 }, output = [Float](repeating: .nan, count: rows * 2)
            let ran = input.withUnsafeMutableBytes { x in
                output.withUnsafeMutableBytes { y in primitive.run(x.baseAddress!, y.baseAddress!) }
            }
            #expect(ran)
            let expected = Self.reference(input, rows: rows, weights: weights, bias: bias)
            #expect(zip(output, expected).allSatisfy { abs($0 - $1) <= 1e-5 })
        }
    }

    @Test("a product sharing a sharer's weights keeps the packer alive, not the sharer: plans made one after another never chain")
    func sharingNeverChains() throws {
        let weights: [Float] = [1, -2, 0.5, 3, -1, 4]
        func product(rows: Int, sharing other: DNNLPrimitive?) throws -> DNNLPrimitive {
            try weights.withUnsafeBufferPointer { values in
                try DNNLKernels.matmul(source: .init([rows, 3]), weights: .init([3, 2]), destination: .init([rows, 2]), constantWeights: values,
                                       bias: nil, activation: nil, residual: nil, threads: 1, sharingWeightsWith: other)
            }
        }
        weak var packer: DNNLPrimitive?, middle: DNNLPrimitive?
        var last: DNNLPrimitive?
        do {
            // Each plan's product shares the one before it, as a decoder's step plans do (DNNLKernels.product(packing:)).
            let first = try product(rows: 4, sharing: nil)
            let second = try product(rows: 2, sharing: first)
            last = try product(rows: 1, sharing: second)
            packer = first
            middle = second
        }
        #expect(packer != nil, "the packer is kept while a product reads its packed weights")
        #expect(middle == nil, "a product in between is not kept alive by the one after it")
        #expect(last?.constantBytes == 0)
        last = nil
        #expect(packer == nil)
    }

    @Test("packed weights stay findable for the next plan while only views of them (blocks of rows or columns) are kept")
    func viewsKeepThePackingFindable() throws {
        let (k, n) = (128, 256)
        let weights = (0..<(k * n)).map { Float($0 % 13) * 0.1 - 0.6 }
        try weights.withUnsafeBufferPointer { values in
            let key = DNNLKernels.WeightsKey(address: UInt(bitPattern: values.baseAddress), count: values.count, dims: [k, n], strides: [n, 1])
            var views: [DNNLPrimitive] = []
            do {
                // A 64-row plan split by columns: the product that packed the weights is kept by nothing but its views.
                let packing = try DNNLKernels.matmul(source: .init([32, k]), weights: .init([k, n]), destination: .init([32, n]), constantWeights: values,
                                                     bias: nil, activation: nil, residual: nil, threads: 1)
                DNNLKernels.remember(packing, packing: key)
                guard try packing.layout(of: Int32(DNNL_ARG_WEIGHTS)).plainRows != nil else { return }
                views.append(try #require(try DNNLKernels.columnBlock(of: packing, first: 0, width: 128, rows: 64, n: n, bias: nil, activation: nil,
                                                                      accumulate: false)))
                views.append(try #require(try DNNLKernels.depthBlock(of: packing, first: 64, depth: 64, rows: 1, k: k, n: n)))
            }
            // The one-token plan made next finds it (and so shares its packing instead of packing the weights again).
            #expect(DNNLKernels.product(packing: key) != nil)
            #expect(views.allSatisfy { $0.constantBytes == 0 })
        }
    }

    @Test("weights oneDNN reads row-major have rows 64 bytes longer when a row is a multiple of 256 bytes; blocked layouts stay")
    func paddedWeightRows() throws {
        let padded = try #require(try DNNLKernels.paddedRows(chosen: .plain([768, 3072]), dims: [768, 3072]))
        #expect(padded.matches(try DNNLDescriptor([768, 3072], strides: [3088, 1])))
        #expect(padded.bytes == 768 * 3088 * 4)
        let batched = try #require(try DNNLKernels.paddedRows(chosen: .plain([2, 64, 128]), dims: [2, 64, 128]))
        #expect(batched.matches(try DNNLDescriptor([2, 64, 128], strides: [64 * 144, 144, 1])))
        // Rows of 50 floats do not alias; a blocked layout is oneDNN's own.
        #expect(try DNNLKernels.paddedRows(chosen: .plain([768, 50]), dims: [768, 50]) == nil)
        #expect(try DNNLKernels.paddedRows(chosen: DNNLDescriptor([768, 3072], dnnl_BA16a64b), dims: [768, 3072]) == nil)
    }

    @Test("a product over 256-byte weight rows packs them blocked or padded, never plain, and computes float64's product + bias + GELU")
    func productOverAliasingRows() throws {
        let (rows, k, n) = (5, 96, 192)
        let weights = (0..<(k * n)).map { Float(($0 * 29) % 31) * 0.03 - 0.45 }, bias = (0..<n).map { Float($0 % 7) * 0.1 - 0.3 }
        let primitive = try weights.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([rows, k]), weights: .init([k, n]), destination: .init([rows, n]), constantWeights: values,
                                   bias: bias, activation: .geluExact, residual: nil, threads: 1)
        }
        // Plain only where oneDNN has no blocked kernel, and then with padded rows.
        #expect(!(try primitive.layout(of: Int32(DNNL_ARG_WEIGHTS)).matches(.plain([k, n]))), "\(primitive.implementation)")
        var input = (0..<(rows * k)).map { Float(($0 * 17) % 23) * 0.05 - 0.5 }, output = [Float](repeating: .nan, count: rows * n)
        let ran = input.withUnsafeMutableBytes { x in output.withUnsafeMutableBytes { y in primitive.run(x.baseAddress!, y.baseAddress!) } }
        #expect(ran)
        Self.expectProductGELU(output, input: input, weights: weights, bias: bias, rows: rows, k: k, n: n)
    }

    @Test("blocks of columns read another product's packed weights in place: float64's product + bias + GELU, or + bias summed into the destination",
          arguments: [1, 2], [false, true])
    func columnBlocksReadPackedWeights(rows: Int, accumulate: Bool) throws {
        let (k, n) = (96, 192)
        let weights = (0..<(k * n)).map { Float(($0 * 29) % 31) * 0.03 - 0.45 }, bias = (0..<n).map { Float($0 % 7) * 0.1 - 0.3 }
        let packed = try weights.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([rows, k]), weights: .init([k, n]), destination: .init([rows, n]), constantWeights: values,
                                   bias: bias, activation: nil, residual: nil, threads: 1)
        }
        let blocks = [(first: 0, width: 128), (first: 128, width: 64)]
        // Summing into the destination (a residual copied there) or GELU: oneDNN's optimized kernels take either.
        func block(_ first: Int, _ width: Int) throws -> DNNLPrimitive? {
            try DNNLKernels.columnBlock(of: packed, first: first, width: width, rows: rows, n: n, bias: Array(bias[first..<first + width]),
                                        activation: accumulate ? nil : .geluExact, accumulate: accumulate)
        }
        // Plain rows (oneDNN's AVX2 kernels) are read in place for any rows; blocks of whole columns (its
        // AVX-512 ones) for one row, whose destination oneDNN's blocked kernels take as dense.
        let layout = try packed.layout(of: Int32(DNNL_ARG_WEIGHTS))
        try #require(layout.plainRows != nil || layout.columnBlocks != nil, "\(packed.implementation)")
        if layout.plainRows == nil && rows > 1 {
            #expect(try block(0, 128) == nil, "\(packed.implementation)")
            return
        }
        var input = (0..<(rows * k)).map { Float(($0 * 17) % 23) * 0.05 - 0.5 }
        let residual = (0..<(rows * n)).map { Float(($0 * 13) % 11) * 0.2 - 1 }
        var output = accumulate ? residual : [Float](repeating: .nan, count: rows * n)
        for (first, width) in blocks {
            let kernel = try #require(try block(first, width))
            #expect(!kernel.implementation.hasPrefix("ref"), "\(kernel.implementation)")
            // Only the bias is its own: the weights are the packed product's.
            #expect(kernel.constantBytes == width * 4)
            let ran = input.withUnsafeMutableBytes { x in
                output.withUnsafeMutableBytes { y in kernel.run(x.baseAddress!, y.baseAddress! + first * 4) }
            }
            #expect(ran)
        }
        Self.expectProductGELU(output, input: input, weights: weights, bias: bias, rows: rows, k: k, n: n,
                               plus: accumulate ? residual : nil, gelu: !accumulate)
        // Columns past the packed matrix's are refused.
        #expect(try DNNLKernels.columnBlock(of: packed, first: 128, width: 128, rows: rows, n: n, bias: nil, activation: nil, accumulate: false) == nil)
    }

    @Test("a run reads and writes the buffers it is given, also when they move between runs (memories rebound only then)")
    func buffersMoveBetweenRuns() throws {
        let weights: [Float] = [1, -2, 0.5, 3, -1, 4], bias: [Float] = [0.25, -0.5]
        let primitive = try weights.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([2, 3]), weights: .init([3, 2]), destination: .init([2, 2]), constantWeights: values,
                                   bias: bias, activation: nil, residual: nil, threads: 1)
        }
        // Two pairs of buffers, used in the order A, A, B, A, B: each run must see its own input.
        let inputs: [[Float]] = [[1, 2, 3, 4, 5, 6], [-1, 0.5, 2, 0, -3, 1]]
        let sources = inputs.map { values in
            let pointer = UnsafeMutablePointer<Float>.allocate(capacity: 6)
            pointer.initialize(from: values, count: 6)
            return pointer
        }
        let targets = (0..<2).map { _ in UnsafeMutablePointer<Float>.allocate(capacity: 4) }
        defer { (sources + targets).forEach { $0.deallocate() } }
        for which in [0, 0, 1, 0, 1] {
            targets[which].initialize(repeating: .nan, count: 4)
            #expect(primitive.run(UnsafeMutableRawPointer(sources[which]), UnsafeMutableRawPointer(targets[which])))
            let expected = Self.reference(inputs[which], rows: 2, weights: weights, bias: bias)
            let got = Array(UnsafeBufferPointer(start: targets[which], count: 4))
            #expect(zip(got, expected).allSatisfy { abs($0 - $1) <= 1e-5 }, "buffers \(which): \(got) against \(expected)")
        }
        // Five runs one after another made one workspace and reused it.
        #expect(primitive.pooledWorkspaces == 1)
        // A primitive of two slots refuses three pointers rather than binding a wrong argument.
        #expect(!primitive.run(UnsafeMutableRawPointer(sources[0]), UnsafeMutableRawPointer(targets[0]), UnsafeMutableRawPointer(targets[1])))
    }

    @Test("one primitive runs on several threads at once, each run with its own workspace")
    func concurrentRuns() throws {
        let weights: [Float] = [1, -2, 0.5, 3, -1, 4], bias: [Float] = [0, 1]
        let primitive = try weights.withUnsafeBufferPointer { values in
            try DNNLKernels.matmul(source: .init([64, 3]), weights: .init([3, 2]), destination: .init([64, 2]), constantWeights: values,
                                   bias: bias, activation: .relu, residual: nil, threads: 1)
        }
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var input = (0..<192).map { Float(($0 + worker) % 7) - 3 }, output = [Float](repeating: .nan, count: 128)
            for _ in 0..<20 {
                let ran = input.withUnsafeMutableBytes { x in
                    output.withUnsafeMutableBytes { y in primitive.run(x.baseAddress!, y.baseAddress!) }
                }
                let expected = Self.reference(input, rows: 64, weights: weights, bias: bias).map { max(0, $0) }
                if !ran || !zip(output, expected).allSatisfy({ abs($0 - $1) <= 1e-5 }) { failures.withLock { $0 += 1 } }
            }
        }
        #expect(failures.withLock { $0 } == 0)
    }
}
