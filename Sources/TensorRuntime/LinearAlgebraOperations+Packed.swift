import COpenBLAS
import CWeightKernels

/// Products whose constant weights are kept as stored (`PackedWeights`):
/// int4 / int8 codes with scales, lookup tables, half floats. Nothing is
/// packed or widened at plan time. Few rows (a decoder's one-token step)
/// run as vector products streaming the stored bytes once; more rows
/// (a prefill) unpack a tile of the weights at a time into a thread's
/// buffer, small enough to stay in its cache, and multiply it there: an
/// fp16 program's 4- and 8-bit codes by the input rounded to 16-bit
/// integers (`modelc_packed_multiply_integer`), other weights widened to
/// floats and multiplied with OpenBLAS.
extension LinearAlgebraOperations {
    /// Rows up to which a product runs as vector products (one pass over the
    /// weights per row) rather than through widened tiles.
    static let packedVectorRows = 4

    /// Weight rows (the `[n, k]` form's outputs, or the `[k, n]` form's
    /// depth) widened at a time for the tiled product.
    static let packedTileRows = 64

    /// Fp16 weights with at least this many values are read as stored
    /// (`PackedWeights.halves`) instead of packed as float32 by oneDNN: a
    /// decoder's projections, where their float32 copy would double the
    /// memory a model takes. Smaller ones keep oneDNN's packed kernels.
    static let halfWeightsReadAsStored = 1 << 20

    /// The packed form of a product's constant weights `y`, if they are kept
    /// as stored or are fp16 values large enough to be read so.
    static func packedWeights(_ y: PlanValue) -> PackedWeights? {
        guard y.rank == 2, let constant = y.constant else { return nil }
        switch constant.storage {
        case .packed(let packed): return packed
        case .mapped(let values) where values.half && values.count >= halfWeightsReadAsStored: return PackedWeights.halves(values, shape: y.shape)
        default: return nil
        }
    }

