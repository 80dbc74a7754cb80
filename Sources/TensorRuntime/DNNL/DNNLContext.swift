import CDNNL
import Foundation
import ModelFeatures
import SystemIO

/// oneDNN for the tensor engine: the CPU engine (one per process), thread
/// counts, memory descriptors, constants packed once into the layout a
/// primitive prefers, and post-operations; the primitives themselves are
/// `DNNLPrimitive`s, made at plan time and run by kernels.
///
/// Nothing here knows Core ML: a kernel describes its operation with
/// oneDNN's own descriptors, makes a `DNNLPrimitive` once when it is
/// planned and runs it on the state's buffers.
enum DNNL {
    /// The CPU engine; `nil` when oneDNN cannot run here (kernels then use their fallbacks).
    static let engine: DNNLEngine? = {
        var handle: dnnl_engine_t?
        guard dnnl_engine_create(&handle, dnnl_cpu, 0) == dnnl_success, let handle else { return nil }
        return DNNLEngine(handle: handle)
    }()

    /// Whether oneDNN runs here.
    static var isAvailable: Bool { engine != nil }

    /// Whether oneDNN's best kernels here are its AVX2 ones (AVX2 and no
    /// AVX-512): their convolutions run faster on channel blocks of 8
    /// (`ChannelBlocking`) than channels-last.
    static let runsAVX2Kernels: Bool = {
        guard isAvailable else { return false }
        let isa = dnnl_get_effective_cpu_isa().rawValue
        return isa & dnnl_cpu_isa_avx2.rawValue == dnnl_cpu_isa_avx2.rawValue && isa & dnnl_cpu_isa_avx512_mic.rawValue != dnnl_cpu_isa_avx512_mic.rawValue
            && isa & dnnl_cpu_isa_avx512_core.rawValue != dnnl_cpu_isa_avx512_core.rawValue
    }()

    /// Whether oneDNN runs its AVX-512 kernels here (`avx512_core` or
    /// above, as `ONEDNN_MAX_CPU_ISA` allows): its Winograd convolutions
    /// then run on channel blocks of 16 (`ChannelBlocking`).
    static let runsAVX512Kernels: Bool = {
        guard isAvailable else { return false }
        let isa = dnnl_get_effective_cpu_isa().rawValue
        return isa & dnnl_cpu_isa_avx512_core.rawValue == dnnl_cpu_isa_avx512_core.rawValue
    }()

    /// Debian's oneDNN runs its primitives on OpenMP threads; this sets how
    /// many the calling thread's next primitives use (OpenMP's setting is per
    /// thread, so it is made before every creation and run).
    static func useThreads(_ count: Int) {
        setThreads?(Int32(max(1, count)))
    }

    private static let setThreads: (@convention(c) (Int32) -> Void)? = {
        // libgomp comes with libdnnl; only its versioned name is installed, so it is looked up, not linked.
        guard let symbol = dlsym(nil, "omp_set_num_threads") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32) -> Void).self)
    }()

    /// The error for oneDNN refusing or failing `what` of `primitive` (a name such as `convolution "conv_3"`).
    static func failure(_ primitive: String, _ what: String, _ status: dnnl_status_t? = nil) -> RuntimeError {
        let code = status.map { " (oneDNN status \($0.rawValue))" } ?? ""
        return .invalidParameters(model: "oneDNN \(primitive)", detail: "\(what) failed\(code)")
    }

    /// `DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1`: the second
    /// operand of the binary post-operation at `index` (a C macro Swift cannot import).
    static func postOperationSource(_ index: Int) -> Int32 {
        Int32(DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE) * Int32(index + 1) | Int32(DNNL_ARG_SRC_1)
    }

    /// A pool of streams: one run uses one stream at a time, and streams are not shared between threads.
    private static let streams = Locked<[DNNLStream]>([])

    /// Runs `body` with a stream no other thread is using.
    static func withStream<Result>(_ body: (DNNLStream) throws(RuntimeError) -> Result) throws(RuntimeError) -> Result {
        let stream: DNNLStream
        if let idle = streams.withLock({ $0.popLast() }) {
            stream = idle
        } else {
            guard let made = DNNLStream() else { throw failure("stream", "creating a stream") }
            stream = made
        }
        defer { streams.withLock { $0.append(stream) } }
        return try body(stream)
    }
}

/// oneDNN's engine handle; never destroyed (it lives as long as the process).
final class DNNLEngine: @unchecked Sendable {
    let handle: dnnl_engine_t
    init(handle: dnnl_engine_t) { self.handle = handle }
}

