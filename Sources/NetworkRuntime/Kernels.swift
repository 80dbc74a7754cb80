import COpenBLAS
import CXNNPack
import Foundation
import ModelFeatures

/// XNNPACK, initialized once per process.
enum XNNPack {
    private static let initialized: Bool = xnn_initialize(nil) == xnn_status_success

    /// Whether XNNPACK can run on this processor.
    static var isAvailable: Bool { initialized }
}

/// A thread pool for XNNPACK, shared by every prediction of one model.
final class ThreadPool: @unchecked Sendable {
    /// `nil` for one thread, or when oneDNN runs the heavy layers: XNNPACK
    /// and OpenBLAS then run on the caller's thread. (Two pools of spinning
    /// threads, oneDNN's OpenMP one and this, would take turns on the cores:
    /// measured 2.5× slower on two cores than oneDNN's alone.)
    let pool: pthreadpool_t?
    /// The threads a prediction uses: oneDNN's OpenMP threads, or this pool's.
    let threads: Int

    init(threads: Int) {
        self.threads = max(1, threads)
        pool = threads > 1 && OneDNN.engine == nil ? pthreadpool_create(threads) : nil
    }

    deinit {
        if let pool { pthreadpool_destroy(pool) }
    }
}

/// An XNNPACK operator owned by one prediction state; deleted with it.
final class XNNOperator {
    let handle: xnn_operator_t

    init(_ handle: xnn_operator_t) { self.handle = handle }

    deinit { xnn_delete_operator(handle) }
}

/// The narrow calls into XNNPACK the runtime makes: each knows nothing of Core ML.
enum XNNKernels {
    static func check(_ status: xnn_status, _ what: String) throws(RuntimeError) {
        guard status == xnn_status_success else {
            throw .invalidParameters(model: "XNNPACK", detail: "\(what) failed (status \(status.rawValue))")
        }
    }

    /// A 2-D convolution over NHWC input; `weights` are `[groups × out, kH, kW, in per group]`.
    static func convolution(padding: (top: Int, right: Int, bottom: Int, left: Int), kernel: (Int, Int), stride: (Int, Int),
                            dilation: (Int, Int), groups: Int, inputsPerGroup: Int, outputsPerGroup: Int,
                            weights: [Float], bias: [Float]?, outputRange: (Float, Float)) throws(RuntimeError) -> XNNOperator {
        var handle: xnn_operator_t?
        let status = weights.withUnsafeBufferPointer { kernelValues in
            withOptionalPointer(bias) { biasValues in
                xnn_create_convolution2d_nhwc_f32(
                    UInt32(padding.top), UInt32(padding.right), UInt32(padding.bottom), UInt32(padding.left),
                    UInt32(kernel.0), UInt32(kernel.1), UInt32(stride.0), UInt32(stride.1), UInt32(dilation.0), UInt32(dilation.1),
                    UInt32(groups), inputsPerGroup, outputsPerGroup, groups * inputsPerGroup, groups * outputsPerGroup,
                    kernelValues.baseAddress, biasValues, outputRange.0, outputRange.1, 0, &handle)
            }
        }
        try check(status, "creating a convolution")
        guard let handle else { throw .invalidParameters(model: "XNNPACK", detail: "no convolution operator") }
        return XNNOperator(handle)
    }

    static func runConvolution(_ op: XNNOperator, height: Int, width: Int, input: UnsafePointer<Float>,
                               output: UnsafeMutablePointer<Float>, pool: ThreadPool) throws(RuntimeError) {
        try check(xnn_setup_convolution2d_nhwc_f32(op.handle, 1, height, width, input, output, pool.pool), "setting up a convolution")
        try check(xnn_run_operator(op.handle, pool.pool), "running a convolution")
    }

