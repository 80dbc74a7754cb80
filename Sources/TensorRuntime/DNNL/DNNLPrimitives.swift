import CDNNL
import Foundation
import ModelFeatures
import SystemIO

/// A oneDNN primitive prepared once for fixed shapes at plan time — a
/// matrix product with its weights packed, an activation, a softmax, a
/// layer norm — and run on pointers into a prediction's arena. Immutable
/// apart from its pool of workspaces (stream, memories, scratchpad), so
/// concurrent predictions share it; a run allocates nothing once the pool
/// holds a workspace per concurrent prediction.
final class DNNLPreparedPrimitive: @unchecked Sendable {
    /// A tensor the caller passes on every run: oneDNN's argument and layout.
    struct Slot {
        var argument: Int32
        var descriptor: dnnl_memory_desc_t
    }

    private let primitive: dnnl_primitive_t
    private let slots: [Slot]
    /// Arguments held by the primitive itself (packed weights, bias, scale, shift).
    private let fixed: [dnnl_exec_arg_t]
    /// The memories of `fixed` this primitive destroys (the others are `lender`'s).
    private let owned: [dnnl_memory_t]
    /// A primitive whose packed weights this one reads, kept alive as long as this one.
    private let lender: DNNLPreparedPrimitive?
    private let scratchpad: dnnl_memory_desc_t
    private let threads: Int
    private let workspaces = Locked<[Workspace]>([])
    /// Bytes oneDNN holds for the fixed arguments.
    let preparedBytes: Int

    private final class Workspace {
        let stream: dnnl_stream_t
        var memories: [dnnl_memory_t] = []
        var arguments: [dnnl_exec_arg_t] = []

        init(stream: dnnl_stream_t) { self.stream = stream }

        deinit {
            for memory in memories { dnnl_memory_destroy(memory) }
            dnnl_stream_destroy(stream)
        }
    }

    /// Takes `fixed`'s memories (destroyed with the primitive, except those
    /// `lender` owns) and makes the primitive from `description` (which the caller still owns).
    fileprivate init?(_ description: dnnl_primitive_desc_t, slots: [Slot], fixed: [dnnl_exec_arg_t], threads: Int,
                      lender: DNNLPreparedPrimitive? = nil) {
        let borrowed = Set(lender?.fixed.compactMap { $0.memory.map { UInt(bitPattern: $0) } } ?? [])
        let owned = fixed.compactMap(\.memory).filter { !borrowed.contains(UInt(bitPattern: $0)) }
        var created: dnnl_primitive_t?
        guard let scratchpad = dnnl_primitive_desc_query_md(description, dnnl_query_scratchpad_md, 0)?.pointee,
              dnnl_primitive_create(&created, description) == dnnl_success, let created
        else {
            for memory in owned { dnnl_memory_destroy(memory) }
            return nil
        }
        primitive = created
        self.slots = slots
        self.fixed = fixed
        self.owned = owned
        self.lender = lender
        self.scratchpad = scratchpad
        self.threads = threads
        preparedBytes = owned.reduce(0) { total, memory in
            var descriptor: UnsafePointer<dnnl_memory_desc_t>?
            guard dnnl_memory_get_memory_desc(memory, &descriptor) == dnnl_success, let descriptor else { return total }
            return total + dnnl_memory_desc_get_size(descriptor)
        }
    }

    deinit {
        dnnl_primitive_destroy(primitive)
        for memory in owned { dnnl_memory_destroy(memory) }
    }

    /// The memory this primitive holds for `argument` (its packed weights for `DNNL_ARG_WEIGHTS`).
    fileprivate func fixedMemory(_ argument: Int32) -> dnnl_memory_t? {
        fixed.first { $0.arg == argument }?.memory
    }

