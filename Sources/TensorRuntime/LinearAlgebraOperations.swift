import COpenBLAS
import Dispatch
import Foundation
import ModelFeatures
import SystemIO

/// Matrix products on OpenBLAS (`matmul` with NumPy batch broadcasting,
/// `linear`, `einsum` of two operands); attention is `AttentionOperations`.
enum LinearAlgebraOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "matmul": OperationDefinition(["x", "y", "transpose_x", "transpose_y"]) { context throws(RuntimeError) in
            try matmul(context, x: try context.input("x"), y: try context.input("y"),
                       transposeX: try context.bool("transpose_x", false), transposeY: try context.bool("transpose_y", false), bias: nil)
        }.withFacts(matmulFacts),
        "linear": OperationDefinition(["x", "weight", "bias"]) { context throws(RuntimeError) in
            let x = try context.input(), weight = try context.input("weight")
            guard weight.rank == 2 else { throw context.invalid("weight has rank \(weight.rank), 2 is required") }
            try matmul(context, x: x, y: weight, transposeX: false, transposeY: true, bias: try context.optional("bias"))
        }.withFacts(linearFacts),
        "einsum": OperationDefinition(["values", "equation"]) { context throws(RuntimeError) in try einsum(context) }.withFacts(einsumFacts),
    ]

    /// Operations only the engine's passes make (a program file naming one is refused).
    static let internalDefinitions: [String: OperationDefinition] = [
        // A linear layer with what follows it fused (Fusion/ProductFusion.swift): an activation, then a residual sum.
        // The weight is linear's [out, in], or [in, out] with weight_layout "in_out" (a matmul's constant y).
        "fused_linear": OperationDefinition(["x", "weight", "weight_layout", "bias", "activation", "residual"]) { context throws(RuntimeError) in
            let x = try context.input(), weight = try context.input("weight")
            guard weight.rank == 2 else { throw context.invalid("weight has rank \(weight.rank), 2 is required") }
            let layout = try context.string("weight_layout", "out_in")
            guard layout == "out_in" || layout == "in_out" else { throw context.unsupported("weight layout \(layout) is not one modelc fuses") }
            var activation: DNNLKernels.Activation?
            switch try context.string("activation", "") {
            case "": activation = nil
            case "relu": activation = .relu
            case "gelu_EXACT": activation = .geluExact
            case "gelu_TANH_APPROXIMATION": activation = .geluTanh
            case let other: throw context.unsupported("fused activation \(other) is not one modelc fuses")
            }
            try matmul(context, x: x, y: weight, transposeX: false, transposeY: layout == "out_in", bias: try context.optional("bias"),
                       activation: activation, residual: try context.optional("residual"))
        }.withFacts(linearFacts),
    ]

    /// Runs OpenBLAS on the calling thread only (set once per process).
    static let singleThreaded: Bool = {
        openblas_set_num_threads(1)
        return true
    }()

    /// C[m×n] = op(A) · op(B), row-major, leading dimensions as stored.
    @inline(__always)
    static func gemm(_ a: UnsafePointer<Float>, transposeA: Bool, _ b: UnsafePointer<Float>, transposeB: Bool,
                     _ c: UnsafeMutablePointer<Float>, m: Int, n: Int, k: Int, accumulate: Bool = false) {
        guard m > 0, n > 0 else { return }
        guard k > 0 else {
            if !accumulate { for index in 0..<(m * n) { c[index] = 0 } }
            return
        }
        cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
                    Int32(m), Int32(n), Int32(k), 1, a, Int32(transposeA ? m : k), b, Int32(transposeB ? k : n),
                    accumulate ? 1 : 0, c, Int32(n))
    }

    /// x · y with MIL's matmul rules: rank-1 operands become a row (x) or a
    /// column (y) and lose that axis again; batch axes broadcast.
    ///
    /// `activation` and then the addition of `residual` (a fused linear
    /// layer's) apply to the result: in oneDNN's kernel, or as a step after
    /// the product where oneDNN does not take them.
    static func matmul(_ context: OperationContext, x: PlanValue, y: PlanValue, transposeX: Bool, transposeY: Bool,
                       bias: PlanValue?, activation: DNNLKernels.Activation? = nil, residual: PlanValue? = nil) throws(RuntimeError) {
        guard x.rank >= 1, y.rank >= 1 else { throw context.invalid("matmul needs operands of rank 1 or more") }
        let xShape = x.rank == 1 ? [1, x.shape[0]] : x.shape
        let yShape = y.rank == 1 ? [y.shape[0], 1] : y.shape
        let tx = x.rank == 1 ? false : transposeX, ty = y.rank == 1 ? false : transposeY
        let m = tx ? xShape[xShape.count - 1] : xShape[xShape.count - 2]
        let k = tx ? xShape[xShape.count - 2] : xShape[xShape.count - 1]
        let k2 = ty ? yShape[yShape.count - 1] : yShape[yShape.count - 2]
        let n = ty ? yShape[yShape.count - 2] : yShape[yShape.count - 1]
        guard k == k2 else { throw context.invalid("cannot multiply \(x.shape) by \(y.shape): inner sizes \(k) and \(k2)") }
        let xBatch = Array(xShape.dropLast(2)), yBatch = Array(yShape.dropLast(2))
        guard let batch = Shapes.broadcast(xBatch, yBatch) else { throw context.invalid("batch shapes \(xBatch) and \(yBatch) do not broadcast") }
        var shape = batch + [m, n]
        if x.rank == 1 { shape.remove(at: shape.count - 2) }
        if y.rank == 1 { shape.removeLast() }
        if let bias, bias.count != n, bias.count != 1 { throw context.invalid("bias has \(bias.count) values for \(n) outputs") }
        guard x.isFloat, y.isFloat else {
            try integerMatmul(context, x: x, y: y, transposeX: tx, transposeY: ty, bias: bias, shape: shape, batch: batch, m: m, n: n, k: k)
            return
        }
        let out = try context.output(shape)
        if let residual {
            guard let combined = Shapes.broadcast(shape, residual.shape), combined == shape, residual.isFloat else {
                throw context.invalid("residual \(residual.shape) does not broadcast to the product's shape \(shape)")
            }
        }
        if !tx, let packed = packedWeights(y), bias == nil || bias?.constant != nil {
            // Weights kept as stored (compressed, or large fp16): read so by the product itself.
            let fused = residual?.shape == shape ? residual : nil
            packedProduct(context, x: x, weights: packed, transposed: ty, rows: batch.reduce(1, *) * m, k: k, n: n, bias: constantBias(bias, n),
                          activation: activation, residual: fused, out: out)
            if let residual, fused == nil { addAfter(context, out: out, shape: shape, activation: nil, residual: residual) }
            return
        }
        if try productOnDNNL(context, x: x, y: y, xShape: xShape, yShape: yShape, transposeX: tx, transposeY: ty,
                             batch: batch, m: m, k: k, n: n, bias: bias, activation: activation,
                             residual: residual?.shape == shape ? residual : nil, out: out) {
            if let residual, residual.shape != shape { addAfter(context, out: out, shape: shape, activation: nil, residual: residual) }
            return
        }
        defer { if activation != nil || residual != nil { addAfter(context, out: out, shape: shape, activation: activation, residual: residual) } }
        let batches = batch.reduce(1, *)
        let xStrides = Shapes.broadcastStrides(xBatch, to: batch), yStrides = Shapes.broadcastStrides(yBatch, to: batch)
        let xOffsets = Shapes.offsets(batch, strides: xStrides), yOffsets = Shapes.offsets(batch, strides: yStrides)
        let a = x.id, b = y.id, biasID = bias?.id, biasCount = bias?.count ?? 0
        // Work for several threads: the products of a batch, or row blocks of one large product.
        let workers = min(context.threads, batches > 1 ? batches : (tx ? 1 : max(1, m / 16)))
        _ = singleThreaded
        context.run(reads: [x, y] + (bias.map { [$0] } ?? []), writes: [out]) { buffers in
            let left = buffers.floats(a), right = buffers.floats(b), target = buffers.floats(out)
            if let biasID {
                let values = buffers.floats(biasID)
                for row in 0..<(batches * m) {
                    for column in 0..<n { target[row * n + column] = values[biasCount == 1 ? 0 : column] }
                }
            }
            if workers <= 1 {
                for index in 0..<batches {
                    gemm(left + xOffsets[index] * m * k, transposeA: tx, right + yOffsets[index] * k * n, transposeB: ty,
                         target + index * m * n, m: m, n: n, k: k, accumulate: biasID != nil)
                }
            } else if batches > 1 {
                // Each worker writes its own matrices of the output.
                let shared = SharedPointers(left: left, right: right, target: target)
                ThreadTeam.shared.perform(workers, threads: workers) { worker in
                    for index in stride(from: worker, to: batches, by: workers) {
                        gemm(shared.left + xOffsets[index] * m * k, transposeA: tx, shared.right + yOffsets[index] * k * n, transposeB: ty,
                             shared.target + index * m * n, m: m, n: n, k: k, accumulate: biasID != nil)
                    }
                }
            } else {
                // Each worker writes its own rows of the output.
                let shared = SharedPointers(left: left, right: right, target: target)
                let block = (m + workers - 1) / workers
                ThreadTeam.shared.perform(workers, threads: workers) { worker in
                    let first = worker * block, rows = min(m, first + block) - first
                    guard rows > 0 else { return }
                    gemm(shared.left + first * k, transposeA: false, shared.right, transposeB: ty, shared.target + first * n,
                         m: rows, n: n, k: k, accumulate: biasID != nil)
                }
            }
        }
    }

    /// Adds the step running a product's column blocks on the thread team:
    /// `kernels[i]` (slots source, destination) writes the columns from
    /// `firsts[i]` of `out`, `rows × n`. A residual is copied into `out`
    /// first for the kernels to sum into, or, with `residualAfter` (a
    /// residual after kernels that apply an activation, which oneDNN's
    /// optimized kernels do not follow with a sum), added by each thread to
    /// its columns of the kernels' results, written to a buffer of their own.
    private static func runColumnBlocks(_ context: OperationContext, _ kernels: [DNNLPrimitive], firsts: [Int], x: PlanValue,
                                        residual: PlanValue?, residualAfter: Bool = false, out: Int, rows: Int, n: Int, geluTanh: Bool = false) {
        let failure = DNNLKernels.failure(context)
        let a = x.id, r = residual?.id
        let results = residualAfter ? context.scratch(.float32, shape: [rows, n]).id : nil
        context.run(reads: [a] + (r.map { [$0] } ?? []), outputs: [out], scratch: results.map { [$0] } ?? [],
                    split: "\(kernels.count) column blocks") { buffers throws(RuntimeError) in
            let blocks = SharedRaw(source: buffers.raw(a), destination: buffers.raw(results ?? out))
            if let r, results == nil, buffers.raw(r) != blocks.destination {
                blocks.destination.copyMemory(from: buffers.raw(r), byteCount: rows * n * 4)
            }
            // The kernels' results plus the residual, into the output.
            let sum = results.flatMap { results in
                r.map { SharedPointers(left: buffers.floats(results), right: buffers.floats($0), target: buffers.floats(out)) }
            }
            let failed = Locked(false)
            ThreadTeam.shared.perform(kernels.count, threads: kernels.count) { index in
                if !kernels[index].run(blocks.source, blocks.destination + firsts[index] * 4) { failed.withLock { $0 = true } }
                let first = firsts[index], width = (index + 1 < firsts.count ? firsts[index + 1] : n) - first
                let target = blocks.destination.assumingMemoryBound(to: Float.self)
                if geluTanh {
                    for row in 0..<rows { VectorMath.geluTanh(target + row * n + first, count: width) }
                }
                if let sum {
                    for row in 0..<rows {
                        for column in first..<(first + width) { sum.target[row * n + column] = sum.left[row * n + column] + sum.right[row * n + column] }
                    }
                }
            }
            guard !failed.withLock({ $0 }) else { throw failure }
        }
    }

    /// One thread's product over a block of the depth: `kernel` reads the
    /// source from column `first` and writes its partial sums from column `column`.
    struct DepthBlock {
        var kernel: DNNLPrimitive
        var first: Int
        var column: Int
    }

    /// A product of `rows` (at most `depthSplitRows`) by weights packed in
    /// plain rows, split by depth between `threads` threads: for each thread
    /// a block of the depth of every `(kernel, column)` of `sources` (the
    /// product's packed weights, or its blocks of columns, each read in
    /// place). `nil` for more rows, one worker, or weights not in plain rows.
    static func depthParts(of sources: [(kernel: DNNLPrimitive, column: Int)], rows: Int, k: Int, n: Int, threads: Int) -> [[DepthBlock]]? {
        guard rows <= depthSplitRows else { return nil }
        let parts = WorkSplit.workers(threads: threads, work: rows * k * n, items: k / 64)
        guard parts > 1 else { return nil }
        var result: [[DepthBlock]] = []
        for part in 0..<parts {
            let first = part * k / parts, end = (part + 1) * k / parts
            var blocks: [DepthBlock] = []
            for source in sources {
                guard let kernel = try? DNNLKernels.depthBlock(of: source.kernel, first: first, depth: end - first, rows: rows, k: k, n: n)
                else { return nil }
                blocks.append(DepthBlock(kernel: kernel, first: first, column: source.column))
            }
            result.append(blocks)
        }
        return result
    }

    /// Adds the step running a product's depth blocks on the thread team:
    /// part `i`'s blocks sum their rows of the weights into partial result
    /// `i`; the partials are then added with `bias`, `activation` applied,
    /// and `residual` (of the product's shape) added.
    private static func runDepthBlocks(_ context: OperationContext, _ parts: [[DepthBlock]], x: PlanValue, bias: [Float]?,
                                       activation: DNNLKernels.Activation?, residual: PlanValue?, out: Int, rows: Int, n: Int) {
        let failure = DNNLKernels.failure(context)
        let count = rows * n
        let partials = context.scratch(.float32, shape: [parts.count, count])
        let a = x.id, p = partials.id, r = residual?.id
        context.run(reads: [a] + (r.map { [$0] } ?? []), outputs: [out], scratch: [p], split: "\(parts.count) depth blocks") { buffers throws(RuntimeError) in
            let blocks = SharedRaw(source: buffers.raw(a), destination: buffers.raw(p))
            let failed = Locked(false)
            ThreadTeam.shared.perform(parts.count, threads: parts.count) { index in
                for block in parts[index] where !block.kernel.run(blocks.source + block.first * 4, blocks.destination + (index * count + block.column) * 4) {
                    failed.withLock { $0 = true }
                }
            }
            guard !failed.withLock({ $0 }) else { throw failure }
            // Summed into the first partial (never the output: it may share the residual's buffer).
            let sum = buffers.floats(p)
            for part in 1..<parts.count {
                let other = sum + part * count
                for index in 0..<count { sum[index] += other[index] }
            }
            if let bias {
                bias.withUnsafeBufferPointer { bias in
                    for row in 0..<rows {
                        for column in 0..<n { sum[row * n + column] += bias[column] }
                    }
                }
            }
            if let activation { activate(activation, sum, count: count) }
            let target = buffers.floats(out)
            if let r {
                let addend = buffers.floats(r)
                for index in 0..<count { target[index] = sum[index] + addend[index] }
            } else {
                target.update(from: sum, count: count)
            }
        }
    }

    /// Rows up to which a product on several threads splits its depth (the
    /// rows of its weights) rather than its columns: one thread's columns
    /// are a strided part of every row of the weights, its rows a contiguous
    /// part. Measured at 2 threads on GPT-2's one-token products (a C loop
    /// streaming weights 60 layers deep, so from memory): 3,072 → 768 434 →
    /// 353 µs, 768 → 3,072 370 → 356, 768 → 2,304 286 → 260, 768 → 768 137 → 114.
    static let depthSplitRows = 1

    /// Applies `activation` to `count` values in place.
    static func activate(_ activation: DNNLKernels.Activation, _ target: UnsafeMutablePointer<Float>, count: Int) {
        switch activation {
        case .relu: for index in 0..<count { target[index] = max(target[index], 0) }
        case .geluExact: for index in 0..<count { target[index] = 0.5 * target[index] * (1 + erf(target[index] * Float(0.5).squareRoot())) }
        case .geluTanh: VectorMath.geluTanh(target, count: count)
        }
    }

    /// Rows below which a product's row blocks give way to blocks of
    /// columns (where oneDNN packs plain rows): each row block streams all
    /// the weights for its few rows, each column block its share of them.
    /// GPT-2's 64-token products at 2 threads (blocks of 32 rows) made the
    /// model 4–6 % faster as column blocks; BERT's 128-token ones (blocks of
    /// 64) 1–4 % slower.
    static let columnSplitRows = 64

    /// Whether a product of `rows` rows (a block of at least 16 per worker)
    /// splits its columns between `threads` threads rather than its rows: when
    /// the row split leaves a thread idle or gives blocks of fewer than `columnSplitRows` rows.
    static func prefersColumns(rows: Int, threads: Int) -> Bool {
        let workers = rowWorkers(rows: rows, threads: threads), block = (rows + workers - 1) / workers
        return workers < threads || (workers > 1 && block < columnSplitRows)
    }

    /// Row blocks a product of `rows` rows is split into: one per thread, at least 16 rows each.
    static func rowWorkers(rows: Int, threads: Int) -> Int { min(threads, max(1, rows / 16)) }

    /// Plans the product on oneDNN when it takes it: constant weights
    /// (`linear`'s, or a constant `y` shared by every batch) packed once now
    /// into the layout oneDNN's kernel reads, the rows of every batch as one
    /// product; otherwise a batched product reading both operands in place
    /// (transposes as strides, batch axes broadcast). `false` leaves it to OpenBLAS.
    private static func productOnDNNL(_ context: OperationContext, x: PlanValue, y: PlanValue, xShape: [Int], yShape: [Int],
                                      transposeX tx: Bool, transposeY ty: Bool, batch: [Int], m: Int, k: Int, n: Int,
                                      bias: PlanValue?, activation: DNNLKernels.Activation?, residual: PlanValue?,
                                      out: Int) throws(RuntimeError) -> Bool {
        guard m > 0, n > 0, k > 0, bias == nil || bias?.constant != nil else { return false }
        let biasValues = constantBias(bias, n)
        let xBatch = Array(xShape.dropLast(2)), yBatch = Array(yShape.dropLast(2))
        let failure = DNNLKernels.failure(context)
        let a = x.id, b = y.id, r = residual?.id
        // GELU's tanh form runs in our own loop after the product, on the thread that made its rows or columns
        // (VectorMath: oneDNN's is slow), unless a residual sum must follow it inside oneDNN.
        let ownGELU = activation == .geluTanh && residual == nil
        let dnnlActivation = ownGELU ? nil : activation
        if let weights = y.constant, yBatch.allSatisfy({ $0 == 1 }), !tx, xBatch == batch,
           let columns = ColumnBlocks(threads: context.threads, k: k, n: n, fused: residual != nil) {
            // Weights too large for any cache (a vocabulary projection): one block of columns per
            // thread, each reordering only its slice once, so each thread streams its part of the
            // weights from memory instead of every row block streaming all of them. Each block writes
            // its columns of the destination in place (row stride n): oneDNN then runs its gemm
            // kernel on plain [k, width] weights, which measured faster here (28 ms per thread for
            // GPT-2's logits at 2 threads) than its brgemm kernel on packed weights writing a
            // contiguous block copied afterwards (31–35 ms) or the row split (33 ms).
            let rows = xBatch.reduce(1, *) * m
            let kernels: [DNNLPrimitive]? = weights.withUnsafeFloats { values in
                // Mapped float32 weights are read where the file is mapped, so their slices name
                // them for other plans; float16 ones are decoded into a temporary here.
                let stored = values.baseAddress.map { UInt(bitPattern: $0) } == weights.stableFloatAddress
                var made: [DNNLPrimitive] = []
                for (first, width) in columns.blocks {
                    // The slice of the stored weights this block reads: [width, k] rows of linear's
                    // [n, k], or the columns first..<first+width of a [k, n] matrix.
                    let start = ty ? first * k : first
                    let count = ty ? width * k : (k - 1) * n + width
                    let slice = UnsafeBufferPointer(rebasing: values[start..<start + count])
                    let operand = ty ? DNNLKernels.Operand(dims: [k, width], strides: [1, k]) : DNNLKernels.Operand(dims: [k, width], strides: [n, 1])
                    let key = stored ? slice.baseAddress.map {
                        DNNLKernels.WeightsKey(address: UInt(bitPattern: $0), count: count, dims: operand.dims, strides: operand.strides)
                    } : nil
                    guard let kernel = try? DNNLKernels.matmul(source: .init([rows, k]), weights: operand,
                                                               destination: .init(dims: [rows, width], strides: [n, 1]), constantWeights: slice,
                                                               bias: biasValues.map { Array($0[first..<first + width]) }, activation: dnnlActivation,
                                                               residual: nil, threads: 1, sharingWeightsWith: key.flatMap(DNNLKernels.product(packing:)))
                    else { return nil }
                    if let key { DNNLKernels.remember(kernel, packing: key) }
                    made.append(kernel)
                }
                return made
            }
            guard let kernels else { return false }
            // One row: each thread takes a block of the depth of every slice (contiguous rows of each).
            if let parts = depthParts(of: Array(zip(kernels, columns.blocks.map(\.first))), rows: rows, k: k, n: n, threads: context.threads) {
                runDepthBlocks(context, parts, x: x, bias: biasValues, activation: activation, residual: residual, out: out, rows: rows, n: n)
                return true
            }
            runColumnBlocks(context, kernels, firsts: columns.blocks.map(\.first), x: x, residual: nil, out: out, rows: rows, n: n, geluTanh: ownGELU)
            return true
        }
        if let weights = y.constant, yBatch.allSatisfy({ $0 == 1 }), !tx, xBatch == batch {
            // Row blocks, one per thread, each a single-threaded oneDNN product (the thread team's
            // threads, not OpenMP's: OpenMP's barriers spin and stall when the cores are shared).
            let rows = xBatch.reduce(1, *) * m
            let workers = Self.rowWorkers(rows: rows, threads: context.threads)
            let block = (rows + workers - 1) / workers, lastBlock = rows - block * (workers - 1)
            let operand = ty ? DNNLKernels.Operand(dims: [k, n], strides: [1, k]) : DNNLKernels.Operand([k, n])
            // Mapped float32 weights are packed straight from the weight file. The address names
            // the weights only when it is the constant's own array or its mapped bytes, which the
            // graph keeps alive (not a temporary converted from integers).
            let stableAddress = weights.stableFloatAddress
            let kernels: [DNNLPrimitive]? = weights.withUnsafeFloats { values in
                func make(_ rows: Int, sharing other: DNNLPrimitive?) -> DNNLPrimitive? {
                    try? DNNLKernels.matmul(source: .init([rows, k]), weights: operand, destination: .init([rows, n]), constantWeights: values,
                                       bias: biasValues, activation: dnnlActivation, residual: residual.map { _ in .init([rows, n]) },
                                       threads: 1, sharingWeightsWith: other)
                }
                let key = stableAddress.map {
                    DNNLKernels.WeightsKey(address: $0, count: values.count, dims: operand.dims, strides: operand.strides)
                }
                guard let main = make(block, sharing: key.flatMap(DNNLKernels.product(packing:))) else { return nil }
                if let key { DNNLKernels.remember(main, packing: key) }
                if lastBlock == block { return [main] }
                guard let last = make(lastBlock, sharing: main) else { return nil }
                return [main, last]
            }
            guard let kernels else { return false }
            // Too few rows to give every thread a block of them (a decoder's one-token step), or blocks
            // of fewer than `columnSplitRows` rows: a block of columns each, reading the packed weights in
            // place (plain rows on AVX2, blocks of whole columns on AVX-512). A residual is copied into the
            // destination first and summed there, except after an activation (oneDNN's optimized kernels
            // follow none with a sum): then each thread adds it to its columns after them.
            let residualAfter = residual != nil && dnnlActivation != nil
            func columnKernels() -> (firsts: [Int], kernels: [DNNLPrimitive])? {
                guard Self.prefersColumns(rows: rows, threads: context.threads),
                      let columns = ColumnBlocks(parts: WorkSplit.workers(threads: context.threads, work: rows * k * n, items: n / 64), n: n)
                else { return nil }
                var made: [DNNLPrimitive] = []
                for (first, width) in columns.blocks {
                    guard let kernel = try? DNNLKernels.columnBlock(of: kernels[0], first: first, width: width, rows: rows, n: n,
                                                                    bias: biasValues.map { Array($0[first..<first + width]) },
                                                                    activation: dnnlActivation, accumulate: residual != nil && !residualAfter)
                    else { return nil }
                    made.append(kernel)
                }
                return (columns.blocks.map(\.first), made)
            }
            // One row (a decoder's one-token step) on several threads: blocks of the depth, each
            // streaming a contiguous part of the packed weights; their partial sums, the bias, the
            // activation and the residual are added after.
            if let parts = depthParts(of: [(kernels[0], 0)], rows: rows, k: k, n: n, threads: context.threads) {
                runDepthBlocks(context, parts, x: x, bias: biasValues, activation: activation, residual: residual, out: out, rows: rows, n: n)
                return true
            }
            if let (firsts, blockKernels) = columnKernels() {
                runColumnBlocks(context, blockKernels, firsts: firsts, x: x, residual: residual, residualAfter: residualAfter, out: out,
                                rows: rows, n: n, geluTanh: ownGELU)
                return true
            }
            context.run(reads: [x] + (residual.map { [$0] } ?? []), writes: [out]) { buffers throws(RuntimeError) in
                let blocks = RowBlocks(source: buffers.raw(a), destination: buffers.raw(out), residual: r.map { buffers.raw($0) },
                                       sourceRow: k * 4, destinationRow: n * 4, geluTanh: ownGELU)
                let ok: Bool
                if workers == 1 {
                    ok = blocks.run(kernels[0], first: 0, rows: rows)
                } else {
                    let failed = Locked(false)
                    ThreadTeam.shared.perform(workers, threads: workers) { worker in
                        let last = worker == workers - 1
                        if !blocks.run(last ? kernels[kernels.count - 1] : kernels[0], first: worker * block, rows: last ? lastBlock : block) {
                            failed.withLock { $0 = true }
                        }
                    }
                    ok = !failed.withLock { $0 }
                }
                guard ok else { throw failure }
            }
            return true
        }
        // One rank for all three; a stored operand's last two axes are (rows, columns) before any transpose.
        let rank = batch.count + 2
        func operand(_ stored: [Int], transposed: Bool, rows: Int, columns: Int) -> DNNLKernels.Operand {
            let padded = Array(repeating: 1, count: rank - stored.count) + stored
            var strides = Shapes.strides(padded)
            if transposed { strides.swapAt(rank - 2, rank - 1) }
            return DNNLKernels.Operand(dims: Array(padded.dropLast(2)) + [rows, columns], strides: strides)
        }
        guard let kernel = try? DNNLKernels.matmul(source: operand(xShape, transposed: tx, rows: m, columns: k),
                                              weights: operand(yShape, transposed: ty, rows: k, columns: n),
                                              destination: .init(batch + [m, n]), constantWeights: nil, bias: biasValues, activation: activation,
                                              residual: residual.map { _ in .init(batch + [m, n]) }, threads: 1)
        else { return false }
        context.run(reads: [x, y] + (residual.map { [$0] } ?? []), writes: [out]) { buffers throws(RuntimeError) in
            let ran = if let r {
                kernel.run(buffers.raw(a), buffers.raw(b), buffers.raw(out), buffers.raw(r))
            } else {
                kernel.run(buffers.raw(a), buffers.raw(b), buffers.raw(out))
            }
            guard ran else { throw failure }
        }
        return true
    }

    /// A constant bias as `n` values (one given for all repeated), or `nil` without one.
    private static func constantBias(_ bias: PlanValue?, _ n: Int) -> [Float]? {
        bias?.constant.map { values in values.count == 1 ? Array(repeating: values.floats[0], count: n) : values.floats }
    }

    /// A step after a product that applies `activation` to its result in
    /// place, then adds `residual` (broadcast to `shape`).
    static func addAfter(_ context: OperationContext, out: Int, shape: [Int], activation: DNNLKernels.Activation?, residual: PlanValue?) {
        let count = shape.reduce(1, *)
        let strides = residual.map { Shapes.broadcastStrides($0.shape, to: shape) } ?? []
        let r = residual?.id
        context.run(reads: [out] + (residual.map { [$0.id] } ?? []), outputs: [out], scratch: []) { buffers in
            let target = buffers.floats(out)
            if let activation { activate(activation, target, count: count) }
            guard let r else { return }
            let addend = buffers.floats(r)
            let step = strides.last ?? 0
            Shapes.walk(shape, [strides]) { o, offsets, n in
                for k in 0..<n { target[o + k] += addend[offsets[0] + k * step] }
            }
        }
    }

    /// Two-operand einsum: operands transposed so that batch, free and
    /// summed letters are grouped, then batched products.
    private static func einsum(_ context: OperationContext) throws(RuntimeError) {
        let values = try context.list("values")
        let equation = try context.string("equation", "").replacingOccurrences(of: " ", with: "")
        let sides = equation.components(separatedBy: "->")
        let terms = sides.first?.components(separatedBy: ",") ?? []
        guard values.count == 2, terms.count == 2, sides.count == 2, !equation.contains(".") else {
            throw context.unsupported("einsum \"\(equation)\" is not supported (two operands with an explicit output only)")
        }
        let a = Array(terms[0]), b = Array(terms[1]), output = Array(sides[1])
        guard a.count == values[0].rank, b.count == values[1].rank else { throw context.invalid("equation \(equation) does not match ranks") }
        var sizes: [Character: Int] = [:]
        for (letters, value) in [(a, values[0]), (b, values[1])] {
            // A letter of size 1 in one operand broadcasts to its size in the other (NumPy's einsum).
            for (letter, size) in zip(letters, value.shape) {
                if let known = sizes[letter], known != size, known != 1, size != 1 {
                    throw context.invalid("letter \(letter) has sizes \(known) and \(size)")
                }
                if sizes[letter] == nil || sizes[letter] == 1 { sizes[letter] = size }
            }
        }
        let batchLetters = output.filter { a.contains($0) && b.contains($0) }
        let aFree = output.filter { a.contains($0) && !b.contains($0) }
        let bFree = output.filter { b.contains($0) && !a.contains($0) }
        let summed = a.filter { b.contains($0) && !output.contains($0) }
        guard batchLetters.count + aFree.count + bFree.count == output.count,
              a.allSatisfy({ output.contains($0) || b.contains($0) }), b.allSatisfy({ output.contains($0) || a.contains($0) }) else {
            throw context.unsupported("einsum \"\(equation)\" is not supported")
        }
        func size(_ letters: [Character]) -> Int { letters.reduce(1) { $0 * (sizes[$1] ?? 1) } }
        let batches = size(batchLetters), m = size(aFree), n = size(bFree), k = size(summed)
        // Element positions of A as [batch, m, k] and B as [batch, k, n].
        func table(_ letters: [Character], _ order: [Character], shape: [Int]) -> [Int32] {
            let strides = Shapes.strides(shape)
            let own = order.map { letter in letters.firstIndex(of: letter).map { shape[$0] == 1 ? 0 : strides[$0] } ?? 0 }
            var result: [Int32] = []
            Shapes.forEachIndex(order.map { sizes[$0] ?? 1 }) { index in result.append(Int32(zip(index, own).reduce(0) { $0 + $1.0 * $1.1 })) }
            return result
        }
        let aTable = table(a, batchLetters + aFree + summed, shape: values[0].shape)
        let bTable = table(b, batchLetters + summed + bFree, shape: values[1].shape)
        // The product is [batch, m, n]; the output's letter order may differ.
        let productOrder = batchLetters + aFree + bFree
        let outShape = output.map { sizes[$0] ?? 1 }
        let outTable = table(productOrder, output, shape: productOrder.map { sizes[$0] ?? 1 })
        let out = try context.output(outShape)
        let left = values[0].id, right = values[1].id
        context.run(reads: values, writes: [out]) { buffers in
            let total = batches * m * n
            var packedA = [Float](repeating: 0, count: aTable.count), packedB = [Float](repeating: 0, count: bTable.count)
            var product = [Float](repeating: 0, count: total)
            let x = buffers.floats(left), y = buffers.floats(right)
            for index in aTable.indices { packedA[index] = x[Int(aTable[index])] }
            for index in bTable.indices { packedB[index] = y[Int(bTable[index])] }
            packedA.withUnsafeBufferPointer { pa in
                packedB.withUnsafeBufferPointer { pb in
                    product.withUnsafeMutableBufferPointer { pc in
                        guard let ba = pa.baseAddress, let bb = pb.baseAddress, let bc = pc.baseAddress else { return }
                        for batch in 0..<batches {
                            gemm(ba + batch * m * k, transposeA: false, bb + batch * k * n, transposeB: false, bc + batch * m * n, m: m, n: n, k: k)
                        }
                    }
                }
            }
            let target = buffers.floats(out)
            for index in outTable.indices { target[index] = product[Int(outTable[index])] }
        }
    }
}