/// A oneDNN stream, used by one thread at a time (see `DNNL.withStream`).
final class DNNLStream: @unchecked Sendable {
    let handle: dnnl_stream_t

    init?() {
        var handle: dnnl_stream_t?
        guard let engine = DNNL.engine?.handle,
              dnnl_stream_create(&handle, engine, dnnl_stream_default_flags.rawValue) == dnnl_success, let handle
        else { return nil }
        self.handle = handle
    }

    deinit { dnnl_stream_destroy(handle) }
}

/// A oneDNN memory descriptor: float32 dimensions in a layout, plain (a
/// format tag) or the one a primitive chose (`any` before it chooses).
struct DNNLDescriptor: @unchecked Sendable {
    var raw: dnnl_memory_desc_t

    init(raw: dnnl_memory_desc_t) { self.raw = raw }

    /// `dims` in layout `tag` (`dnnl_nchw`, `dnnl_nhwc`, `dnnl_oihw`, `dnnl_format_tag_any`, …).
    init(_ dims: [Int], _ tag: dnnl_format_tag_t, type: dnnl_data_type_t = dnnl_f32) throws(RuntimeError) {
        var descriptor = dnnl_memory_desc_t()
        let status = dnnl_memory_desc_init_by_tag(&descriptor, Int32(dims.count), dims.map(Int64.init), type, tag)
        guard status == dnnl_success else { throw DNNL.failure("memory descriptor", "describing \(dims)", status) }
        raw = descriptor
    }

    /// `dims` with explicit element strides.
    init(_ dims: [Int], strides: [Int]) throws(RuntimeError) {
        var descriptor = dnnl_memory_desc_t()
        let status = dnnl_memory_desc_init_by_strides(&descriptor, Int32(dims.count), dims.map(Int64.init), dnnl_f32, strides.map(Int64.init))
        guard status == dnnl_success else { throw DNNL.failure("memory descriptor", "describing \(dims) with strides \(strides)", status) }
        raw = descriptor
    }

    /// The plain row-major layout for `dims` (`abcd…`).
    static func plain(_ dims: [Int]) throws(RuntimeError) -> DNNLDescriptor {
        let tags: [dnnl_format_tag_t] = [dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef]
        guard dims.count >= 1, dims.count <= tags.count else { throw DNNL.failure("memory descriptor", "describing rank \(dims.count)") }
        return try DNNLDescriptor(dims, tags[dims.count - 1])
    }

    /// The channels-last layout for `[N, C, spatial…]` dims (`acd…b`).
    static func channelsLast(_ dims: [Int]) throws(RuntimeError) -> DNNLDescriptor {
        let tags: [Int: dnnl_format_tag_t] = [3: dnnl_acb, 4: dnnl_acdb, 5: dnnl_acdeb]
        guard let tag = tags[dims.count] else { throw DNNL.failure("memory descriptor", "channels-last rank \(dims.count)") }
        return try DNNLDescriptor(dims, tag)
    }

    /// The channel-blocked layout for `[N, C, H, W]` dims in blocks of
    /// `width` channels (`nChw8c`: `[N, C/8, H, W, 8]`, what oneDNN's AVX2
    /// convolution kernels compute on natively; `nChw16c`, its AVX-512 ones
    /// and its Winograd kernels), `C` a multiple of `width`.
    static func channelBlocked(_ dims: [Int], width: Int) throws(RuntimeError) -> DNNLDescriptor {
        let tags: [Int: dnnl_format_tag_t] = [8: dnnl_nChw8c, 16: dnnl_nChw16c]
        guard dims.count == 4, let tag = tags[width], dims[1] % width == 0 else {
            throw DNNL.failure("memory descriptor", "channel blocks of \(width) of \(dims)")
        }
        return try DNNLDescriptor(dims, tag)
    }

    /// Bytes a buffer of this descriptor takes (padding of blocked layouts included).
    var bytes: Int {
        var copy = raw
        return dnnl_memory_desc_get_size(&copy)
    }

    /// Floats from the first element a buffer of this descriptor holds to
    /// its last, plus one: for a strided layout with no inner blocks (a block
    /// of columns of a larger matrix), less than `bytes` says, which counts
    /// every row's full stride.
    var span: Int {
        let blocking = raw.format_desc.blocking
        guard raw.format_kind == dnnl_blocked, blocking.inner_nblks == 0, raw.offset0 == 0 else { return bytes / 4 }
        let dims = withUnsafeBytes(of: raw.dims) { Array($0.bindMemory(to: Int64.self).prefix(Int(raw.ndims))) }
        let strides = withUnsafeBytes(of: blocking.strides) { Array($0.bindMemory(to: Int64.self).prefix(Int(raw.ndims))) }
        guard !dims.contains(where: { $0 <= 0 }) else { return 0 }
        return 1 + zip(dims, strides).reduce(0) { $0 + Int($1.0 - 1) * Int($1.1) }
    }