    /// Runs on the calling thread (and oneDNN's threads) with one pointer per
    /// slot, in the slots' order. `false` if oneDNN fails.
    func run(_ pointers: UnsafeMutableRawPointer...) -> Bool {
        guard pointers.count == slots.count,
              let workspace = workspaces.withLock({ $0.popLast() }) ?? makeWorkspace() else { return false }
        defer { workspaces.withLock { $0.append(workspace) } }
        for (index, pointer) in pointers.enumerated() { dnnl_memory_set_data_handle(workspace.memories[index], pointer) }
        DNNL.useThreads(threads)
        return workspace.arguments.withUnsafeBufferPointer { arguments in
            dnnl_primitive_execute(primitive, workspace.stream, Int32(arguments.count), arguments.baseAddress) == dnnl_success
        } && dnnl_stream_wait(workspace.stream) == dnnl_success
    }

    private func makeWorkspace() -> Workspace? {
        guard let engine = DNNL.engine?.handle else { return nil }
        var stream: dnnl_stream_t?
        guard dnnl_stream_create(&stream, engine, dnnl_stream_default_flags.rawValue) == dnnl_success, let stream else { return nil }
        let workspace = Workspace(stream: stream)
        func bind(_ descriptor: dnnl_memory_desc_t, _ argument: Int32, handle: UnsafeMutableRawPointer?) -> Bool {
            var descriptor = descriptor
            var memory: dnnl_memory_t?
            guard dnnl_memory_create(&memory, &descriptor, engine, handle) == dnnl_success, let memory else { return false }
            workspace.memories.append(memory)
            workspace.arguments.append(dnnl_exec_arg_t(arg: argument, memory: memory))
            return true
        }
        // A placeholder address until a run sets the real one.
        for slot in slots where !bind(slot.descriptor, slot.argument, handle: UnsafeMutableRawPointer(bitPattern: 64)) { return nil }
        workspace.arguments += fixed
        var scratchpadDescriptor = scratchpad
        if dnnl_memory_desc_get_size(&scratchpadDescriptor) > 0,
           !bind(scratchpad, DNNL_ARG_SCRATCHPAD, handle: DNNLKernels.allocate) { return nil }
        return workspace
    }
}

/// The tensor engine's oneDNN kernels, prepared at plan time. They run on
/// one OpenMP thread each: Debian's oneDNN threads through OpenMP, whose
/// barriers spin and stall when the cores are shared (BERT at 2 threads took
/// 8× longer than at 1 on a loaded machine), so a product's threads are
/// Dispatch's, each with its own block of rows (`LinearAlgebraOperations`).
enum DNNLKernels {
    /// A tensor operand: dimensions and element strides (transposes are strides).
    struct Operand {
        var dims: [Int]
        var strides: [Int]

        /// Row-major `dims`.
        init(_ dims: [Int]) {
            self.dims = dims
            strides = Shapes.strides(dims)
        }

        init(dims: [Int], strides: [Int]) {
            self.dims = dims
            self.strides = strides
        }
    }

    /// An activation oneDNN computes after a product, or on its own.
    enum Activation: Equatable {
        case geluExact, geluTanh, relu

        var algorithm: dnnl_alg_kind_t {
            switch self {
            case .geluExact: dnnl_eltwise_gelu_erf
            case .geluTanh: dnnl_eltwise_gelu_tanh
            case .relu: dnnl_eltwise_relu
            }
        }
    }

    // MARK: Matrix products