/// A product's rows split between threads: each block's source, destination
/// and residual rows start at the block's first row.
/// How a product over constant weights splits between threads by columns:
/// when there are several threads and the weights are too large for any
/// cache (at least 8 M values, a vocabulary projection such as GPT-2's
/// logits), each thread computes a block of columns over all rows, reading
/// only its slice of the weights. Row blocks would each stream the whole
/// matrix from memory, halving the rate of every thread at two. A residual
/// (a row-major addend) keeps the row split.
struct ColumnBlocks {
    /// First column and width of each block; widths are multiples of 64
    /// (oneDNN's packed column block) except the last.
    let blocks: [(first: Int, width: Int)]

    /// The fewest weights split by columns (tests lower it to reach small models).
    @TaskLocal static var minimumWeights = 1 << 23

    init?(threads: Int, k: Int, n: Int, fused residual: Bool) {
        guard !residual, k * n >= Self.minimumWeights else { return nil }
        self.init(parts: threads, n: n)
    }

    /// `n` columns in at most `parts` blocks; `nil` when that makes one block.
    init?(parts: Int, n: Int) {
        guard parts > 1, n > 64 else { return nil }
        let width = ((n + parts - 1) / parts + 63) / 64 * 64
        var blocks: [(first: Int, width: Int)] = []
        var first = 0
        while first < n {
            blocks.append((first, min(width, n - first)))
            first += width
        }
        self.blocks = blocks
    }
}

