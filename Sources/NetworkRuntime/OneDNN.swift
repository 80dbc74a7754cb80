import CDNNL
import Foundation
import ModelFeatures

/// oneDNN's CPU engine, made once per process, and the thread count its
/// primitives use.
enum OneDNN {
    /// `nil` when oneDNN cannot run here; convolutions then run on XNNPACK.
    static let engine: Engine? = {
        var handle: dnnl_engine_t?
        guard dnnl_engine_create(&handle, dnnl_cpu, 0) == dnnl_success, let handle else { return nil }
        return Engine(handle: handle)
    }()

    /// The engine handle; never destroyed (it lives as long as the process).
    final class Engine: @unchecked Sendable {
        let handle: dnnl_engine_t
        init(handle: dnnl_engine_t) { self.handle = handle }
    }

    /// Debian's oneDNN runs its primitives on OpenMP threads; this sets how
    /// many the calling thread's next primitives use. OpenMP's setting is
    /// per thread, so it is made before every run.
    static func useThreads(_ count: Int) {
        setThreads?(Int32(max(1, count)))
    }

    private static let setThreads: (@convention(c) (Int32) -> Void)? = {
        // libgomp comes with libdnnl; only its versioned name is installed, so it is looked up, not linked.
        guard let symbol = dlsym(nil, "omp_set_num_threads") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Void).self)
    }()
}

/// A layer prepared once on oneDNN — a convolution or a fully connected
/// layer: the primitive oneDNN chose for this processor, fused with the
/// clamping of a following ReLU or clip, and the weights reordered into the
/// layout that primitive reads. Immutable, so any number of prediction states
/// run it at once, each through its own `Binding` to its arena.
final class DNNLKernel: @unchecked Sendable {
    private let primitive: dnnl_primitive_t
    private let weights: dnnl_memory_t
    private let bias: dnnl_memory_t?
    private let source: dnnl_memory_desc_t
    private let destination: dnnl_memory_desc_t
    /// The weights as the network graph holds them (Core ML's layout).
    private let graphWeights: dnnl_memory_desc_t
    /// The temporary memory one run needs; each binding has its own, so that
    /// runs on any threads at once never share one (oneDNN's own scratchpad
    /// is per creating thread in Debian's build).
    private let scratchpad: dnnl_memory_desc_t
    /// Bytes of the reordered weights and the bias, held by oneDNN.
    let preparedBytes: Int
    /// Bytes of the scratchpad each binding holds.
    let scratchpadBytes: Int

    /// Prepares `conv` (not a transposed one), reading and writing
    /// channel-last or channel-first tensors as `conv.channelsLast` says, to
    /// run on `threads` threads (oneDNN splits the work when it prepares).
    /// `nil` when oneDNN has no implementation for it or is unavailable.
    static func convolution(_ conv: StepKind.Convolution, threads: Int) -> DNNLKernel? {
        guard conv.deconvolutionAdjustment == nil else { return nil }
        let groups = Int64(conv.groups)
        let layout = conv.channelsLast ? dnnl_nhwc : dnnl_nchw
        // The plan's weights are [groups × out, kH, kW, in per group].
        let out = Int64(conv.output.channels) / groups, inPerGroup = Int64(conv.input.channels) / groups
        let kernel = [Int64(conv.kernel.0), Int64(conv.kernel.1)]
        let weightDims = conv.groups == 1 ? [out, inPerGroup] + kernel : [groups, out, inPerGroup] + kernel
        guard let source = descriptor([1, conv.input.channels, conv.input.height, conv.input.width], layout),
              let destination = descriptor([1, conv.output.channels, conv.output.height, conv.output.width], layout),
              let given = descriptor(weightDims, conv.groups == 1 ? dnnl_ohwi : dnnl_gohwi),
              let graphWeights = descriptor(weightDims, conv.groups == 1 ? dnnl_oihw : dnnl_goihw)
        else { return nil }
        let strides = [Int64(conv.stride.0), Int64(conv.stride.1)]
        // oneDNN counts dilation from 0 (no gaps).
        let dilation = [Int64(conv.dilation.0 - 1), Int64(conv.dilation.1 - 1)]
        let before = [Int64(conv.padding.top), Int64(conv.padding.left)]
        let after = [Int64(conv.padding.bottom), Int64(conv.padding.right)]
        return DNNLKernel(source: source, destination: destination, weights: conv.weights, given: given,
                          graphWeights: graphWeights, bias: conv.bias, outputRange: conv.outputRange, threads: threads) { source, weights, bias, destination, create in
            var description = dnnl_convolution_desc_t()
            let status = dnnl_dilated_convolution_forward_desc_init(&description, dnnl_forward_inference, dnnl_convolution_direct,
                                                                    source, weights, bias, destination,
                                                                    strides, dilation, before, after)
            return status == dnnl_success ? create(&description) : nil
        }
    }

