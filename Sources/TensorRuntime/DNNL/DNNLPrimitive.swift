import CDNNL
import Foundation
import ModelFeatures
import SystemIO

/// The tensor engine's one oneDNN primitive: made once at plan time — the
/// implementation oneDNN chose for this processor, with its constants
/// (weights packed into the layout it reads, a bias, a layer norm's scale
/// and shift) and post-operations — and run by kernels on the buffers of any
/// state. Convolutions, pooling, matrix products, activations, softmax and
/// layer norm are all made here (`DNNLConvolution`, `DNNLKernels`).
///
/// Immutable apart from its pool of workspaces (a stream and the memories
/// that wrap a run's buffers), so concurrent predictions share it and a run
/// allocates nothing once the pool holds a workspace per concurrent run.
/// Packed constants are reference-counted: a primitive over the same
/// weights (another plan's, or another block of rows) reads the same packed
/// copy (`shareConstant`).
final class DNNLPrimitive: @unchecked Sendable {
    /// What it computes, in messages: `convolution "conv_3"`.
    let name: String
    private let primitive: dnnl_primitive_t
    private let descriptor: dnnl_primitive_desc_t
    /// Constant arguments (packed weights, bias, scale, shift) bound at every
    /// run; `shared` ones were packed by another primitive.
    private var constants: [(argument: Int32, constant: DNNLConstant, shared: Bool)] = []
    /// The run arguments `run(_:)` takes its pointers for, in order.
    private let slots: [Int32]
    /// OpenMP threads the primitive was prepared for and runs on.
    let threads: Int
    /// Bytes of temporary memory one run needs.
    let scratchpadBytes: Int
    private let workspaces = Locked<[Workspace]>([])

    /// Makes the primitive for an operation descriptor oneDNN filled in (a
    /// `dnnl_convolution_desc_t`, `dnnl_matmul_desc_t`, …), with
    /// `postOperations`, prepared for `threads` OpenMP threads; `slots` are
    /// the run arguments `run(_:)` binds its pointers to.
    init<OperationDescriptor>(name: String, operation: inout OperationDescriptor, postOperations: DNNLPostOperations = DNNLPostOperations(),
                              slots: [Int32] = [], threads: Int) throws(RuntimeError) {
        guard let engine = DNNL.engine?.handle else { throw DNNL.failure(name, "oneDNN is unavailable") }
        self.name = name
        self.slots = slots
        self.threads = max(1, threads)
        var attributes: dnnl_primitive_attr_t?
        guard dnnl_primitive_attr_create(&attributes) == dnnl_success, let attributes else { throw DNNL.failure(name, "creating attributes") }
        defer { dnnl_primitive_attr_destroy(attributes) }
        try postOperations.apply(to: attributes, for: name)
        // The scratchpad is the caller's (a plan value) or the workspace's, never shared between concurrent runs.
        let mode = dnnl_primitive_attr_set_scratchpad_mode(attributes, dnnl_scratchpad_mode_user)
        guard mode == dnnl_success else { throw DNNL.failure(name, "asking for a user scratchpad", mode) }
        // oneDNN splits the work for the threads there are when it prepares.
        DNNL.useThreads(self.threads)
        var description: dnnl_primitive_desc_t?
        let described = withUnsafePointer(to: &operation) { pointer in
            dnnl_primitive_desc_create(&description, UnsafeRawPointer(pointer), attributes, engine, nil)
        }
        guard described == dnnl_success, let description else { throw DNNL.failure(name, "choosing an implementation", described) }
        var created: dnnl_primitive_t?
        let status = dnnl_primitive_create(&created, description)
        guard status == dnnl_success, let created else {
            dnnl_primitive_desc_destroy(description)
            throw DNNL.failure(name, "creating the primitive", status)
        }
        self.descriptor = description
        self.primitive = created
        var scratchpad = dnnl_primitive_desc_query_md(description, dnnl_query_scratchpad_md, 0)?.pointee ?? dnnl_memory_desc_t()
        scratchpadBytes = dnnl_memory_desc_get_size(&scratchpad)
    }

    deinit {
        dnnl_primitive_destroy(primitive)
        dnnl_primitive_desc_destroy(descriptor)
    }

    /// The layout the primitive chose for run argument `argument` (`DNNL_ARG_WEIGHTS`, `DNNL_ARG_SRC`, …).
    func layout(of argument: Int32) throws(RuntimeError) -> DNNLDescriptor {
        guard let raw = dnnl_primitive_desc_query_md(descriptor, dnnl_query_exec_arg_md, argument)?.pointee else {
            throw DNNL.failure(name, "asking the layout of argument \(argument)")
        }
        return DNNLDescriptor(raw: raw)
    }

    /// The name of the implementation oneDNN chose (`jit:avx512_core`, `gemm:jit`, …), for profiles and tests.
    var implementation: String {
        var text: UnsafePointer<CChar>?
        guard dnnl_primitive_desc_query(descriptor, dnnl_query_impl_info_str, 0, &text) == dnnl_success, let text else { return "?" }
        return String(cString: text)
    }

    /// Packs `values` (laid out as `given`) once into the layout the primitive
    /// chose for `argument`, and binds it to every run.
    func bindConstant(_ argument: Int32, values: UnsafeBufferPointer<Float>, given: DNNLDescriptor) throws(RuntimeError) {
        let constant = try DNNLConstant.packed(values, given: given, wanted: layout(of: argument), for: name)
        constants.append((argument, constant, false))
    }

