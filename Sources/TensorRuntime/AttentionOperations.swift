import CDNNL
import COpenBLAS
import CVectorMath
import Dispatch
import Foundation
import ModelFeatures
import SystemIO

/// Attention as one kernel: `softmax(scale · Q·Kᵀ + mask) · V` over the last
/// two axes, batch axes broadcast. It runs iOS18's
/// `scaled_dot_product_attention` and `fused_attention`, what
/// `Fusion/AttentionFusion.swift` makes of the batched `matmul`, scale, mask
/// `add`, `softmax` and `matmul` that `ct.convert` writes for BERT, GPT-2 and
/// ViT.
///
/// Each batch matrix (one head) is done in blocks of query rows whose scores
/// stay in a per-thread scratch block while they are scaled, masked,
/// normalised and multiplied by V, so the scores never go through the arena.
/// Work items (head, row block) are split between the thread team's threads; the
/// products and the softmax are single-threaded oneDNN primitives, with
/// OpenBLAS and our own loops as the fallback when oneDNN refuses a shape.
/// Keys and values held as halves (a decoder's fp16 cache) are read as they
/// lie by one query row's vector products (`modelc_half_rows_dot`,
/// `modelc_half_rows_combine`), and widened per head into the worker's
/// scratch for a block of rows.
enum AttentionOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "scaled_dot_product_attention": OperationDefinition(["query", "key", "value", "attn_mask"]) { context throws(RuntimeError) in
            let query = try context.input("query")
            try plan(context, query: query, key: try context.storedInput("key"), keyTransposed: false, value: try context.storedInput("value"),
                     scale: 1 / Float(query.shape.last ?? 1).squareRoot(), mask: try context.optional("attn_mask"), zeroFullyMaskedRows: true)
        }.withFacts(attentionFacts),
    ]

    /// Operations only the engine's passes make (a program file naming one is refused).
    static let internalDefinitions: [String: OperationDefinition] = [
        // softmax(scale · matmul(query, key, transpose_y: transpose_key) + mask, axis: -1) · value (Fusion/AttentionFusion.swift).
        "fused_attention": OperationDefinition(["query", "key", "value", "transpose_key", "scale", "mask"]) { context throws(RuntimeError) in
            try plan(context, query: try context.input("query"), key: try context.storedInput("key"),
                     keyTransposed: !(try context.bool("transpose_key", false)), value: try context.storedInput("value"),
                     scale: try context.float("scale", 1), mask: try context.optional("mask"), zeroFullyMaskedRows: false)
        }.withFacts(attentionFacts),
    ]

    /// Plans attention of `query` `[…, L, E]` against `key` (`[…, S, E]`, or
    /// `[…, E, S]` when `keyTransposed`) and `value` `[…, S, Ev]`, giving `[…, L, Ev]`.
    /// A bool mask keeps where true (−∞ elsewhere), a float mask is added.
    /// `zeroFullyMaskedRows` gives rows whose every score is −∞ zero weights
    /// (the unfused softmax gives NaN there, as PyTorch does).
    static func plan(_ context: OperationContext, query: PlanValue, key: PlanValue, keyTransposed: Bool, value: PlanValue,
                     scale: Float, mask: PlanValue?, zeroFullyMaskedRows: Bool) throws(RuntimeError) {
        guard query.rank >= 2, key.rank >= 2, value.rank >= 2, query.isFloat, key.isFloat, value.isFloat else {
            throw context.invalid("query, key and value need float tensors of rank 2 or more")
        }
        let l = query.shape[query.rank - 2], e = query.shape[query.rank - 1]
        let s = keyTransposed ? key.shape[key.rank - 1] : key.shape[key.rank - 2]
        let keyInner = keyTransposed ? key.shape[key.rank - 2] : key.shape[key.rank - 1]
        let ev = value.shape[value.rank - 1]
        guard keyInner == e, value.shape[value.rank - 2] == s else {
            throw context.invalid("key \(key.shape) and value \(value.shape) do not fit query \(query.shape)")
        }
        let qBatch = Array(query.shape.dropLast(2)), kBatch = Array(key.shape.dropLast(2)), vBatch = Array(value.shape.dropLast(2))
        guard let qk = Shapes.broadcast(qBatch, kBatch), let batch = Shapes.broadcast(qk, vBatch) else {
            throw context.invalid("batch shapes of query \(query.shape), key \(key.shape) and value \(value.shape) do not broadcast")
        }
        var maskLayout: MaskLayout?
        if let mask {
            guard let combined = Shapes.broadcast(mask.shape, batch + [l, s]), combined == batch + [l, s] else {
                throw context.invalid("mask \(mask.shape) does not broadcast to the scores' shape \(batch + [l, s])")
            }
            let strides = Shapes.broadcastStrides(mask.shape, to: combined)
            maskLayout = MaskLayout(offsets: Shapes.offsets(batch, strides: Array(strides.dropLast(2))), row: strides[strides.count - 2],
                                    column: strides[strides.count - 1], isBool: !mask.isFloat)
        }
        let out = try context.output(batch + [l, ev])
        let batches = batch.reduce(1, *)
        guard batches > 0, l > 0, ev > 0 else {
            context.run(reads: [], writes: [out]) { _ in }
            return
        }
        // Row blocks of at most 64 K of scores each (a whole head for BERT-base at sequence 128).
        let block = max(1, min(l, max(8, 16_384 / max(s, 1))))
        let blocksPerBatch = (l + block - 1) / block
        let items = batches * blocksPerBatch
        let workers = WorkSplit.workers(threads: context.threads, work: batches * l * max(s, 1) * (e + ev), items: items)
        // Each operand's matrices where they lie: a grouped-query decoder's key and value heads in its cache, not
        // in the copies that slice, repeat and transpose them (MatrixStack).
        func matrices(_ operand: PlanValue, _ operandBatch: [Int], rows: Int, columns: Int) -> (source: PlanValue, offsets: [Int]) {
            let count = operandBatch.reduce(1, *)
            if let stack = context.stack(of: operand), stack.rows == rows, stack.columns == columns, stack.offsets.count == count {
                return (context.value(stack.source), stack.offsets)
            }
            return (operand, (0..<count).map { $0 * rows * columns })
        }
        let q = matrices(query, qBatch, rows: l, columns: e)
        let k = matrices(key, kBatch, rows: keyTransposed ? e : s, columns: keyTransposed ? s : e)
        let v = matrices(value, vBatch, rows: s, columns: ev)
        // Each worker's scores block, then room for one head's keys and values widened from halves.
        let scoresPerWorker = block * max(s, 1)
        let perWorker = scoresPerWorker + (k.source.isNarrow ? s * e : 0) + (v.source.isNarrow ? s * ev : 0)
        let scratch = context.scratch(.float32, shape: [workers * perWorker])
        let geometry = Geometry(l: l, s: s, e: e, ev: ev, block: block, blocksPerBatch: blocksPerBatch, scale: scale,
                                keyTransposed: keyTransposed,
                                query: Shapes.offsets(batch, strides: Shapes.broadcastStrides(qBatch, to: batch)).map { q.offsets[$0] },
                                key: Shapes.offsets(batch, strides: Shapes.broadcastStrides(kBatch, to: batch)).map { k.offsets[$0] },
                                value: Shapes.offsets(batch, strides: Shapes.broadcastStrides(vBatch, to: batch)).map { v.offsets[$0] },
                                mask: maskLayout, zeroFullyMaskedRows: zeroFullyMaskedRows,
                                keyHalves: k.source.isNarrow, valueHalves: v.source.isNarrow, widenedAt: scoresPerWorker)
        // One query row (a decoder's step): the products are vector products, which need no oneDNN primitives
        // made for this length of the cache at every step's plan.
        let kernels = s > 0 && e > 0 && l > 1 ? try? Kernels(geometry, lastBlock: l - block * (blocksPerBatch - 1)) : nil
        let ids = IDs(query: q.source.id, key: k.source.id, value: v.source.id, mask: mask?.id, out: out, scratch: scratch.id)
        let failure = DNNLKernels.failure(context)
        _ = LinearAlgebraOperations.singleThreaded
        context.run(reads: [q.source, k.source, v.source] + (mask.map { [$0] } ?? []), writes: [out, scratch.id]) { buffers throws(RuntimeError) in
            let pointers = Pointers(buffers, ids)
            if workers == 1 {
                for item in 0..<items where !geometry.run(item, pointers, scores: pointers.scratch, kernels: kernels) { throw failure }
                return
            }
            let failed = Locked(false)
            ThreadTeam.shared.perform(workers, threads: workers) { worker in
                let scores = pointers.scratch + worker * perWorker
                for item in stride(from: worker, to: items, by: workers) where !geometry.run(item, pointers, scores: scores, kernels: kernels) {
                    failed.withLock { $0 = true }
                }
            }
            if failed.withLock({ $0 }) { throw failure }
        }
    }

    /// Where the mask's element for (batch, row, column) is: a batch's first
    /// element, then row and column strides (0 where it broadcasts).
    struct MaskLayout: Sendable {
        var offsets: [Int]
        var row: Int
        var column: Int
        var isBool: Bool
    }

    private struct IDs: Sendable {
        var query, key, value: Int
        var mask: Int?
        var out, scratch: Int
    }

    /// One run's addresses, shared (read-only, or written in disjoint parts) by the threads.
    private struct Pointers: @unchecked Sendable {
        let query, out, scratch: UnsafeMutablePointer<Float>
        /// Floats, or halves where the geometry says so.
        let key, value: UnsafeMutableRawPointer
        let mask: UnsafeMutableRawPointer?

        init(_ buffers: Buffers, _ ids: IDs) {
            query = buffers.floats(ids.query)
            key = buffers.raw(ids.key)
            value = buffers.raw(ids.value)
            out = buffers.floats(ids.out)
            scratch = buffers.floats(ids.scratch)
            mask = ids.mask.map { buffers.raw($0) }
        }
    }

    /// oneDNN's kernels for a full row block and for the last (shorter) one:
    /// the scores product (with the scale as a post-operation), the softmax
    /// in place, the product with V.
    private final class Kernels: Sendable {
        let scores: [DNNLPrimitive]
        let softmax: [DNNLPrimitive]
        let product: [DNNLPrimitive]

        init(_ g: Geometry, lastBlock: Int) throws(RuntimeError) {
            var scores: [DNNLPrimitive] = [], softmax: [DNNLPrimitive] = [], product: [DNNLPrimitive] = []
            for rows in g.block == lastBlock ? [g.block] : [g.block, lastBlock] {
                let keyOperand = g.keyTransposed ? DNNLKernels.Operand([g.e, g.s]) : DNNLKernels.Operand(dims: [g.e, g.s], strides: [1, g.e])
                scores.append(try DNNLKernels.matmul(source: .init([rows, g.e]), weights: keyOperand, destination: .init([rows, g.s]),
                                                     constantWeights: nil, bias: nil, activation: nil, residual: nil, threads: 1,
                                                     scale: g.scale == 1 ? nil : g.scale))
                softmax.append(try DNNLKernels.softmax(shape: [rows, g.s], axis: 1, threads: 1))
                product.append(try DNNLKernels.matmul(source: .init([rows, g.s]), weights: .init([g.s, g.ev]), destination: .init([rows, g.ev]),
                                                      constantWeights: nil, bias: nil, activation: nil, residual: nil, threads: 1))
            }
            self.scores = scores
            self.softmax = softmax
            self.product = product
        }
    }

    /// The sizes and offsets of one planned attention.
    private struct Geometry: Sendable {
        let l, s, e, ev, block, blocksPerBatch: Int
        let scale: Float
        let keyTransposed: Bool
        /// Element offsets of each batch matrix.
        let query, key, value: [Int]
        let mask: MaskLayout?
        let zeroFullyMaskedRows: Bool
        /// Whether keys and values are held as halves, and where in a worker's scratch (after its scores) they are widened.
        let keyHalves, valueHalves: Bool
        let widenedAt: Int

        /// Computes work item `item` (batch matrix, row block) into `out`, with `scores` as its scratch block.
        func run(_ item: Int, _ p: Pointers, scores: UnsafeMutablePointer<Float>, kernels: Kernels?) -> Bool {
            let batch = item / blocksPerBatch, blockIndex = item % blocksPerBatch
            let first = blockIndex * block, rows = min(l, first + block) - first
            let q = p.query + query[batch] + first * e
            let o = p.out + (batch * l + first) * ev
            guard s > 0, e > 0 else {
                for index in 0..<(rows * ev) { o[index] = 0 }
                return true
            }
            // One query row (a decoder's step) reads halves where they lie; a block of rows has them widened into
            // the scratch for its products.
            let inPlace = rows == 1 && kernels == nil
            let kRaw = p.key + key[batch] * (keyHalves ? 2 : 4), vRaw = p.value + value[batch] * (valueHalves ? 2 : 4)
            var k = kRaw.assumingMemoryBound(to: Float.self), v = vRaw.assumingMemoryBound(to: Float.self)
            var widened = scores + widenedAt
            if keyHalves, !inPlace {
                ElementConversion.widen(kRaw, count: s * e, into: UnsafeMutableRawPointer(widened))
                k = widened
                widened += s * e
            }
            if valueHalves, !inPlace {
                ElementConversion.widen(vRaw, count: s * ev, into: UnsafeMutableRawPointer(widened))
                v = widened
            }
            let which = rows == block ? 0 : 1
            if let kernels {
                guard kernels.scores[which].run(UnsafeMutableRawPointer(q), UnsafeMutableRawPointer(k), UnsafeMutableRawPointer(scores)) else { return false }
            } else if rows == 1 {
                // A vector product over the keys, which OpenBLAS's gemm would pack first.
                switch (keyHalves, keyTransposed) {
                case (true, true): modelc_half_rows_combine(kRaw, e, s, s, q, scale, scores)
                case (true, false): modelc_half_rows_dot(kRaw, s, e, e, q, scale, scores)
                case (false, true): cblas_sgemv(CblasRowMajor, CblasTrans, Int32(e), Int32(s), scale, k, Int32(s), q, 1, 0, scores, 1)
                case (false, false): cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(s), Int32(e), scale, k, Int32(e), q, 1, 0, scores, 1)
                }
            } else {
                LinearAlgebraOperations.gemm(q, transposeA: false, k, transposeB: !keyTransposed, scores, m: rows, n: s, k: e)
                if scale != 1 { for index in 0..<(rows * s) { scores[index] *= scale } }
            }
            if let mask, let base = p.mask { addMask(mask, base, batch: batch, first: first, rows: rows, scores: scores) }
            if let kernels {
                guard kernels.softmax[which].run(UnsafeMutableRawPointer(scores), UnsafeMutableRawPointer(scores)) else { return false }
            } else {
                VectorMath.softmaxRows(scores, rows: rows, columns: s)
            }
            if zeroFullyMaskedRows {
                for row in 0..<rows where scores[row * s].isNaN {
                    for column in 0..<s { scores[row * s + column] = 0 }
                }
            }
            if let kernels {
                return kernels.product[which].run(UnsafeMutableRawPointer(scores), UnsafeMutableRawPointer(v), UnsafeMutableRawPointer(o))
            }
            if rows == 1, valueHalves {
                modelc_half_rows_combine(vRaw, s, ev, ev, scores, 1, o)
            } else if rows == 1 {
                cblas_sgemv(CblasRowMajor, CblasTrans, Int32(s), Int32(ev), 1, v, Int32(ev), scores, 1, 0, o, 1)
            } else {
                LinearAlgebraOperations.gemm(scores, transposeA: false, v, transposeB: false, o, m: rows, n: ev, k: s)
            }
            return true
        }

        private func addMask(_ mask: MaskLayout, _ base: UnsafeMutableRawPointer, batch: Int, first: Int, rows: Int,
                             scores: UnsafeMutablePointer<Float>) {
            for row in 0..<rows {
                let start = mask.offsets[batch] + (first + row) * mask.row
                let line = scores + row * s
                if mask.isBool {
                    let values = base.assumingMemoryBound(to: Int32.self) + start
                    for column in 0..<s where values[column * mask.column] == 0 { line[column] = -.infinity }
                } else if mask.column == 1 {
                    let values = base.assumingMemoryBound(to: Float.self) + start
                    for column in 0..<s { line[column] += values[column] }
                } else {
                    let values = base.assumingMemoryBound(to: Float.self) + start
                    for column in 0..<s { line[column] += values[column * mask.column] }
                }
            }
        }
    }
}

// MARK: Facts

extension AttentionOperations {
    /// Attention: the query's dimensions with the last one the value's.
    static let attentionFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let query = try context.input("query"), value = try context.input("value")
        guard let shape = query.shape, !shape.isEmpty else { return [.unknownRank(query.element)] }
        return [ValueType(query.element, shape: shape.dropLast() + [value.dimension(-1)])]
    }
}
