import CDNNL
import CWinograd
import ModelFeatures

/// 3×3 convolutions with stride 1 as Winograd's F(2×2, 3×3) (`CWinograd`):
/// 2.25 times fewer multiply-adds than a direct convolution. oneDNN 2.6 runs
/// Winograd on AVX-512 only, and Debian's XNNPACK ran ResNet-18's 3×3 shapes
/// at 2.6 times oneDNN's time, so on an AVX2 machine this is ours. There,
/// one thread, weights cold, ResNet-18's shapes took 2.23 ms (56×56×64),
/// 1.60 ms (28×28×128) and 1.70 ms (14×14×256) against oneDNN's 2.45–2.66 ms
/// in the model and onnxruntime's 2.39–2.45 ms; its 7×7 stage is too small
/// (`minimumPositions`) and stays on oneDNN.
///
/// Applies to channels-last or channel-blocked images of one group, no
/// dilation, both channel counts multiples of 8 and large enough, outputs
/// of at least `minimumPositions`, constant weights and bias; a residual
/// sum and a clamping activation (ReLU, ReLU6, clip) right after the
/// convolution are applied as its outputs are written, any other
/// post-operation after it. On the chains of `WinogradConvolutionTests` it
/// is within 1e-5 of float64 (relative), where oneDNN's direct kernels were
/// up to 1.25e-5 off.
enum WinogradConvolution {
    /// Whether convolutions may run here; `nil` (the default) where this CPU
    /// has AVX2 and FMA and oneDNN's best kernels are its AVX2 ones (or
    /// oneDNN is missing). Tests set it; `true` still needs AVX2 and FMA.
    @TaskLocal static var enabled: Bool? = nil

    /// Input channels below which the transforms outweigh what the products
    /// save (one thread, against oneDNN: 32 → 32 channels at 56×56 took
    /// 1.03 of its time, at 112×112 1.16; 48 → 48 1.03; 64 → 64 0.67–0.73).
    static let minimumInputs = 64
    /// Output channels below which they do (64 → 32 and 128 → 32 at 14×14 to 56×56: 0.63–0.83).
    static let minimumOutputs = 32
    /// Output positions of an image below which they do: the products have
    /// too few rows (7×7: 64 to 512 channels at 0.98–1.25, and ResNet-18 at
    /// one thread ran 38.4 ms with its 7×7 stage on oneDNN, 39.6–40.4 on
    /// Winograd; 9×9 × 256: 1.13; 10×10: 0.80–0.92; 12×12: 0.48–0.66).
    static let minimumPositions = 100

    /// Whether this CPU runs the transforms.
    static let supported = modelc_winograd_supported() != 0

    /// Whether convolutions run here by default.
    static var isOn: Bool {
        guard supported else { return false }
        return enabled ?? (!DNNL.isAvailable || DNNL.runsAVX2Kernels)
    }

    /// Whether a convolution of this shape runs here (the layout and constant weights aside).
    static func applies(kernel: [Int], strides: [Int], dilations: [Int], groups: Int, inputs: Int, outputs: Int, output: [Int]) -> Bool {
        isOn && kernel == [3, 3] && strides == [1, 1] && dilations == [1, 1] && groups == 1 && inputs % 8 == 0 && outputs % 8 == 0
            && inputs >= minimumInputs && outputs >= minimumOutputs && output.count == 2 && output[0] * output[1] >= minimumPositions
    }

    /// Channels per block of the channel-blocked images the transforms read (`ChannelBlocking` at 8).
    static let blockWidth = 8

    /// Where an image's values are: `[N, H, W, C]` or `[N, C/8, H, W, 8]`.
    static func layout(channels: Int, height: Int, width: Int, blocked: Bool) -> modelc_winograd_layout {
        blocked ? modelc_winograd_layout(image: channels * height * width, block: height * width * blockWidth, pixel: blockWidth)
            : modelc_winograd_layout(image: height * width * channels, block: 8, pixel: channels)
    }

    /// One thread's share: tiles and output channels.
    struct Part: Sendable {
        var tiles: Range<Int>
        var channels: Range<Int>
    }

    /// How `tiles` tiles of `outputs` channels are shared by `threads`
    /// threads: by tiles where each thread gets at least `tilesPerThread`,
    /// otherwise by output channels (each thread then transforms every
    /// tile's input, and reads only its channels' weights).
    static func parts(tiles: Int, outputs: Int, threads: Int) -> [Part] {
        if threads > 1, tiles >= tilesPerThread * threads {
            return (0..<threads).map { Part(tiles: ($0 * tiles / threads)..<(($0 + 1) * tiles / threads), channels: 0..<outputs) }
        }
        if threads > 1, let ranges = ConvolutionOperations.channelBlocks(outputs, parts: threads, granularity: 8) {
            return ranges.map { Part(tiles: 0..<tiles, channels: $0) }
        }
        return [Part(tiles: 0..<tiles, channels: 0..<outputs)]
    }

    /// How a plan step names the kernel and its split: `"winograd"`, `"winograd, 2 tile blocks"`, `"winograd, 2 channel blocks"`.
    static func description(_ parts: [Part]) -> String {
        guard parts.count > 1 else { return "winograd" }
        return "winograd, \(parts.count) " + (parts[0].channels == parts[1].channels ? "tile blocks" : "channel blocks")
    }