    /// Whether two descriptors describe the same layout.
    func matches(_ other: DNNLDescriptor) -> Bool {
        var a = raw, b = other.raw
        return dnnl_memory_desc_equal(&a, &b) != 0
    }

    /// `(rows, columns, row stride)` when this is a matrix of rows of
    /// contiguous columns (no blocks; each row may end in unused floats),
    /// the layout a slice of columns can be read from in place; `nil` otherwise.
    var plainRows: (rows: Int, columns: Int, stride: Int)? {
        let blocking = raw.format_desc.blocking
        guard raw.ndims == 2, raw.format_kind == dnnl_blocked, raw.offset0 == 0, blocking.inner_nblks == 0,
              raw.padded_dims.0 == raw.dims.0, raw.padded_dims.1 == raw.dims.1,
              blocking.strides.1 == 1, blocking.strides.0 >= raw.dims.1 else { return nil }
        return (Int(raw.dims.0), Int(raw.dims.1), Int(blocking.strides.0))
    }

    /// `(columns per block, floats per block)` when this is a matrix stored
    /// as blocks of whole columns one after another (oneDNN's AVX-512 weight
    /// layouts such as `BA16a64b`: every block holds all the rows of its
    /// columns, blocked inside), so a run of whole blocks is a contiguous
    /// part of it with the same layout; `nil` otherwise.
    var columnBlocks: (width: Int, floats: Int)? {
        let blocking = raw.format_desc.blocking
        guard raw.ndims == 2, raw.format_kind == dnnl_blocked, raw.offset0 == 0, blocking.inner_nblks > 0 else { return nil }
        let count = Int(blocking.inner_nblks)
        let sizes = withUnsafeBytes(of: blocking.inner_blks) { Array($0.bindMemory(to: Int64.self).prefix(count)) }
        let axes = withUnsafeBytes(of: blocking.inner_idxs) { Array($0.bindMemory(to: Int64.self).prefix(count)) }
        let rowBlock = Int(zip(sizes, axes).filter { $0.1 == 0 }.reduce(1) { $0 * $1.0 })
        let columnBlock = Int(zip(sizes, axes).filter { $0.1 == 1 }.reduce(1) { $0 * $1.0 })
        let paddedRows = Int(raw.padded_dims.0), rowStride = Int(blocking.strides.0), blockStride = Int(blocking.strides.1)
        // The row blocks of one column block lie one after another, and the column blocks after them.
        guard columnBlock > 1, paddedRows % rowBlock == 0, rowStride == rowBlock * columnBlock,
              blockStride == paddedRows / rowBlock * rowStride else { return nil }
        return (columnBlock, blockStride)
    }

    /// The layout of `width` columns of this matrix of blocks of whole
    /// columns, from the start of a block: the same blocking, fewer blocks.
    func blockedColumns(width: Int) -> DNNLDescriptor? {
        guard let blocks = columnBlocks, width > 0, width <= Int(raw.dims.1) else { return nil }
        var view = raw
        view.dims.1 = Int64(width)
        view.padded_dims.1 = Int64((width + blocks.width - 1) / blocks.width * blocks.width)
        return DNNLDescriptor(raw: view)
    }
}

/// Memory oneDNN owns, filled once at plan time (packed weights, a bias):
/// immutable afterwards, so any number of runs read it at once.
final class DNNLConstant: @unchecked Sendable {
    let memory: dnnl_memory_t
    let descriptor: DNNLDescriptor
    /// The constant whose buffer a view reads (kept alive as long as the view).
    private let viewed: DNNLConstant?

    private init(memory: dnnl_memory_t, descriptor: DNNLDescriptor, viewing viewed: DNNLConstant? = nil) {
        self.memory = memory
        self.descriptor = descriptor
        self.viewed = viewed
    }

    deinit { dnnl_memory_destroy(memory) }

    /// Bytes of its own buffer (none for a view).
    var bytes: Int { viewed == nil ? descriptor.bytes : 0 }