    /// Prepares a fully connected layer over `rows` rows of `inputs` values;
    /// `weights` are `[outputs, inputs]`.
    static func fullyConnected(inputs: Int, outputs: Int, rows: Int, weights: [Float], bias: [Float]?,
                               outputRange: (Float, Float), threads: Int) -> DNNLKernel? {
        guard let source = descriptor([rows, inputs], dnnl_nc), let destination = descriptor([rows, outputs], dnnl_nc),
              let given = descriptor([outputs, inputs], dnnl_oi)
        else { return nil }
        return DNNLKernel(source: source, destination: destination, weights: weights, given: given, graphWeights: given,
                          bias: bias, outputRange: outputRange, threads: threads) { source, weights, bias, destination, create in
            var description = dnnl_inner_product_desc_t()
            let status = dnnl_inner_product_forward_desc_init(&description, dnnl_forward_inference, source, weights, bias, destination)
            return status == dnnl_success ? create(&description) : nil
        }
    }

    /// Describes an operation from its memory descriptors (source, weights
    /// in any layout, bias or `nil`, destination) and hands oneDNN's
    /// operation descriptor to the last argument, which returns the primitive
    /// descriptor made from it; `nil` if oneDNN refuses either.
    private typealias Describe = (UnsafePointer<dnnl_memory_desc_t>, UnsafePointer<dnnl_memory_desc_t>,
                                  UnsafePointer<dnnl_memory_desc_t>?, UnsafePointer<dnnl_memory_desc_t>,
                                  (UnsafeRawPointer) -> dnnl_primitive_desc_t?) -> dnnl_primitive_desc_t?

    private init?(source: dnnl_memory_desc_t, destination: dnnl_memory_desc_t, weights values: [Float], given: dnnl_memory_desc_t,
                  graphWeights: dnnl_memory_desc_t, bias biasValues: [Float]?, outputRange: (Float, Float), threads: Int,
                  describe: Describe) {
        guard let engine = OneDNN.engine?.handle, var chosen = Self.descriptor(given.dims, count: given.ndims, dnnl_format_tag_any)
        else { return nil }
        var source = source, destination = destination, given = given
        var biasDescriptor = biasValues.flatMap { Self.descriptor([Int64($0.count)], dnnl_a) }
        if biasValues != nil && biasDescriptor == nil { return nil }
        var attributes: dnnl_primitive_attr_t?
        guard dnnl_primitive_attr_create(&attributes) == dnnl_success, let attributes else { return nil }
        defer { dnnl_primitive_attr_destroy(attributes) }
        if !Self.addClamp(outputRange, to: attributes) { return nil }
        guard dnnl_primitive_attr_set_scratchpad_mode(attributes, dnnl_scratchpad_mode_user) == dnnl_success else { return nil }

        // oneDNN splits the work for the threads there are when it prepares.
        OneDNN.useThreads(threads)
        let made = withOptionalPointer(to: &biasDescriptor) { biasPointer in
            describe(&source, &chosen, biasPointer.map { UnsafePointer($0) }, &destination) { operation in
                var primitiveDescription: dnnl_primitive_desc_t?
                let status = dnnl_primitive_desc_create(&primitiveDescription, operation, attributes, engine, nil)
                return status == dnnl_success ? primitiveDescription : nil
            }
        }
        guard let primitiveDescription = made else { return nil }
        defer { dnnl_primitive_desc_destroy(primitiveDescription) }
        guard let wanted = dnnl_primitive_desc_query_md(primitiveDescription, dnnl_query_weights_md, 0),
              let scratchpad = dnnl_primitive_desc_query_md(primitiveDescription, dnnl_query_scratchpad_md, 0)?.pointee,
              let reordered = Self.reorder(values, from: &given, to: wanted, engine: engine)
        else { return nil }
        var created: dnnl_primitive_t?
        guard dnnl_primitive_create(&created, primitiveDescription) == dnnl_success, let created else {
            dnnl_memory_destroy(reordered)
            return nil
        }
        var preparedBytes = dnnl_memory_desc_get_size(wanted)
        var biasMemory: dnnl_memory_t?
        if let biasValues, var biasDescriptor {
            biasMemory = Self.copy(biasValues, described: &biasDescriptor, engine: engine)
            guard biasMemory != nil else {
                dnnl_memory_destroy(reordered)
                dnnl_primitive_destroy(created)
                return nil
            }
            preparedBytes += biasValues.count * MemoryLayout<Float>.stride
        }
        primitive = created
        weights = reordered
        bias = biasMemory
        self.source = source
        self.destination = destination
        self.graphWeights = graphWeights
        self.scratchpad = scratchpad
        self.preparedBytes = preparedBytes
        var scratchpadDescriptor = scratchpad
        scratchpadBytes = dnnl_memory_desc_get_size(&scratchpadDescriptor)
    }