    /// A transposed 2-D convolution over NHWC input; `weights` are `[groups × out, kH, kW, in per group]`.
    static func deconvolution(padding: (top: Int, right: Int, bottom: Int, left: Int), kernel: (Int, Int), stride: (Int, Int),
                              dilation: (Int, Int), groups: Int, inputsPerGroup: Int, outputsPerGroup: Int,
                              weights: [Float], bias: [Float]?, outputRange: (Float, Float)) throws(RuntimeError) -> XNNOperator {
        var handle: xnn_operator_t?
        let status = weights.withUnsafeBufferPointer { kernelValues in
            withOptionalPointer(bias) { biasValues in
                xnn_create_deconvolution2d_nhwc_f32(
                    UInt32(padding.top), UInt32(padding.right), UInt32(padding.bottom), UInt32(padding.left),
                    UInt32(kernel.0), UInt32(kernel.1), UInt32(stride.0), UInt32(stride.1), UInt32(dilation.0), UInt32(dilation.1),
                    UInt32(groups), inputsPerGroup, outputsPerGroup, groups * inputsPerGroup, groups * outputsPerGroup,
                    kernelValues.baseAddress, biasValues, outputRange.0, outputRange.1, 0, &handle)
            }
        }
        try check(status, "creating a deconvolution")
        guard let handle else { throw .invalidParameters(model: "XNNPACK", detail: "no deconvolution operator") }
        return XNNOperator(handle)
    }

    static func runDeconvolution(_ op: XNNOperator, height: Int, width: Int, adjustment: (Int, Int), input: UnsafePointer<Float>,
                                 output: UnsafeMutablePointer<Float>, pool: ThreadPool) throws(RuntimeError) {
        try check(xnn_setup_deconvolution2d_nhwc_f32(op.handle, 1, height, width, UInt32(adjustment.0), UInt32(adjustment.1),
                                                     input, output, pool.pool), "setting up a deconvolution")
        try check(xnn_run_operator(op.handle, pool.pool), "running a deconvolution")
    }

    /// A fully connected layer: `weights` are `[outputs, inputs]`.
    static func fullyConnected(inputs: Int, outputs: Int, weights: [Float], bias: [Float]?,
                               outputRange: (Float, Float)) throws(RuntimeError) -> XNNOperator {
        var handle: xnn_operator_t?
        let status = weights.withUnsafeBufferPointer { kernelValues in
            withOptionalPointer(bias) { biasValues in
                xnn_create_fully_connected_nc_f32(inputs, outputs, inputs, outputs, kernelValues.baseAddress, biasValues,
                                                  outputRange.0, outputRange.1, 0, &handle)
            }
        }
        try check(status, "creating a fully connected layer")
        guard let handle else { throw .invalidParameters(model: "XNNPACK", detail: "no fully connected operator") }
        return XNNOperator(handle)
    }

    static func runFullyConnected(_ op: XNNOperator, rows: Int, input: UnsafePointer<Float>,
                                  output: UnsafeMutablePointer<Float>, pool: ThreadPool) throws(RuntimeError) {
        try check(xnn_setup_fully_connected_nc_f32(op.handle, rows, input, output, pool.pool), "setting up a fully connected layer")
        try check(xnn_run_operator(op.handle, pool.pool), "running a fully connected layer")
    }
}

/// Calls `body` with the address of `values`' elements, or `nil` without values.
func withOptionalPointer<Result>(_ values: [Float]?, _ body: (UnsafePointer<Float>?) -> Result) -> Result {
    guard let values else { return body(nil) }
    return values.withUnsafeBufferPointer { body($0.baseAddress) }
}

/// Layout changes between Core ML's channel-first blobs and XNNPACK's channel-last ones.
enum Layout {
    static func chwToHWC(_ source: UnsafePointer<Float>, _ target: UnsafeMutablePointer<Float>, channels: Int, pixels: Int) {
        for c in 0..<channels {
            let plane = source + c * pixels
            for p in 0..<pixels { target[p * channels + c] = plane[p] }
        }
    }