    /// Columns `first..<first + width` of this constant, a matrix of plain
    /// rows (`DNNLDescriptor.plainRows`) or of blocks of whole columns
    /// (`DNNLDescriptor.columnBlocks`), read where they are: nothing is
    /// copied. `nil` for other layouts, or when the columns are not there
    /// (or, blocked, do not start a block).
    func columns(_ first: Int, width: Int) -> DNNLConstant? {
        guard width > 0 else { return nil }
        if let matrix = descriptor.plainRows { return block(rows: 0..<matrix.rows, columns: first..<(first + width)) }
        return blockedColumns(first, width: width)
    }

    /// Columns `first..<first + width` of a constant stored as blocks of
    /// whole columns (`DNNLDescriptor.columnBlocks`), read where they are:
    /// `first` must start a block; the view has the same blocking.
    private func blockedColumns(_ first: Int, width: Int) -> DNNLConstant? {
        guard let engine = DNNL.engine?.handle, let blocks = descriptor.columnBlocks, first >= 0, first % blocks.width == 0,
              first + width <= Int(descriptor.raw.dims.1), let view = descriptor.blockedColumns(width: width) else { return nil }
        var raw = view.raw
        var handle: UnsafeMutableRawPointer?
        guard dnnl_memory_get_data_handle(memory, &handle) == dnnl_success, let handle else { return nil }
        var made: dnnl_memory_t?
        guard dnnl_memory_create(&made, &raw, engine, handle + first / blocks.width * blocks.floats * 4) == dnnl_success,
              let made else { return nil }
        return DNNLConstant(memory: made, descriptor: view, viewing: self)
    }

    /// Rows `first..<first + count` of this constant, a matrix of plain
    /// rows, read where they are (a contiguous part of it); `nil` as for `columns`.
    func rows(_ first: Int, count: Int) -> DNNLConstant? {
        guard count > 0, let matrix = descriptor.plainRows else { return nil }
        return block(rows: first..<(first + count), columns: 0..<matrix.columns)
    }

    /// A block of this constant's plain rows, viewed in place (the ranges
    /// are formed by the callers, which check their counts are positive).
    private func block(rows: Range<Int>, columns: Range<Int>) -> DNNLConstant? {
        guard let engine = DNNL.engine?.handle, let matrix = descriptor.plainRows, !rows.isEmpty, !columns.isEmpty, rows.lowerBound >= 0,
              rows.upperBound <= matrix.rows, columns.lowerBound >= 0, columns.upperBound <= matrix.columns,
              let view = try? DNNLDescriptor([rows.count, columns.count], strides: [matrix.stride, 1]) else { return nil }
        var handle: UnsafeMutableRawPointer?
        guard dnnl_memory_get_data_handle(memory, &handle) == dnnl_success, let handle else { return nil }
        var raw = view.raw
        var made: dnnl_memory_t?
        guard dnnl_memory_create(&made, &raw, engine, handle + (rows.lowerBound * matrix.stride + columns.lowerBound) * 4) == dnnl_success,
              let made else { return nil }
        return DNNLConstant(memory: made, descriptor: view, viewing: self)
    }

    /// `values`, laid out as `given` says, reordered once into `wanted` (the
    /// layout a primitive chose for its weights).
    static func packed(_ values: UnsafeBufferPointer<Float>, given: DNNLDescriptor, wanted: DNNLDescriptor,
                       for primitive: String) throws(RuntimeError) -> DNNLConstant {
        guard let engine = DNNL.engine?.handle else { throw DNNL.failure(primitive, "oneDNN is unavailable") }
        guard values.count >= given.span else { throw DNNL.failure(primitive, "packing \(values.count) weights into \(given.span)") }
        var target: dnnl_memory_t?
        var wantedRaw = wanted.raw
        let status = dnnl_memory_create(&target, &wantedRaw, engine, DNNL.allocate)
        guard status == dnnl_success, let target else { throw DNNL.failure(primitive, "allocating packed weights", status) }
        let constant = DNNLConstant(memory: target, descriptor: wanted)
        var givenRaw = given.raw
        var source: dnnl_memory_t?
        let made = dnnl_memory_create(&source, &givenRaw, engine, UnsafeMutableRawPointer(mutating: values.baseAddress))
        guard made == dnnl_success, let source else { throw DNNL.failure(primitive, "wrapping the weights", made) }
        defer { dnnl_memory_destroy(source) }
        // oneDNN transforms weights into its Winograd layout with its reference code (ResNet-18's 13: 163 ms on one
        // thread, a model's first prediction): that reorder, once per model, runs on every core (2 cores: 25 → 14 ms
        // for 512 × 512 × 3 × 3).
        let everyCore = wanted.raw.format_kind == dnnl_format_kind_wino
        if everyCore { DNNL.useThreads(ThreadTeam.cores) }
        defer { if everyCore { DNNL.useThreads(1) } }
        try DNNL.reorder(from: source, to: target, for: primitive)
        return constant
    }
}