    /// `source · weights (+ bias) → activation (+ residual)`. Slots: source,
    /// then weights unless constant, destination, then the residual if any.
    ///
    /// - Parameters:
    ///   - constantWeights: the weights' values laid out as `weights` says;
    ///     reordered now into the layout oneDNN's kernel reads (the caller may
    ///     drop its copy), so nothing is packed per run.
    ///   - bias: one value per column, added to every row.
    ///   - residual: the layout of a tensor added to the result (the destination's dims).
    /// - Returns: `nil` when oneDNN is unavailable or refuses the shapes.
    ///   - sharingWeightsWith: a product over the same constant weights (other
    ///     rows): its packed weights are read when oneDNN wants the same layout.
    static func matmul(source sourceOperand: Operand, weights weightsOperand: Operand, destination destinationOperand: Operand,
                       constantWeights: UnsafePointer<Float>?, bias biasValues: [Float]?, activation: Activation?,
                       residual: Operand?, threads: Int, sharingWeightsWith other: DNNLPreparedPrimitive? = nil) -> DNNLPreparedPrimitive? {
        guard let engine = DNNL.engine?.handle,
              var source = descriptor(sourceOperand), let givenWeights = descriptor(weightsOperand),
              var destination = descriptor(destinationOperand)
        else { return nil }
        let rank = destinationOperand.dims.count
        var weights = givenWeights
        if constantWeights != nil {
            guard let any = descriptor(weightsOperand.dims, tag: dnnl_format_tag_any) else { return nil }
            weights = any
        }
        var biasDescriptor: dnnl_memory_desc_t?
        if let biasValues {
            guard let described = descriptor(Operand(Array(repeating: 1, count: rank - 1) + [biasValues.count])) else { return nil }
            biasDescriptor = described
        }
        var residualDescriptor: dnnl_memory_desc_t?
        if let residual {
            guard let described = descriptor(residual) else { return nil }
            residualDescriptor = described
        }
        guard let attributes = attributes(activation: activation, residual: residualDescriptor) else { return nil }
        defer { dnnl_primitive_attr_destroy(attributes) }
        DNNL.useThreads(threads)
        var operation = dnnl_matmul_desc_t()
        let described = withOptionalPointer(to: &biasDescriptor) { biasPointer in
            dnnl_matmul_desc_init(&operation, &source, &weights, biasPointer, &destination)
        }
        guard described == dnnl_success else { return nil }
        var made: dnnl_primitive_desc_t?
        guard dnnl_primitive_desc_create(&made, &operation, attributes, engine, nil) == dnnl_success, let made else { return nil }
        defer { dnnl_primitive_desc_destroy(made) }
        guard let wanted = dnnl_primitive_desc_query_md(made, dnnl_query_weights_md, 0) else { return nil }
        var fixed: [dnnl_exec_arg_t] = []
        var slots = [DNNLPreparedPrimitive.Slot(argument: DNNL_ARG_SRC, descriptor: source)]
        var lender: DNNLPreparedPrimitive?
        if let other, let theirs = other.fixedMemory(DNNL_ARG_WEIGHTS), constantWeights != nil,
           let layout = memoryDescriptor(theirs), dnnl_memory_desc_equal(layout, wanted) != 0 {
            fixed.append(dnnl_exec_arg_t(arg: DNNL_ARG_WEIGHTS, memory: theirs))
            lender = other
        } else if let constantWeights {
            var given = givenWeights
            guard let packed = reorder(constantWeights, from: &given, to: wanted, engine: engine) else { return nil }
            fixed.append(dnnl_exec_arg_t(arg: DNNL_ARG_WEIGHTS, memory: packed))
        } else {
            slots.append(DNNLPreparedPrimitive.Slot(argument: DNNL_ARG_WEIGHTS, descriptor: wanted.pointee))
        }
        slots.append(DNNLPreparedPrimitive.Slot(argument: DNNL_ARG_DST, descriptor: destination))
        if let residualDescriptor {
            // The residual's post-operation comes after the activation's.
            slots.append(DNNLPreparedPrimitive.Slot(argument: DNNL.postOperationSource(activation == nil ? 0 : 1), descriptor: residualDescriptor))
        }
        if let biasValues, var biasDescriptor {
            guard let copied = copy(biasValues, described: &biasDescriptor, engine: engine) else {
                for argument in fixed where lender == nil || argument.arg != DNNL_ARG_WEIGHTS { dnnl_memory_destroy(argument.memory) }
                return nil
            }
            fixed.append(dnnl_exec_arg_t(arg: DNNL_ARG_BIAS, memory: copied))
        }
        return DNNLPreparedPrimitive(made, slots: slots, fixed: fixed, threads: threads, lender: lender)
    }