    /// Tiles a thread takes at the least before a convolution is split by tiles.
    static let tilesPerThread = 64

    /// The post-operations applied as outputs are written: a residual of the
    /// output's shape, then a clamp, each optional and in that order; how
    /// many of `posts` that is, and the clamp's bounds.
    static func fused(_ posts: [ConvolutionOperations.PostOperation], stored: [Int]) -> (count: Int, residual: PlanValue?, low: Float, high: Float) {
        var count = 0
        var residual: PlanValue?
        if let first = posts.first, let value = first.residual, value.shape == stored, value.isFloat {
            residual = value
            count = 1
        }
        var low = -Float.infinity, high = Float.infinity
        if count < posts.count, posts[count].residual == nil {
            let post = posts[count]
            switch post.kind {
            case "relu": (low, count) = (0, count + 1)
            case "relu6": (low, high, count) = (0, 6, count + 1)
            case "clip": (low, high, count) = (post.alpha, post.beta, count + 1)
            default: break
            }
        }
        return (count, residual, low, high)
    }

    /// Plans the convolution of `x` (`xShape` in MIL's order) into `out`:
    /// transforms the weights once and adds the kernel.
    static func plan(_ context: OperationContext, x: PlanValue, xShape: [Int], output: [Int], padBefore: [Int], weights: [Float],
                     bias: [Float]?, posts: [ConvolutionOperations.PostOperation], blocked: Bool, out: Int, stored: [Int]) {
        let inputs = xShape[1], outputs = stored.count == 5 ? stored[1] * stored[4] : stored[3]
        var geometry = modelc_winograd_geometry(
            batch: xShape[0], height: xShape[2], width: xShape[3], inputs: inputs, out_height: output[0], out_width: output[1],
            outputs: outputs, pad_top: padBefore[0], pad_left: padBefore[1],
            input: layout(channels: inputs, height: xShape[2], width: xShape[3], blocked: blocked),
            output: layout(channels: outputs, height: output[0], width: output[1], blocked: blocked))
        var transformed = [Float](repeating: 0, count: 16 * inputs * outputs)
        modelc_winograd_weights(weights, inputs, outputs, &transformed)
        let prepared = Prepared(geometry: geometry, weights: transformed, bias: bias)
        let tiles = modelc_winograd_tiles(&geometry)
        let work = xShape[0] * output[0] * output[1] * outputs * inputs * 9
        let parts = parts(tiles: tiles, outputs: outputs, threads: WorkSplit.workers(threads: context.threads, work: work, items: context.threads))
        let perPart = parts.map { modelc_winograd_scratch_floats(&geometry, $0.tiles.count, $0.channels.count) }.max() ?? 0
        let scratch = context.scratch(.float32, shape: [perPart * parts.count])
        let (count, residual, low, high) = fused(posts, stored: stored)
        let rest = Array(posts[count...])
        _ = LinearAlgebraOperations.singleThreaded
        let threads = context.threads
        context.run(reads: [x.id] + posts.compactMap { $0.residual?.id }, outputs: [out], scratch: [scratch.id],
                    split: description(parts)) { buffers throws(RuntimeError) in
            let pointers = Pointers(input: buffers.floats(x.id), output: buffers.floats(out), residual: residual.map { buffers.floats($0.id) },
                                    scratch: buffers.floats(scratch.id))
            if parts.count == 1 {
                prepared.run(parts[0], pointers, scratch: pointers.scratch, low: low, high: high)
            } else {
                ThreadTeam.shared.perform(parts.count, threads: min(parts.count, threads)) { index in
                    prepared.run(parts[index], pointers, scratch: pointers.scratch + index * perPart, low: low, high: high)
                }
            }
            if !rest.isEmpty { ConvolutionOperations.apply(rest, to: buffers.floats(out), shape: stored, buffers: buffers) }
        }
    }

    /// A convolution's geometry and transformed weights, made at plan time.
    private struct Prepared: Sendable {
        var geometry: modelc_winograd_geometry
        var weights: [Float]
        var bias: [Float]?

        func run(_ part: Part, _ pointers: Pointers, scratch: UnsafeMutablePointer<Float>, low: Float, high: Float) {
            var geometry = geometry
            weights.withUnsafeBufferPointer { weights in
                func run(bias: UnsafePointer<Float>?) {
                    modelc_winograd_run(&geometry, pointers.input, weights.baseAddress, bias, pointers.residual, low, high, pointers.output,
                                        part.tiles.lowerBound, part.tiles.upperBound, part.channels.lowerBound, part.channels.upperBound, scratch)
                }
                if let bias { bias.withUnsafeBufferPointer { run(bias: $0.baseAddress) } } else { run(bias: nil) }
            }
        }
    }

    /// One run's buffers, shared by the threads running its parts (each writes only its tiles' or channels' outputs and its own scratch).
    private struct Pointers: @unchecked Sendable {
        let input: UnsafeMutablePointer<Float>
        let output: UnsafeMutablePointer<Float>
        let residual: UnsafeMutablePointer<Float>?
        let scratch: UnsafeMutablePointer<Float>
    }
}

extension modelc_winograd_geometry: @retroactive @unchecked Sendable {}