extension DNNL {
    /// oneDNN's `DNNL_MEMORY_ALLOCATE`: the library allocates the buffer.
    static var allocate: UnsafeMutableRawPointer? { UnsafeMutableRawPointer(bitPattern: -1) }

    /// Copies `source` into `target`, converting between their layouts.
    static func reorder(from source: dnnl_memory_t, to target: dnnl_memory_t, for primitive: String) throws(RuntimeError) {
        guard let engine = engine?.handle else { throw failure(primitive, "oneDNN is unavailable") }
        var sourceDescriptor: UnsafePointer<dnnl_memory_desc_t>?, targetDescriptor: UnsafePointer<dnnl_memory_desc_t>?
        guard dnnl_memory_get_memory_desc(source, &sourceDescriptor) == dnnl_success, let sourceDescriptor,
              dnnl_memory_get_memory_desc(target, &targetDescriptor) == dnnl_success, let targetDescriptor
        else { throw failure(primitive, "reading a reorder's descriptors") }
        var description: dnnl_primitive_desc_t?
        let described = dnnl_reorder_primitive_desc_create(&description, sourceDescriptor, engine, targetDescriptor, engine, nil)
        guard described == dnnl_success, let description else { throw failure(primitive, "describing a reorder", described) }
        defer { dnnl_primitive_desc_destroy(description) }
        var reorder: dnnl_primitive_t?
        let created = dnnl_primitive_create(&reorder, description)
        guard created == dnnl_success, let reorder else { throw failure(primitive, "creating a reorder", created) }
        defer { dnnl_primitive_destroy(reorder) }
        var arguments = [dnnl_exec_arg_t(arg: DNNL_ARG_FROM, memory: source), dnnl_exec_arg_t(arg: DNNL_ARG_TO, memory: target)]
        try withStream { stream throws(RuntimeError) in
            let status = dnnl_primitive_execute(reorder, stream.handle, 2, &arguments)
            guard status == dnnl_success, dnnl_stream_wait(stream.handle) == dnnl_success else { throw failure(primitive, "running a reorder", status) }
        }
    }
}

/// The post-operations oneDNN applies to a primitive's result before it is
/// written: eltwise functions and binary operations with a second tensor.
struct DNNLPostOperations: Sendable {
    enum Step: Sendable, Equatable {
        /// `dnnl_eltwise_*` with its alpha and beta.
        case eltwise(UInt32, alpha: Float, beta: Float)
        /// `dnnl_binary_add` (or another `dnnl_binary_*`) with a second tensor of `dims`, read from the
        /// run argument `DNNL.postOperationSource(index)` where `index` is this step's position.
        case binary(UInt32, dims: [Int], channelsLast: Bool)
        /// Adds what the destination held before the run (oneDNN's sum post-operation; one per primitive).
        case sum
    }

    var steps: [Step] = []

    var isEmpty: Bool { steps.isEmpty }

    /// The positions of the binary steps: each needs its tensor when the primitive runs.
    var binaryIndices: [Int] {
        steps.indices.filter { if case .binary = steps[$0] { return true } else { return false } }
    }

    /// Sets these post-operations on `attributes`.
    func apply(to attributes: dnnl_primitive_attr_t, for primitive: String) throws(RuntimeError) {
        guard !steps.isEmpty else { return }
        var handle: dnnl_post_ops_t?
        guard dnnl_post_ops_create(&handle) == dnnl_success, let handle else { throw DNNL.failure(primitive, "creating post-operations") }
        defer { dnnl_post_ops_destroy(handle) }
        for step in steps {
            let status: dnnl_status_t
            switch step {
            case .eltwise(let kind, let alpha, let beta):
                status = dnnl_post_ops_append_eltwise(handle, 1, dnnl_alg_kind_t(kind), alpha, beta)
            case .binary(let kind, let dims, let channelsLast):
                var descriptor = try channelsLast ? DNNLDescriptor.channelsLast(dims) : DNNLDescriptor.plain(dims)
                status = dnnl_post_ops_append_binary(handle, dnnl_alg_kind_t(kind), &descriptor.raw)
            case .sum:
                status = dnnl_post_ops_append_sum(handle, 1)
            }
            guard status == dnnl_success else { throw DNNL.failure(primitive, "adding post-operation \(step)", status) }
        }
        let set = dnnl_primitive_attr_set_post_ops(attributes, handle)
        guard set == dnnl_success else { throw DNNL.failure(primitive, "setting post-operations", set) }
    }
}