    /// `bindConstant` for an array.
    func bindConstant(_ argument: Int32, values: [Float], given: DNNLDescriptor) throws(RuntimeError) {
        try values.withUnsafeBufferPointer { buffer throws(RuntimeError) in try bindConstant(argument, values: buffer, given: given) }
    }

    /// Binds `other`'s packed constant for `argument` when it is in the
    /// layout this primitive reads; `false` (nothing bound) otherwise.
    func shareConstant(_ argument: Int32, from other: DNNLPrimitive) -> Bool {
        guard let theirs = other.constants.first(where: { $0.argument == argument })?.constant,
              let wanted = try? layout(of: argument), theirs.descriptor.matches(wanted) else { return false }
        constants.append((argument, theirs, true))
        return true
    }

    /// Bytes of the constants this primitive packed (not those it shares).
    var constantBytes: Int { constants.reduce(0) { $0 + ($1.shared ? 0 : $1.constant.bytes) } }

    /// Runs the primitive on `arguments` (run argument, buffer in the layout
    /// the primitive chose for it) and `scratchpad` (at least
    /// `scratchpadBytes`; `nil` uses the workspace's own), on the threads it
    /// was prepared for.
    func run(_ arguments: [(Int32, UnsafeMutableRawPointer)], scratchpad: UnsafeMutableRawPointer?) throws(RuntimeError) {
        let workspace: Workspace
        if let idle = workspaces.withLock({ $0.popLast() }) {
            workspace = idle
        } else {
            guard let stream = DNNLStream() else { throw DNNL.failure(name, "creating a stream") }
            workspace = Workspace(stream: stream)
        }
        defer { workspaces.withLock { $0.append(workspace) } }
        workspace.list.removeAll(keepingCapacity: true)
        for (argument, pointer) in arguments {
            workspace.list.append(dnnl_exec_arg_t(arg: argument, memory: try workspace.memory(argument, at: pointer, of: self)))
        }
        if scratchpadBytes > 0 {
            let memory = if let scratchpad {
                try workspace.memory(Int32(DNNL_ARG_SCRATCHPAD), at: scratchpad, of: self)
            } else {
                try workspace.ownScratchpad(of: self)
            }
            workspace.list.append(dnnl_exec_arg_t(arg: Int32(DNNL_ARG_SCRATCHPAD), memory: memory))
        }
        for (argument, constant, _) in constants { workspace.list.append(dnnl_exec_arg_t(arg: argument, memory: constant.memory)) }
        DNNL.useThreads(threads)
        let status = workspace.list.withUnsafeBufferPointer { list in
            dnnl_primitive_execute(primitive, workspace.stream.handle, Int32(list.count), list.baseAddress)
        }
        guard status == dnnl_success else { throw DNNL.failure(name, "running", status) }
        let waited = dnnl_stream_wait(workspace.stream.handle)
        guard waited == dnnl_success else { throw DNNL.failure(name, "waiting for the run", waited) }
    }

    /// Runs with one pointer per slot, in the slots' order, and the
    /// workspace's scratchpad. `false` if oneDNN fails.
    func run(_ pointers: UnsafeMutableRawPointer...) -> Bool {
        guard pointers.count == slots.count else { return false }
        return (try? run(Array(zip(slots, pointers)), scratchpad: nil)) != nil
    }

    /// What one run at a time uses: a stream, the memories wrapping its
    /// buffers (their addresses set per run) and the run's argument list.
    private final class Workspace {
        let stream: DNNLStream
        var memories: [Int32: dnnl_memory_t] = [:]
        var scratchpad: dnnl_memory_t?
        var list: [dnnl_exec_arg_t] = []

        init(stream: DNNLStream) { self.stream = stream }

        deinit {
            for memory in memories.values { dnnl_memory_destroy(memory) }
            if let scratchpad { dnnl_memory_destroy(scratchpad) }
        }

        /// The memory of `argument`, pointing at `pointer`.
        func memory(_ argument: Int32, at pointer: UnsafeMutableRawPointer, of primitive: DNNLPrimitive) throws(RuntimeError) -> dnnl_memory_t {
            if let memory = memories[argument] {
                guard dnnl_memory_set_data_handle(memory, pointer) == dnnl_success else {
                    throw DNNL.failure(primitive.name, "binding argument \(argument)")
                }
                return memory
            }
            let memory = try make(argument, pointer, of: primitive)
            memories[argument] = memory
            return memory
        }

        /// A scratchpad oneDNN allocated for this workspace.
        func ownScratchpad(of primitive: DNNLPrimitive) throws(RuntimeError) -> dnnl_memory_t {
            if let scratchpad { return scratchpad }
            let memory = try make(Int32(DNNL_ARG_SCRATCHPAD), DNNL.allocate, of: primitive)
            scratchpad = memory
            return memory
        }

        private func make(_ argument: Int32, _ pointer: UnsafeMutableRawPointer?, of primitive: DNNLPrimitive) throws(RuntimeError) -> dnnl_memory_t {
            guard let engine = DNNL.engine?.handle,
                  let layout = dnnl_primitive_desc_query_md(primitive.descriptor, dnnl_query_exec_arg_md, argument) else {
                throw DNNL.failure(primitive.name, "asking the layout of argument \(argument)")
            }
            var memory: dnnl_memory_t?
            let status = dnnl_memory_create(&memory, layout, engine, pointer)
            guard status == dnnl_success, let memory else { throw DNNL.failure(primitive.name, "binding argument \(argument)", status) }
            return memory
        }
    }
}