/// A product's source and destination, read and written by several threads
/// (each writes its own columns).
private struct SharedRaw: @unchecked Sendable {
    let source: UnsafeMutableRawPointer
    let destination: UnsafeMutableRawPointer
}

private struct RowBlocks: @unchecked Sendable {
    let source: UnsafeMutableRawPointer
    let destination: UnsafeMutableRawPointer
    let residual: UnsafeMutableRawPointer?
    /// Bytes per row of the source and of the destination (and residual).
    let sourceRow: Int
    let destinationRow: Int
    /// Whether GELU's tanh form follows the product here (`VectorMath`), not in oneDNN.
    var geluTanh = false

    /// Runs `kernel` on the `rows` rows from `first`.
    func run(_ kernel: DNNLPrimitive, first: Int, rows: Int) -> Bool {
        let ran = if let residual {
            kernel.run(source + first * sourceRow, destination + first * destinationRow, residual + first * destinationRow)
        } else {
            kernel.run(source + first * sourceRow, destination + first * destinationRow)
        }
        if ran, geluTanh {
            VectorMath.geluTanh((destination + first * destinationRow).assumingMemoryBound(to: Float.self), count: rows * destinationRow / 4)
        }
        return ran
    }
}

/// The operands of a product split between threads: each thread writes a
/// part of `target` no other thread touches, and all only read the rest.
struct SharedPointers: @unchecked Sendable {
    let left: UnsafeMutablePointer<Float>
    let right: UnsafeMutablePointer<Float>
    let target: UnsafeMutablePointer<Float>
}