    /// The weights back in the layout the network graph holds them
    /// (`[out, in per group, kH, kW]`, or `[outputs, inputs]`), reordered
    /// from the prepared ones; `nil` if oneDNN fails. Lets the engine keep
    /// one copy of the weights, the prepared one, and still plan other shapes.
    func weightsInGraphLayout() -> [Float]? {
        guard let engine = OneDNN.engine?.handle else { return nil }
        var target = graphWeights
        let count = dnnl_memory_desc_get_size(&target) / MemoryLayout<Float>.stride
        var values = [Float](repeating: 0, count: count)
        let copied = values.withUnsafeMutableBytes { buffer -> Bool in
            var output: dnnl_memory_t?
            guard dnnl_memory_create(&output, &target, engine, buffer.baseAddress) == dnnl_success, let output else { return false }
            defer { dnnl_memory_destroy(output) }
            return Self.reorder(from: weights, to: output, engine: engine)
        }
        return copied ? values : nil
    }

    deinit {
        dnnl_primitive_destroy(primitive)
        dnnl_memory_destroy(weights)
        if let bias { dnnl_memory_destroy(bias) }
    }

    /// One prediction state's view of the convolution: its input and output
    /// in that state's arena (fixed for the state's life) and the argument
    /// list, made once so that running allocates nothing.
    final class Binding {
        fileprivate let arguments: UnsafeMutableBufferPointer<dnnl_exec_arg_t>
        private let memories: [dnnl_memory_t]

        fileprivate init(arguments: [dnnl_exec_arg_t], memories: [dnnl_memory_t]) {
            self.arguments = .allocate(capacity: arguments.count)
            _ = self.arguments.initialize(from: arguments)
            self.memories = memories
        }

        deinit {
            arguments.deallocate()
            for memory in memories { dnnl_memory_destroy(memory) }
        }
    }