    /// Which constant weights a product was prepared for: where their values
    /// live (a constant's array, shared by every plan of one engine), their
    /// count and their layout.
    struct WeightsKey: Hashable {
        var address: UInt
        var count: Int
        var dims: [Int]
        var strides: [Int]
    }

    /// Products holding packed weights, by the weights they packed, so that
    /// the plans of other input shapes (a decoder's prefill and its one-token
    /// steps) read the same packed copy. Weak: an entry lives as long as its
    /// product, whose plan keeps the weights' array (and so its address) alive.
    private static let packedProducts = Locked<[WeightsKey: WeakPrimitive]>([:])

    private final class WeakPrimitive: @unchecked Sendable {
        weak var primitive: DNNLPreparedPrimitive?
        init(_ primitive: DNNLPreparedPrimitive) { self.primitive = primitive }
    }

    /// A live product that packed these weights, if any.
    static func product(packing key: WeightsKey) -> DNNLPreparedPrimitive? {
        packedProducts.withLock { $0[key]?.primitive }
    }

    /// Records `primitive` as holding the packed weights of `key`.
    static func remember(_ primitive: DNNLPreparedPrimitive, packing key: WeightsKey) {
        packedProducts.withLock { products in
            products = products.filter { $0.value.primitive != nil }
            products[key] = WeakPrimitive(primitive)
        }
    }

    // MARK: Element-wise, softmax, layer norm

    /// `activation` over `count` contiguous values. Slots: source, destination (may be the same).
    static func eltwise(_ activation: Activation, count: Int, threads: Int) -> DNNLPreparedPrimitive? {
        guard let engine = DNNL.engine?.handle, count > 0, var data = descriptor(Operand([count])),
              let attributes = attributes(activation: nil, residual: nil) else { return nil }
        defer { dnnl_primitive_attr_destroy(attributes) }
        DNNL.useThreads(threads)
        var operation = dnnl_eltwise_desc_t()
        guard dnnl_eltwise_forward_desc_init(&operation, dnnl_forward_inference, activation.algorithm, &data, 0, 0) == dnnl_success else {
            return nil
        }
        return make(&operation, attributes: attributes, engine: engine, threads: threads,
                    slots: [.init(argument: DNNL_ARG_SRC, descriptor: data), .init(argument: DNNL_ARG_DST, descriptor: data)])
    }

    /// Softmax along `axis` of a row-major `shape`. Slots: source, destination.
    static func softmax(shape: [Int], axis: Int, threads: Int) -> DNNLPreparedPrimitive? {
        guard let engine = DNNL.engine?.handle, !shape.contains(0), var data = descriptor(Operand(shape)),
              let attributes = attributes(activation: nil, residual: nil) else { return nil }
        defer { dnnl_primitive_attr_destroy(attributes) }
        DNNL.useThreads(threads)
        var operation = dnnl_softmax_desc_t()
        guard dnnl_softmax_forward_desc_init(&operation, dnnl_forward_inference, &data, Int32(axis)) == dnnl_success else { return nil }
        return make(&operation, attributes: attributes, engine: engine, threads: threads,
                    slots: [.init(argument: DNNL_ARG_SRC, descriptor: data), .init(argument: DNNL_ARG_DST, descriptor: data)])
    }

