/// Rewrites around program states (a decoder's key/value caches) so that a
/// step touches only the positions it changes:
///
/// - `read_state` → (`cast` to fp32) → `slice_update` → (`cast` to fp16) →
///   `write_state` of the same state, as `ct.convert` writes a cache update
///   (`cache[..., begin:end, :] = new`), becomes one `update_state_slice`
///   that writes the update into the state where it lives (rounded to fp16
///   when the cast back did that), instead of copying the whole cache three
///   times;
/// - a `read_state` after which nothing writes that state becomes
///   `read_state_view`: the state's bytes, not a copy.
///
/// With `TensorEngine` binding a state's storage into the plan (no copy in
/// or out per prediction), a one-token step of GPT-2 reads and writes its
/// caches in place.
enum StateFusion {
    static let rules: [FusionRule] = [sliceUpdate, view]

    /// The state an operation reads or writes (`input` of `read_state`/`write_state`, `state` of the others).
    private static func state(of op: GraphOperation) -> String? {
        let key = op.type == "coreml_update_state" || op.type == "update_state_slice" ? "state" : "input"
        guard ["read_state", "write_state", "coreml_update_state", "update_state_slice", "read_state_view"].contains(op.type),
              case .value(let name)? = op.arguments[key]?.first
        else { return nil }
        return name
    }

    /// `write_state(s, cast?(slice_update(cast?(read_state(s)), update)))` → `update_state_slice(s, update)`.
    static let sliceUpdate = FusionRule("state slice update in place") { graph, index in
        guard let write = graph.operation(at: index), write.type == "write_state", write.outputs.isEmpty,
              Set(write.arguments.keys) == ["input", "data"], let target = state(of: write)
        else { return false }
        var removed = [index]
        guard var (current, currentOp) = graph.privateProducer(of: write, "data") else { return false }
        var roundToHalf = false
        if currentOp.type == "cast" {
            guard graph.constant(currentOp, "dtype")?.strings.first == "fp16", currentOp.outputs[0].type.element == .float16,
                  let (next, nextOp) = graph.privateProducer(of: currentOp, "x"), nextOp.outputs[0].type.element.isFloat
            else { return false }
            roundToHalf = nextOp.outputs[0].type.element != .float16
            removed.append(current)
            (current, currentOp) = (next, nextOp)
        }
        guard currentOp.type == "slice_update", currentOp.outputs[0].type.element.isFloat, let update = currentOp.arguments["update"]?.first,
              graph.computed(currentOp, "update") != nil
        else { return false }
        let slice = currentOp
        removed.append(current)
        // The slice's source: the state as read (a copy other operations may read too: it stays, holding the
        // values from before the update), or a private cast of that read.
        var readIsPrivate = true
        guard let sourceName = graph.computed(slice, "x"), var source = graph.producer(of: sourceName),
              var sourceOp = graph.operation(at: source) else { return false }
        if sourceOp.type == "cast" {
            // A cast that keeps the values (fp16 state to fp32).
            guard graph.isPrivate(sourceName), let dtype = graph.constant(sourceOp, "dtype")?.strings.first, dtype == "fp32" || dtype == "fp16",
                  let readName = graph.computed(sourceOp, "x"), let next = graph.producer(of: readName), let nextOp = graph.operation(at: next),
                  nextOp.outputs[0].type.element == .float16 || dtype == "fp32"
            else { return false }
            removed.append(source)
            readIsPrivate = graph.isPrivate(readName)
            (source, sourceOp) = (next, nextOp)
        } else {
            readIsPrivate = graph.isPrivate(sourceName)
        }
        guard sourceOp.type == "read_state", state(of: sourceOp) == target, sourceOp.blocks.isEmpty else { return false }
        // Nothing between the read and the write may write the state (the update moves to the write).
        for between in (source + 1)..<index {
            guard let op = graph.operation(at: between) else { continue }
            if !op.blocks.isEmpty || (op.type != "read_state" && op.type != "read_state_view" && state(of: op) == target) { return false }
        }
        if readIsPrivate { removed.append(source) }
        var arguments = slice.arguments
        arguments["x"] = nil
        arguments["update"] = [update]
        arguments["state"] = [.value(target)]
        if roundToHalf { arguments["round_to_half"] = [.constant(Tensor(ints: [1], shape: [], type: .bool))] }
        graph.replace(removed, with: GraphOperation(type: "update_state_slice", arguments: arguments, outputs: [], blocks: [])
            .rewritten(from: slice))
        return true
    }

    /// Operations that write their result into a buffer of their own (never
    /// a view of their input), read by a state's view before the state's next write.
    private static let copyingReaders: Set<String> = ["slice_by_index", "slice_by_size", "gather", "transpose", "scaled_dot_product_attention"]

    /// `read_state(s)` → `read_state_view(s)` when no write of `s` follows it,
    /// or when everything that reads it copies what it reads before the next
    /// write of `s` (a decoder's layers each reading the cache its layer just updated).
    static let view = FusionRule("state read as a view") { graph, index in
        guard let read = graph.operation(at: index), read.type == "read_state", read.outputs.count == 1,
              Set(read.arguments.keys) == ["input"], let target = state(of: read)
        else { return false }
        for later in (index + 1)..<max(index + 1, graph.count) {
            guard let op = graph.operation(at: later) else { continue }
            // Nested blocks (loops) may write states too: leave those programs alone.
            if !op.blocks.isEmpty { return false }
            guard op.type != "read_state", op.type != "read_state_view", state(of: op) == target else { continue }
            // The next write: every reader must come before it and copy what it reads.
            let name = read.outputs[0].name
            let readers = graph.readers(of: name)
            guard FusionGraph.readersAre(graph, name, readers),
                  readers.allSatisfy({ $0 < later && graph.operation(at: $0).map { copyingReaders.contains($0.type) } == true })
            else { return false }
            break
        }
        var rewritten = read
        rewritten.type = "read_state_view"
        graph.update(index, to: rewritten.rewritten(from: read))
        return true
    }
}