    /// Binds the layer to `input` and `output`, which must hold the tensors
    /// in the layout it was prepared for.
    func bind(input: UnsafeMutablePointer<Float>, output: UnsafeMutablePointer<Float>) throws(RuntimeError) -> Binding {
        guard let engine = OneDNN.engine?.handle else { throw Self.failure("oneDNN is unavailable") }
        var sourceDescriptor = source, destinationDescriptor = destination
        var inputMemory: dnnl_memory_t?, outputMemory: dnnl_memory_t?
        guard dnnl_memory_create(&inputMemory, &sourceDescriptor, engine, input) == dnnl_success, let inputMemory else {
            throw Self.failure("binding a layer's input")
        }
        guard dnnl_memory_create(&outputMemory, &destinationDescriptor, engine, output) == dnnl_success, let outputMemory else {
            dnnl_memory_destroy(inputMemory)
            throw Self.failure("binding a layer's output")
        }
        var arguments = [dnnl_exec_arg_t(arg: DNNL_ARG_SRC, memory: inputMemory),
                         dnnl_exec_arg_t(arg: DNNL_ARG_WEIGHTS, memory: weights),
                         dnnl_exec_arg_t(arg: DNNL_ARG_DST, memory: outputMemory)]
        var memories = [inputMemory, outputMemory]
        if let bias { arguments.append(dnnl_exec_arg_t(arg: DNNL_ARG_BIAS, memory: bias)) }
        if scratchpadBytes > 0 {
            var descriptor = scratchpad
            var scratchpadMemory: dnnl_memory_t?
            guard dnnl_memory_create(&scratchpadMemory, &descriptor, engine, Self.allocate) == dnnl_success, let scratchpadMemory else {
                for memory in memories { dnnl_memory_destroy(memory) }
                throw Self.failure("allocating a layer's scratchpad")
            }
            memories.append(scratchpadMemory)
            arguments.append(dnnl_exec_arg_t(arg: DNNL_ARG_SCRATCHPAD, memory: scratchpadMemory))
        }
        return Binding(arguments: arguments, memories: memories)
    }

    /// Runs the layer through `binding` on `stream`, on `threads` threads.
    func run(_ binding: Binding, stream: DNNLStream, threads: Int) throws(RuntimeError) {
        OneDNN.useThreads(threads)
        guard dnnl_primitive_execute(primitive, stream.handle, Int32(binding.arguments.count), binding.arguments.baseAddress)
                == dnnl_success,
              dnnl_stream_wait(stream.handle) == dnnl_success
        else { throw Self.failure("running a layer") }
    }

    // MARK: - Preparing

    private static func failure(_ what: String) -> RuntimeError {
        .invalidParameters(model: "oneDNN", detail: "\(what) failed")
    }

    private static func descriptor(_ dims: [Int], _ tag: dnnl_format_tag_t) -> dnnl_memory_desc_t? {
        descriptor(dims.map(Int64.init), tag)
    }

    /// A descriptor of the first `count` of `dims` (oneDNN's fixed-size array) in layout `tag`.
    private static func descriptor(_ dims: dnnl_dims_t, count: Int32, _ tag: dnnl_format_tag_t) -> dnnl_memory_desc_t? {
        withUnsafeBytes(of: dims) { descriptor(Array($0.bindMemory(to: Int64.self).prefix(Int(count))), tag) }
    }

    private static func descriptor(_ dims: [Int64], _ tag: dnnl_format_tag_t) -> dnnl_memory_desc_t? {
        var descriptor = dnnl_memory_desc_t()
        return dnnl_memory_desc_init_by_tag(&descriptor, Int32(dims.count), dims, dnnl_f32, tag) == dnnl_success ? descriptor : nil
    }

    /// Adds the clamp of `range` as a post-operation; `false` if oneDNN refuses it.
    private static func addClamp(_ range: (Float, Float), to attributes: dnnl_primitive_attr_t) -> Bool {
        guard range.0 > -.infinity || range.1 < .infinity else { return true }
        var postOperations: dnnl_post_ops_t?
        guard dnnl_post_ops_create(&postOperations) == dnnl_success, let postOperations else { return false }
        defer { dnnl_post_ops_destroy(postOperations) }
        let appended = range == (0, .infinity)
            ? dnnl_post_ops_append_eltwise(postOperations, 1, dnnl_eltwise_relu, 0, 0)
            : dnnl_post_ops_append_eltwise(postOperations, 1, dnnl_eltwise_clip,
                                           max(range.0, -.greatestFiniteMagnitude), min(range.1, .greatestFiniteMagnitude))
        return appended == dnnl_success && dnnl_primitive_attr_set_post_ops(attributes, postOperations) == dnnl_success
    }