    /// Layer norm over the last axis of `rows × width` values with optional
    /// per-element scale and shift. Slots: source, destination.
    static func layerNorm(rows: Int, width: Int, epsilon: Float, scale: [Float]?, shift: [Float]?, threads: Int) -> DNNLPreparedPrimitive? {
        guard let engine = DNNL.engine?.handle, rows > 0, width > 0, var data = descriptor(Operand([rows, width])),
              var statistics = descriptor(Operand([rows])), var parameter = descriptor(Operand([width])),
              let attributes = attributes(activation: nil, residual: nil) else { return nil }
        defer { dnnl_primitive_attr_destroy(attributes) }
        DNNL.useThreads(threads)
        var flags: UInt32 = 0
        if scale != nil { flags |= dnnl_use_scale.rawValue }
        if shift != nil { flags |= dnnl_use_shift.rawValue }
        var operation = dnnl_layer_normalization_desc_t()
        guard dnnl_layer_normalization_forward_desc_init(&operation, dnnl_forward_inference, &data, &statistics, epsilon, flags) == dnnl_success
        else { return nil }
        var fixed: [dnnl_exec_arg_t] = []
        for (values, argument) in [(scale, DNNL_ARG_SCALE), (shift, DNNL_ARG_SHIFT)] {
            guard let values else { continue }
            guard let memory = copy(values, described: &parameter, engine: engine) else {
                for argument in fixed { dnnl_memory_destroy(argument.memory) }
                return nil
            }
            fixed.append(dnnl_exec_arg_t(arg: argument, memory: memory))
        }
        return make(&operation, attributes: attributes, engine: engine, threads: threads,
                    slots: [.init(argument: DNNL_ARG_SRC, descriptor: data), .init(argument: DNNL_ARG_DST, descriptor: data)], fixed: fixed)
    }

    private static func make(_ operation: UnsafeRawPointer, attributes: dnnl_primitive_attr_t, engine: dnnl_engine_t, threads: Int,
                                        slots: [DNNLPreparedPrimitive.Slot], fixed: [dnnl_exec_arg_t] = []) -> DNNLPreparedPrimitive? {
        var made: dnnl_primitive_desc_t?
        guard dnnl_primitive_desc_create(&made, operation, attributes, engine, nil) == dnnl_success, let made else {
            for argument in fixed { dnnl_memory_destroy(argument.memory) }
            return nil
        }
        defer { dnnl_primitive_desc_destroy(made) }
        return DNNLPreparedPrimitive(made, slots: slots, fixed: fixed, threads: threads)
    }

    // MARK: oneDNN

    private static func memoryDescriptor(_ memory: dnnl_memory_t) -> UnsafePointer<dnnl_memory_desc_t>? {
        var descriptor: UnsafePointer<dnnl_memory_desc_t>?
        return dnnl_memory_get_memory_desc(memory, &descriptor) == dnnl_success ? descriptor : nil
    }