// MARK: Facts

extension LinearAlgebraOperations {
    /// `matmul`: the batch dimensions broadcast, then rows of `x` by columns
    /// of `y` (after their transposes); a vector operand's dimension dropped.
    static let matmulFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input(), y = try context.input("y")
        guard var xDims = x.shape, var yDims = y.shape, !xDims.isEmpty, !yDims.isEmpty else { return [.unknownRank(x.element)] }
        let xVector = xDims.count == 1, yVector = yDims.count == 1
        if xVector { xDims.insert(1, at: 0) }
        if yVector { yDims.append(1) }
        if context.bool("transpose_x", false), !xVector { xDims.swapAt(xDims.count - 1, xDims.count - 2) }
        if context.bool("transpose_y", false), !yVector { yDims.swapAt(yDims.count - 1, yDims.count - 2) }
        var dims = ValueType.broadcast([Array(xDims.dropLast(2)), Array(yDims.dropLast(2))])
        if !xVector { dims.append(xDims[xDims.count - 2]) }
        if !yVector { dims.append(yDims[yDims.count - 1]) }
        return [ValueType(x.element, shape: dims)]
    }

    /// `linear` (and its fusion): `x`'s dimensions with the last one the weight's rows.
    static let linearFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input(), weight = try context.input("weight")
        guard let dims = x.shape, !dims.isEmpty else { return [.unknownRank(x.element)] }
        let columns = context.string("weight_layout", "out_in") == "in_out" ? weight.dimension(1) : weight.dimension(0)
        return [ValueType(x.element, shape: dims.dropLast() + [columns])]
    }
}

extension LinearAlgebraOperations {
    /// `einsum`: one dimension per subscript after `->`, each its operands' for that subscript (1s broadcast).
    static let einsumFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let values = try context.list("values")
        let element = values.first?.element ?? .float32
        let equation = context.string("equation", "").replacingOccurrences(of: " ", with: "")
        let sides = equation.components(separatedBy: "->")
        // An ellipsis stands for dimensions the subscripts do not name: the rank is not followed through it.
        guard sides.count == 2, !equation.contains(".") else { return [.unknownRank(element)] }
        let operands = sides[0].components(separatedBy: ",")
        var sizes: [Character: Int] = [:]
        for (subscripts, value) in zip(operands, values) {
            guard let shape = value.shape, shape.count == subscripts.count else { continue }
            // A subscript of size 1 in one operand broadcasts to its size in another.
            for (letter, size) in zip(subscripts, shape) where size != nil && (sizes[letter] ?? 1) == 1 { sizes[letter] = size }
        }
        return [ValueType(element, shape: sides[1].map { sizes[$0] })]
    }
}