    /// The weights reordered from `given` into a new oneDNN-owned memory of layout `wanted`.
    private static func reorder(_ values: [Float], from given: inout dnnl_memory_desc_t, to wanted: UnsafePointer<dnnl_memory_desc_t>,
                                engine: dnnl_engine_t) -> dnnl_memory_t? {
        var target: dnnl_memory_t?
        guard dnnl_memory_create(&target, wanted, engine, allocate) == dnnl_success, let target else { return nil }
        let reordered = values.withUnsafeBufferPointer { buffer -> Bool in
            var source: dnnl_memory_t?
            guard dnnl_memory_create(&source, &given, engine, UnsafeMutableRawPointer(mutating: buffer.baseAddress)) == dnnl_success,
                  let source else { return false }
            defer { dnnl_memory_destroy(source) }
            return reorder(from: source, to: target, engine: engine)
        }
        guard reordered else {
            dnnl_memory_destroy(target)
            return nil
        }
        return target
    }

    /// Copies `source` into `target`, converting between their layouts.
    private static func reorder(from source: dnnl_memory_t, to target: dnnl_memory_t, engine: dnnl_engine_t) -> Bool {
        var sourceDescriptor: UnsafePointer<dnnl_memory_desc_t>?, targetDescriptor: UnsafePointer<dnnl_memory_desc_t>?
        guard dnnl_memory_get_memory_desc(source, &sourceDescriptor) == dnnl_success, let sourceDescriptor,
              dnnl_memory_get_memory_desc(target, &targetDescriptor) == dnnl_success, let targetDescriptor
        else { return false }
        var description: dnnl_primitive_desc_t?
        guard dnnl_reorder_primitive_desc_create(&description, sourceDescriptor, engine, targetDescriptor, engine, nil) == dnnl_success,
              let description else { return false }
        defer { dnnl_primitive_desc_destroy(description) }
        var reorder: dnnl_primitive_t?
        guard dnnl_primitive_create(&reorder, description) == dnnl_success, let reorder else { return false }
        defer { dnnl_primitive_destroy(reorder) }
        guard let stream = DNNLStream() else { return false }
        var arguments = [dnnl_exec_arg_t(arg: DNNL_ARG_FROM, memory: source), dnnl_exec_arg_t(arg: DNNL_ARG_TO, memory: target)]
        return dnnl_primitive_execute(reorder, stream.handle, 2, &arguments) == dnnl_success
            && dnnl_stream_wait(stream.handle) == dnnl_success
    }

    /// `values` copied into a new oneDNN-owned memory.
    private static func copy(_ values: [Float], described descriptor: inout dnnl_memory_desc_t, engine: dnnl_engine_t) -> dnnl_memory_t? {
        var memory: dnnl_memory_t?
        var handle: UnsafeMutableRawPointer?
        guard dnnl_memory_create(&memory, &descriptor, engine, allocate) == dnnl_success, let memory,
              dnnl_memory_get_data_handle(memory, &handle) == dnnl_success, let handle
        else { return nil }
        values.withUnsafeBytes { handle.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return memory
    }

    /// oneDNN's `DNNL_MEMORY_ALLOCATE`: the library allocates the buffer.
    private static var allocate: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: -1) }
}

/// A oneDNN stream: one per prediction state (streams are not shared between threads).
final class DNNLStream {
    let handle: dnnl_stream_t

    init?() {
        var handle: dnnl_stream_t?
        guard let engine = OneDNN.engine?.handle,
              dnnl_stream_create(&handle, engine, dnnl_stream_default_flags.rawValue) == dnnl_success, let handle
        else { return nil }
        self.handle = handle
    }

    deinit { dnnl_stream_destroy(handle) }
}

/// Calls `body` with a pointer to `value`, or `nil` without one.
private func withOptionalPointer<Value, Result>(to value: inout Value?, _ body: (UnsafeMutablePointer<Value>?) -> Result) -> Result {
    guard var unwrapped = value else { return body(nil) }
    defer { value = unwrapped }
    return body(&unwrapped)
}