    /// Plans `x · W` (+ bias, then `activation`, then + `residual` of the
    /// result's shape) over packed weights: `W` is stored `[n, k]`
    /// (`transposed`, a linear layer's) or `[k, n]`. `rows` rows of `x`, each `k` long.
    static func packedProduct(_ context: OperationContext, x: PlanValue, weights: PackedWeights, transposed: Bool, rows: Int, k: Int, n: Int,
                              bias: [Float]?, activation: DNNLKernels.Activation?, residual: PlanValue?, out: Int) {
        let vector = rows <= packedVectorRows
        // Vector products split the outputs; tiles split the tiles of outputs ([n, k]) or the columns ([k, n]).
        let pieces = vector ? max(1, n / 64) : (transposed ? (n + packedTileRows - 1) / packedTileRows : max(1, n / 64))
        let workers = WorkSplit.workers(threads: context.threads, work: rows * k * n, items: pieces)
        let tileWidth = transposed ? k : (n + workers - 1) / workers
        // A prefill by an fp16 program's codes takes its input as integers; a NaN or an infinity in it takes the float tiles.
        let integer = !vector && transposed && weights.withMatrix { modelc_packed_multiply_quantize_inputs($0) } != 0
        let tileFloats = max(packedTileRows * tileWidth, integer ? weights.withMatrix { (modelc_packed_multiply_buffer_bytes($0) + 63) / 64 * 16 } : 0)
        let tiles = vector ? nil : context.scratch(.float32, shape: [workers, tileFloats])
        let rounded = integer ? context.scratch(.float32, shape: [(modelc_rounded_rows_bytes(rows, k) + 3) / 4]).id : nil
        // With a residual the product goes to a buffer of its own: the output may share the residual's.
        let product = residual.map { _ in context.scratch(.float32, shape: [rows, n]).id }
        let a = x.id, r = residual?.id, t = tiles?.id
        let split = workers > 1 ? "\(workers) \(vector ? "output" : "tile") blocks" : nil
        context.run(reads: [a] + (r.map { [$0] } ?? []), outputs: [out], scratch: [t, rounded, product].compactMap { $0 }, split: split) { buffers in
            let shared = PackedOperands(source: buffers.floats(a), target: buffers.floats(product ?? out), tiles: t.map { buffers.floats($0) },
                                        rounded: rounded.flatMap { modelc_round_rows(buffers.floats(a), rows, k, buffers.raw($0)) != 0 ? buffers.raw($0) : nil })
            weights.withMatrix { matrix in
                let matrix = PackedMatrixPointer(matrix)
                ThreadTeam.shared.perform(workers, threads: workers) { worker in
                    // This worker's outputs: a contiguous range of columns of the result, in blocks of 64.
                    let first = (worker * n / workers) / 64 * 64, end = worker == workers - 1 ? n : ((worker + 1) * n / workers) / 64 * 64
                    guard end > first else { return }
                    if vector {
                        for row in 0..<rows {
                            let source = shared.source + row * k, target = shared.target + row * n + first
                            if transposed {
                                modelc_packed_dot_rows(matrix.pointer, source, target, first, end - first)
                            } else {
                                modelc_packed_combine_rows(matrix.pointer, source, target, first, end - first)
                            }
                        }
                    } else if let tiles = shared.tiles {
                        let tile = tiles + worker * tileFloats
                        if let rounded = shared.rounded {
                            modelc_packed_multiply_integer(matrix.pointer, rounded, rows, shared.target, n, first, end - first, tile)
                        } else if transposed {
                            // Tiles of output columns: W[j ..< j + t, 0 ..< k] widened, then x · tileᵀ into those columns.
                            for column in stride(from: first, to: end, by: packedTileRows) {
                                let width = min(packedTileRows, end - column)
                                modelc_packed_decode_block(matrix.pointer, column, width, 0, k, tile, k)
                                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(rows), Int32(width), Int32(k), 1, shared.source, Int32(k),
                                            tile, Int32(k), 0, shared.target + column, Int32(n))
                            }
                        } else {
                            // Tiles of the depth: W[i ..< i + t, first ..< end] widened, then x[:, i ..< i + t] · tile summed in.
                            let width = end - first
                            for depth in stride(from: 0, to: k, by: packedTileRows) {
                                let height = min(packedTileRows, k - depth)
                                modelc_packed_decode_block(matrix.pointer, depth, height, first, width, tile, width)
                                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int32(rows), Int32(width), Int32(height), 1,
                                            shared.source + depth, Int32(k), tile, Int32(width), depth == 0 ? 0 : 1, shared.target + first, Int32(n))
                            }
                        }
                    }
                    // Bias, activation and residual on this worker's columns.
                    for row in 0..<rows {
                        let target = shared.target + row * n
                        if let bias { for column in first..<end { target[column] += bias[column] } }
                        if let activation { activate(activation, target + first, count: end - first) }
                    }
                }
            }
            if let r, let product {
                let sum = buffers.floats(product), addend = buffers.floats(r), target = buffers.floats(out)
                for index in 0..<(rows * n) { target[index] = sum[index] + addend[index] }
            }
        }
    }
}

/// A product's operands, read by every worker; each writes its own columns.
private struct PackedOperands: @unchecked Sendable {
    let source: UnsafeMutablePointer<Float>
    let target: UnsafeMutablePointer<Float>
    let tiles: UnsafeMutablePointer<Float>?
    /// The input as `modelc_round_rows` rounded it, for integer products.
    let rounded: UnsafeMutableRawPointer?
}

/// The C description of packed weights, shared by the workers of one run
/// (read-only; valid during `PackedWeights.withMatrix`).
private struct PackedMatrixPointer: @unchecked Sendable {
    let pointer: UnsafePointer<modelc_packed_matrix>
    init(_ pointer: UnsafePointer<modelc_packed_matrix>) { self.pointer = pointer }
}
