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
    /// runtime's threads are oneDNN's (or XNNPACK's pool), and OpenBLAS's
    /// would spin beside them. Read before the first product.
    static let singleThreaded: Bool = {
        openblas_set_num_threads(1)
        return true
    }()

    /// C[m×n] = op(A)[m×k] · op(B)[k×n], row-major.
    static func gemm(_ a: UnsafePointer<Float>, transposeA: Bool, _ b: UnsafePointer<Float>, transposeB: Bool,
                     _ c: UnsafeMutablePointer<Float>, m: Int, n: Int, k: Int) {
        cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans, transposeB ? CblasTrans : CblasNoTrans,
                    Int32(m), Int32(n), Int32(k), 1, a, Int32(transposeA ? m : k), b, Int32(transposeB ? k : n), 0, c, Int32(n))
    }
}
