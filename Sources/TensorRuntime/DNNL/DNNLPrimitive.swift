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
    /// The primitives that packed the constants it shares, kept alive with it:
    /// a later plan looks packed weights up by the primitive that packed them
    /// (`DNNLKernels.remember`, a weak reference), and one that only views
    /// them (a block of columns or rows) would otherwise let that primitive
    /// go and the next plan pack the same weights again. Always the packers
    /// themselves, never a primitive that shares in turn: a decoder plans
    /// every step anew, and each plan's products holding the previous plan's
    /// made a chain that kept every plan's products alive (~26 KB a plan).
    private var owners: [DNNLPrimitive] = []
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

    /// The name of the implementation oneDNN would choose for an operation
    /// descriptor (as `implementation` names it), without making the
    /// primitive (its kernel is generated only when one is made); `nil` where
    /// oneDNN has none.
    static func implementation<OperationDescriptor>(of operation: inout OperationDescriptor) -> String? {
        guard let engine = DNNL.engine?.handle else { return nil }
        var description: dnnl_primitive_desc_t?
        let described = withUnsafePointer(to: &operation) { pointer in
            dnnl_primitive_desc_create(&description, UnsafeRawPointer(pointer), nil, engine, nil)
        }
        guard described == dnnl_success, let description else { return nil }
        defer { dnnl_primitive_desc_destroy(description) }
        var text: UnsafePointer<CChar>?
        guard dnnl_primitive_desc_query(description, dnnl_query_impl_info_str, 0, &text) == dnnl_success, let text else { return nil }
        return String(cString: text)
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
        guard let theirs = other.constants.first(where: { $0.argument == argument }),
              let wanted = try? layout(of: argument), theirs.constant.descriptor.matches(wanted) else { return false }
        constants.append((argument, theirs.constant, true))
        owners.append(contentsOf: other.packers(of: theirs))
        return true
    }

    /// The primitive that packed `entry` (one of this primitive's constants): itself, or the packers it keeps.
    private func packers(of entry: (argument: Int32, constant: DNNLConstant, shared: Bool)) -> [DNNLPrimitive] {
        entry.shared ? owners : [self]
    }

    /// Binds columns `first…` of `other`'s packed constant for `argument`,
    /// read in place, when they are in the layout this primitive reads
    /// (`DNNLConstant.columns`); `false` (nothing bound) otherwise.
    func shareColumns(_ argument: Int32, from first: Int, of other: DNNLPrimitive) -> Bool {
        guard let wanted = try? layout(of: argument), wanted.raw.ndims == 2 else { return false }
        let width = Int(wanted.raw.dims.1)
        guard let theirs = other.constants.first(where: { $0.argument == argument }) else { return false }
        return share(argument, theirs.constant.columns(first, width: width), wanted: wanted, packers: other.packers(of: theirs))
    }

    /// Binds rows `first…` of `other`'s packed constant for `argument` (as many as this primitive reads), read in place, as `shareColumns` does.
    func shareRows(_ argument: Int32, from first: Int, of other: DNNLPrimitive) -> Bool {
        guard let wanted = try? layout(of: argument), let count = wanted.plainRows?.rows else { return false }
        guard let theirs = other.constants.first(where: { $0.argument == argument }) else { return false }
        return share(argument, theirs.constant.rows(first, count: count), wanted: wanted, packers: other.packers(of: theirs))
    }

    private func share(_ argument: Int32, _ view: DNNLConstant?, wanted: DNNLDescriptor, packers: [DNNLPrimitive]) -> Bool {
        guard let view, view.descriptor.matches(wanted) else { return false }
        constants.append((argument, view, true))
        owners.append(contentsOf: packers)
        return true
    }

    /// Bytes of the constants this primitive packed (not those it shares).
    var constantBytes: Int { constants.reduce(0) { $0 + ($1.shared ? 0 : $1.constant.bytes) } }

    /// Runs the primitive with `pointer(i)` as the buffer of slot `i` (for
    /// every slot, in the layout the primitive chose for it) and `scratchpad`
    /// (at least `scratchpadBytes`; `nil` uses the workspace's own), on the
    /// threads it was prepared for.
    ///
    /// Allocates nothing once a workspace is pooled: the workspace's memories
    /// and argument list are made on its first run, and a memory's address is
    /// set only when the buffer moved (a state's arena stays where it is).
    func run(scratchpad: UnsafeMutableRawPointer?, _ pointer: (Int) -> UnsafeMutableRawPointer) throws(RuntimeError) {
        let workspace: Workspace
        if let idle = workspaces.withLock({ $0.popLast() }) {
            workspace = idle
        } else {
            guard let stream = DNNLStream() else { throw DNNL.failure(name, "creating a stream") }
            workspace = Workspace(stream: stream, of: self)
        }
        defer { workspaces.withLock { $0.append(workspace) } }
        for index in slots.indices { try workspace.bind(index, to: pointer(index), of: self) }
        if scratchpadBytes > 0 {
            if let scratchpad { try workspace.bind(slots.count, to: scratchpad, of: self) } else { try workspace.bindOwnScratchpad(of: self) }
        }
        DNNL.useThreads(threads)
        let status = dnnl_primitive_execute(primitive, workspace.stream.handle, Int32(workspace.arguments.count), workspace.arguments.baseAddress)
        guard status == dnnl_success else { throw DNNL.failure(name, "running", status) }
        let waited = dnnl_stream_wait(workspace.stream.handle)
        guard waited == dnnl_success else { throw DNNL.failure(name, "waiting for the run", waited) }
    }

    /// Runs a primitive of two slots (source, destination) with the workspace's scratchpad. `false` if oneDNN fails.
    func run(_ first: UnsafeMutableRawPointer, _ second: UnsafeMutableRawPointer) -> Bool {
        guard slots.count == 2 else { return false }
        return (try? run(scratchpad: nil) { $0 == 0 ? first : second }) != nil
    }

    /// Runs a primitive of three slots with the workspace's scratchpad. `false` if oneDNN fails.
    func run(_ first: UnsafeMutableRawPointer, _ second: UnsafeMutableRawPointer, _ third: UnsafeMutableRawPointer) -> Bool {
        guard slots.count == 3 else { return false }
        return (try? run(scratchpad: nil) { $0 == 0 ? first : ($0 == 1 ? second : third) }) != nil
    }

    /// Runs a primitive of four slots with the workspace's scratchpad. `false` if oneDNN fails.
    func run(_ first: UnsafeMutableRawPointer, _ second: UnsafeMutableRawPointer, _ third: UnsafeMutableRawPointer,
             _ fourth: UnsafeMutableRawPointer) -> Bool {
        guard slots.count == 4 else { return false }
        return (try? run(scratchpad: nil) { index in
            switch index {
            case 0: first
            case 1: second
            case 2: third
            default: fourth
            }
        }) != nil
    }

    /// The number of run arguments `run` takes pointers for.
    var slotCount: Int { slots.count }

    /// Workspaces made so far and idle now: one per run that ever overlapped another.
    var pooledWorkspaces: Int { workspaces.withLock { $0.count } }

    /// What one run at a time uses: a stream, a memory per slot (and the
    /// scratchpad) wrapping the run's buffers, and the argument list
    /// oneDNN reads, which also binds the primitive's constants. Its tables
    /// are plain memory, read without Swift's exclusivity checks on every run.
    private final class Workspace {
        let stream: DNNLStream
        /// One memory per slot, then the given scratchpad's, then one oneDNN allocated: made on first use.
        private let memories: UnsafeMutableBufferPointer<dnnl_memory_t?>
        /// The address each memory points at.
        private let bound: UnsafeMutableBufferPointer<UnsafeMutableRawPointer?>
        /// The argument list: one entry per slot, the scratchpad's if any, then the constants.
        let arguments: UnsafeMutableBufferPointer<dnnl_exec_arg_t>

        init(stream: DNNLStream, of primitive: DNNLPrimitive) {
            self.stream = stream
            let slots = primitive.slots.count
            memories = .allocate(capacity: slots + 2)
            memories.initialize(repeating: nil)
            bound = .allocate(capacity: slots + 2)
            bound.initialize(repeating: nil)
            let scratch = primitive.scratchpadBytes > 0 ? 1 : 0
            arguments = .allocate(capacity: slots + scratch + primitive.constants.count)
            for (index, argument) in primitive.slots.enumerated() { arguments[index] = dnnl_exec_arg_t(arg: argument, memory: nil) }
            if scratch == 1 { arguments[slots] = dnnl_exec_arg_t(arg: Int32(DNNL_ARG_SCRATCHPAD), memory: nil) }
            for (index, constant) in primitive.constants.enumerated() {
                arguments[slots + scratch + index] = dnnl_exec_arg_t(arg: constant.argument, memory: constant.constant.memory)
            }
        }

        deinit {
            for memory in memories { if let memory { dnnl_memory_destroy(memory) } }
            memories.deallocate()
            bound.deallocate()
            arguments.deallocate()
        }

        /// Points slot `index` (`slots.count`: the scratchpad) at `pointer`.
        @inline(__always)
        func bind(_ index: Int, to pointer: UnsafeMutableRawPointer, of primitive: DNNLPrimitive) throws(RuntimeError) {
            if let memory = memories[index] {
                arguments[index].memory = memory
                guard bound[index] != pointer else { return }
                guard dnnl_memory_set_data_handle(memory, pointer) == dnnl_success else {
                    throw DNNL.failure(primitive.name, "binding argument \(arguments[index].arg)")
                }
            } else {
                let memory = try make(index, pointer, of: primitive)
                memories[index] = memory
                arguments[index].memory = memory
            }
            bound[index] = pointer
        }

        /// Points the scratchpad at memory oneDNN allocated for this workspace.
        func bindOwnScratchpad(of primitive: DNNLPrimitive) throws(RuntimeError) {
            let index = primitive.slots.count
            if memories[index + 1] == nil { memories[index + 1] = try make(index, DNNL.allocate, of: primitive) }
            arguments[index].memory = memories[index + 1]
        }

        private func make(_ index: Int, _ pointer: UnsafeMutableRawPointer?, of primitive: DNNLPrimitive) throws(RuntimeError) -> dnnl_memory_t {
            let argument = index < primitive.slots.count ? primitive.slots[index] : Int32(DNNL_ARG_SCRATCHPAD)
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