    static func hwcToCHW(_ source: UnsafePointer<Float>, _ target: UnsafeMutablePointer<Float>, channels: Int, pixels: Int) {
        for c in 0..<channels {
            let plane = target + c * pixels
            for p in 0..<pixels { plane[p] = source[p * channels + c] }
        }
    }
}

/// Matrix products on OpenBLAS.
enum BLAS {
    /// Runs OpenBLAS on the calling thread only, once per process: the
    /// runtime splits work over its own pool, and OpenBLAS's threads would
    /// spin beside it. Read before the first product.
    static let singleThreaded: Bool = {
        openblas_set_num_threads(1)
        return true
    }()

    /// A pointwise convolution (1×1, stride 1, unpadded, one group) over
    /// channel-last pixels as one matrix product: `output[pixels × outputs] =
    /// input[pixels × inputs] · weightsᵀ + bias`, clamped to `outputRange`.
    /// `weights` are `[outputs, inputs]`. The pixels are split in row blocks
    /// over `pool`'s threads, one single-threaded product each.
    static func pointwiseConvolution(input: UnsafePointer<Float>, weights: UnsafePointer<Float>, bias: UnsafePointer<Float>?,
                                     output: UnsafeMutablePointer<Float>, pixels: Int, inputs: Int, outputs: Int,
                                     outputRange: (Float, Float), pool: ThreadPool) {
        var job = PointwiseJob(input: input, weights: weights, bias: bias, output: output, inputs: inputs, outputs: outputs,
                               low: outputRange.0, high: outputRange.1)
        guard let threads = pool.pool, pixels > 1 else {
            job.run(rows: 0..<pixels)
            return
        }
        let parts = pthreadpool_get_threads_count(threads)
        let tile = (pixels + parts - 1) / parts
        withUnsafeMutablePointer(to: &job) { context in
            pthreadpool_parallelize_1d_tile_1d(threads, { context, start, count in
                guard let job = context?.assumingMemoryBound(to: PointwiseJob.self).pointee else { return }
                job.run(rows: start..<(start + count))
            }, context, pixels, tile, 0)
        }
    }

    private struct PointwiseJob {
        let input: UnsafePointer<Float>
        let weights: UnsafePointer<Float>
        let bias: UnsafePointer<Float>?
        let output: UnsafeMutablePointer<Float>
        let inputs: Int
        let outputs: Int
        let low: Float
        let high: Float

        func run(rows: Range<Int>) {
            guard !rows.isEmpty else { return }
            let c = output + rows.lowerBound * outputs
            // The bias is the product's starting value (OpenBLAS would clear C otherwise, a slower pass).
            if let bias {
                for row in 0..<rows.count { (c + row * outputs).update(from: bias, count: outputs) }
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int32(rows.count), Int32(outputs), Int32(inputs), 1,
                        input + rows.lowerBound * inputs, Int32(inputs), weights, Int32(inputs), bias == nil ? 0 : 1, c, Int32(outputs))
            if low > -.infinity || high < .infinity { Self.clamp(c, count: rows.count * outputs, low: low, high: high) }
        }

        /// Clamps in place; a static function of plain values, so the
        /// compiler keeps the bounds in registers and vectorizes the loop.
        private static func clamp(_ values: UnsafeMutablePointer<Float>, count: Int, low: Float, high: Float) {
            for index in 0..<count {
                let value = values[index]
                let raised = value < low ? low : value
                values[index] = raised > high ? high : raised
            }
        }
    }

    /// C[m×n] = op(A)[m×k] · op(B)[k×n], row-major.
    static func gemm(_ a: UnsafePointer<Float>, transposeA: Bool, _ b: UnsafePointer<Float>, transposeB: Bool,
                     _ c: UnsafeMutablePointer<Float>, m: Int, n: Int, k: Int) {
        cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
                    Int32(m), Int32(n), Int32(k), 1, a, Int32(transposeA ? m : k), b, Int32(transposeB ? k : n), 0, c, Int32(n))
    }
}