    /// oneDNN's `DNNL_MEMORY_ALLOCATE`: the library allocates the buffer.
    static var allocate: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: -1) }

    private static func descriptor(_ operand: Operand) -> dnnl_memory_desc_t? {
        var descriptor = dnnl_memory_desc_t()
        let dims = operand.dims.map(Int64.init), strides = operand.strides.map(Int64.init)
        return dnnl_memory_desc_init_by_strides(&descriptor, Int32(dims.count), dims, dnnl_f32, strides) == dnnl_success ? descriptor : nil
    }

    private static func descriptor(_ dims: [Int], tag: dnnl_format_tag_t) -> dnnl_memory_desc_t? {
        var descriptor = dnnl_memory_desc_t()
        let dims = dims.map(Int64.init)
        return dnnl_memory_desc_init_by_tag(&descriptor, Int32(dims.count), dims, dnnl_f32, tag) == dnnl_success ? descriptor : nil
    }

    /// Attributes with a user scratchpad (each workspace brings its own, so
    /// concurrent runs never share oneDNN's) and the post-operations.
    private static func attributes(activation: Activation?, residual: dnnl_memory_desc_t?) -> dnnl_primitive_attr_t? {
        var attributes: dnnl_primitive_attr_t?
        guard dnnl_primitive_attr_create(&attributes) == dnnl_success, let attributes else { return nil }
        guard dnnl_primitive_attr_set_scratchpad_mode(attributes, dnnl_scratchpad_mode_user) == dnnl_success else {
            dnnl_primitive_attr_destroy(attributes)
            return nil
        }
        guard activation != nil || residual != nil else { return attributes }
        var postOperations: dnnl_post_ops_t?
        guard dnnl_post_ops_create(&postOperations) == dnnl_success, let postOperations else {
            dnnl_primitive_attr_destroy(attributes)
            return nil
        }
        defer { dnnl_post_ops_destroy(postOperations) }
        var added = true
        if let activation { added = dnnl_post_ops_append_eltwise(postOperations, 1, activation.algorithm, 0, 0) == dnnl_success }
        if added, var residual { added = dnnl_post_ops_append_binary(postOperations, dnnl_binary_add, &residual) == dnnl_success }
        guard added, dnnl_primitive_attr_set_post_ops(attributes, postOperations) == dnnl_success else {
            dnnl_primitive_attr_destroy(attributes)
            return nil
        }
        return attributes
    }

    /// `values` (laid out as `given`) reordered into a new oneDNN-owned memory of layout `wanted`.
    private static func reorder(_ values: UnsafePointer<Float>, from given: inout dnnl_memory_desc_t,
                                to wanted: UnsafePointer<dnnl_memory_desc_t>, engine: dnnl_engine_t) -> dnnl_memory_t? {
        var target: dnnl_memory_t?, source: dnnl_memory_t?
        guard dnnl_memory_create(&target, wanted, engine, allocate) == dnnl_success, let target else { return nil }
        guard dnnl_memory_create(&source, &given, engine, UnsafeMutableRawPointer(mutating: values)) == dnnl_success, let source else {
            dnnl_memory_destroy(target)
            return nil
        }
        defer { dnnl_memory_destroy(source) }
        var description: dnnl_primitive_desc_t?
        var reorder: dnnl_primitive_t?
        var stream: dnnl_stream_t?
        defer {
            if let reorder { dnnl_primitive_destroy(reorder) }
            if let description { dnnl_primitive_desc_destroy(description) }
            if let stream { dnnl_stream_destroy(stream) }
        }
        var arguments = [dnnl_exec_arg_t(arg: DNNL_ARG_FROM, memory: source), dnnl_exec_arg_t(arg: DNNL_ARG_TO, memory: target)]
        guard dnnl_reorder_primitive_desc_create(&description, &given, engine, wanted, engine, nil) == dnnl_success, let description,
              dnnl_primitive_create(&reorder, description) == dnnl_success, let reorder,
              dnnl_stream_create(&stream, engine, dnnl_stream_default_flags.rawValue) == dnnl_success, let stream,
              dnnl_primitive_execute(reorder, stream, 2, &arguments) == dnnl_success, dnnl_stream_wait(stream) == dnnl_success
        else {
            dnnl_memory_destroy(target)
            return nil
        }
        return target
    }

    /// `values` copied into a new oneDNN-owned memory.
    private static func copy(_ values: [Float], described descriptor: inout dnnl_memory_desc_t, engine: dnnl_engine_t) -> dnnl_memory_t? {
        var memory: dnnl_memory_t?
        var handle: UnsafeMutableRawPointer?
        guard dnnl_memory_create(&memory, &descriptor, engine, allocate) == dnnl_success, let memory else { return nil }
        guard dnnl_memory_get_data_handle(memory, &handle) == dnnl_success, let handle else {
            dnnl_memory_destroy(memory)
            return nil
        }
        values.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { handle.copyMemory(from: base, byteCount: bytes.count) }
        }
        return memory
    }
}

/// Calls `body` with a pointer to `value`, or `nil` without one.
private func withOptionalPointer<Value, Result>(to value: inout Value?, _ body: (UnsafeMutablePointer<Value>?) -> Result) -> Result {
    guard var unwrapped = value else { return body(nil) }
    defer { value = unwrapped }
    return body(&unwrapped)
}

extension DNNLKernels {
    /// The error a prepared kernel's failed run throws, naming the operation.
    static func failure(_ context: OperationContext) -> RuntimeError {
        .invalidParameters(model: "oneDNN", detail: "running operation \"\(context.op.name)\" (\(context.op.type)) failed")
    }
}
