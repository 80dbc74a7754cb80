/// A value read as a stack of matrices lying in another value's bytes:
/// batch matrix `b` is the `rows × columns` elements (rows one after
/// another) of `source` from element `offsets[b]`.
///
/// Data movement that keeps each matrix's rows whole — slicing rows,
/// transposing, tiling or reshaping the batch axes — only rearranges which
/// matrix sits where, so a kernel reading batches of matrices (attention)
/// can read them where they already are: a decoder's grouped-query key and
/// value heads out of its cache, instead of through the copies a converter
/// writes to slice, repeat and transpose them (tile, transpose, reshape).
/// The copies then have no reader left and are not run
/// (`Planner.removeUnreadCopies`).
struct MatrixStack: Sendable, Equatable {
    var source: Int
    var offsets: [Int]
    var rows: Int
    var columns: Int

    /// Batches beyond which a stack is not worth describing (its offsets are made at plan time).
    static let batchLimit = 4_096

    /// A computed value as it lies: its own matrices, one after another.
    init?(_ value: PlanValue) {
        guard value.constant == nil, value.rank >= 2 else { return nil }
        let rows = value.shape[value.rank - 2], columns = value.shape[value.rank - 1], batches = value.shape.dropLast(2).reduce(1, *)
        guard batches <= Self.batchLimit else { return nil }
        self.init(source: value.id, offsets: (0..<batches).map { $0 * rows * columns }, rows: rows, columns: columns)
    }

    init(source: Int, offsets: [Int], rows: Int, columns: Int) {
        self.source = source
        self.offsets = offsets
        self.rows = rows
        self.columns = columns
    }

    /// The stack of a copy of this one's value (of `shape`) that reads the
    /// element at `offset + Σ index · strides` for each index of `shape`
    /// (a slice or a transpose): whole rows of one matrix, or `nil`.
    func copied(from shape: [Int], offset: Int, strides: [Int], to output: [Int]) -> MatrixStack? {
        let rank = output.count
        guard rank >= 2, shape.count >= 2 else { return nil }
        let rows = output[rank - 2], columns = output[rank - 1], matrix = self.rows * self.columns
        guard columns == self.columns, columns == 1 || strides[rank - 1] == 1, rows == 1 || strides[rank - 2] == columns, matrix > 0 else { return nil }
        let batch = Array(output.dropLast(2)), batchStrides = Array(strides.dropLast(2))
        guard batch.reduce(1, *) <= Self.batchLimit else { return nil }
        var result: [Int] = []
        var failed = false
        Shapes.forEachIndex(batch) { index in
            let flat = offset + zip(index, batchStrides).reduce(0) { $0 + $1.0 * $1.1 }
            let (which, within) = flat.quotientAndRemainder(dividingBy: matrix)
            guard !failed, which < offsets.count, within + rows * columns <= matrix else {
                failed = true
                return
            }
            result.append(offsets[which] + within)
        }
        return failed ? nil : MatrixStack(source: source, offsets: result.isEmpty ? [offsets[0]] : result, rows: rows, columns: columns)
    }

    /// The stack of this one's value (of `shape`) tiled `reps` times along
    /// its batch axes (the matrices themselves not tiled), or `nil`.
    func tiled(from shape: [Int], reps: [Int]) -> MatrixStack? {
        let rank = shape.count
        guard rank >= 2, reps.count == rank, reps[rank - 1] == 1, reps[rank - 2] == 1 else { return nil }
        let batch = Array(shape.dropLast(2)), output = zip(batch, reps).map { $0 * $1 }
        guard output.reduce(1, *) <= Self.batchLimit else { return nil }
        let strides = Shapes.strides(batch)
        var result: [Int] = []
        Shapes.forEachIndex(output) { index in
            result.append(offsets[index.indices.reduce(0) { $0 + (index[$1] % batch[$1]) * strides[$1] }])
        }
        return MatrixStack(source: source, offsets: result.isEmpty ? [offsets[0]] : result, rows: rows, columns: columns)
    }

    /// The stack of this one's value (of `shape`, at least rank 3) with each
    /// index of its third axis from the end repeated `repeats` times in a row
    /// (`repeat_interleave` of a decoder's key/value heads), or `nil`.
    func repeatedHeads(from shape: [Int], repeats: Int) -> MatrixStack? {
        guard shape.count >= 3, repeats >= 1, offsets.count * repeats <= Self.batchLimit else { return nil }
        return MatrixStack(source: source, offsets: offsets.flatMap { Array(repeating: $0, count: repeats) }, rows: rows, columns: columns)
    }

    /// The stack of this one's value viewed as `output` (a reshape): the same
    /// matrices where the last two dimensions stay, else `nil`.
    func reshaped(from shape: [Int], to output: [Int]) -> MatrixStack? {
        guard shape.count >= 2, output.count >= 2, Array(shape.suffix(2)) == Array(output.suffix(2)) else { return nil }
        return self
    }
}

extension Planner {
    /// The stack `value` may be read as by a step planned now: the one a
    /// copy recorded, while no step since has written its source in place;
    /// else the value as it lies.
    func readableStack(of value: PlanValue) -> MatrixStack? {
        liveRecordedStack(value.id) ?? MatrixStack(value)
    }

    /// The stack recorded for value `id`, while no step since it was recorded has written its source in place.
    private func liveRecordedStack(_ id: Int) -> MatrixStack? {
        guard let (stack, from) = recordedStacks[id], (lastWrite[aliasRoot(stack.source)] ?? -1) < from else { return nil }
        return stack
    }

    /// Records that `id` (made by the next step) may be read as `stack`.
    func record(_ stack: MatrixStack?, for id: Int) {
        guard let stack, viewsAllowed, stack.source != id else { return }
        recordedStacks[id] = (stack, steps.count)
    }

    /// The recorded stack of `value`, when it has one other than itself (as
    /// `readableStack` would give it, without describing the value's own).
    func recordedStack(of value: PlanValue) -> MatrixStack? {
        liveRecordedStack(value.id).flatMap { $0.source == value.id ? nil : $0 }
    }
}
