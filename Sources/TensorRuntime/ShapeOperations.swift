import ModelFeatures

/// Operations that move elements without computing on them: reshapes
/// (no copy), transposes, slices, concatenation, splits, tiles, pads, and
/// the operations that make tensors from shapes (`shape`, `fill`, `range_1d`).
/// They copy 4-byte elements, so one kernel serves every data type; those a
/// decoder's fp16 cache goes through (reshapes, transposes, slices, tiles)
/// take it as it lies (`storedInput`): as a view of its halves, or copied
/// into floats.
enum ShapeOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "reshape": OperationDefinition(["x", "shape", zerosFromEnd]) { context throws(RuntimeError) in try reshape(context) }.withFacts(reshapeFacts),
        "reshape_like": OperationDefinition(["x", "ref_tensors", "begins", "ends", "end_masks"]) { context throws(RuntimeError) in
            try reshapeLike(context)
        }.withFacts(reshapeLikeFacts),
        "expand_dims": OperationDefinition(["x", "axes"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            let axes = try context.ints("axes") ?? [0]
            let rank = x.rank + axes.count
            var resolved: [Int] = []
            for axis in axes { resolved.append(try context.axis(axis, rank: rank, key: "axes")) }
            var shape = x.shape
            for axis in resolved.sorted() { shape.insert(1, at: min(axis, shape.count)) }
            try context.alias(x, shape: shape)
        }.withFacts(expandDimsFacts),
        "squeeze": OperationDefinition(["x", "axes"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            var drop = Set<Int>()
            if let axes = try context.ints("axes") {
                for axis in axes {
                    let resolved = try context.axis(axis, rank: x.rank, key: "axes")
                    guard x.shape[resolved] == 1 else { throw context.invalid("axes: axis \(axis) has size \(x.shape[resolved]), not 1") }
                    drop.insert(resolved)
                }
            } else {
                drop = Set(x.shape.indices.filter { x.shape[$0] == 1 })
            }
            try context.alias(x, shape: x.shape.indices.filter { !drop.contains($0) }.map { x.shape[$0] })
        }.withFacts(squeezeFacts),
        "flatten2d": OperationDefinition(["x", "axis"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            let axis = try context.int("axis", 1)
            let split = axis < 0 ? axis + x.rank : axis
            guard split >= 0, split <= x.rank else { throw context.invalid("axis \(axis) of a rank-\(x.rank) tensor") }
            try context.alias(x, shape: [x.shape[..<split].reduce(1, *), x.shape[split...].reduce(1, *)])
        }.withFacts(flattenFacts),
        "transpose": OperationDefinition(["x", "perm"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            let given = try context.ints("perm") ?? Array(x.shape.indices.reversed())
            var perm: [Int] = []
            for axis in given { perm.append(try context.axis(axis, rank: x.rank, key: "perm")) }
            guard perm.count == x.rank, Set(perm).count == x.rank else { throw context.invalid("perm \(given) is not a permutation of \(x.rank) axes") }
            let strides = Shapes.strides(x.shape)
            try copy(context, x, offset: 0, strides: perm.map { strides[$0] }, shape: perm.map { x.shape[$0] })
        }.withFacts(transposeFacts),
        "reverse": OperationDefinition(["x", "axes"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            var strides = Shapes.strides(x.shape)
            var offset = 0
            let axes = try context.ints("axes") ?? Array(x.shape.indices)
            for axis in axes {
                let resolved = try context.axis(axis, rank: x.rank, key: "axes")
                offset += (x.shape[resolved] - 1) * strides[resolved]
                strides[resolved] = -strides[resolved]
            }
            try copy(context, x, offset: offset, strides: strides, shape: x.shape)
        }.withFacts(FactsRules.same()),
        "slice_by_index": OperationDefinition(["x", "begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"]) { context throws(RuntimeError) in
            try sliceByIndex(context)
        }.withFacts(sliceByIndexFacts),
        "slice_by_size": OperationDefinition(["x", "begin", "size"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            guard let size = try context.ints("size"), size.count == x.rank else { throw context.invalid("size needs \(x.rank) values") }
            let beginValue = try context.input("begin")
            guard let begin = beginValue.constant?.ints else {
                // A begin computed at run time: the shape is the size's, the offset found at prediction.
                try sliceAtRunTime(context, context.widened(x), begin: beginValue, size: size)
                return
            }
            guard begin.count == x.rank else { throw context.invalid("begin needs \(x.rank) values") }
            let strides = Shapes.strides(x.shape)
            var offset = 0, shape: [Int] = []
            for axis in 0..<x.rank {
                let start = begin[axis] < 0 ? begin[axis] + x.shape[axis] : begin[axis]
                let length = size[axis] == -1 ? x.shape[axis] - start : size[axis]
                guard start >= 0, length >= 0, start + length <= x.shape[axis] else {
                    throw context.invalid("begin \(begin[axis]) size \(size[axis]) do not fit axis \(axis) of size \(x.shape[axis])")
                }
                offset += start * strides[axis]
                shape.append(length)
            }
            try copy(context, x, offset: offset, strides: strides, shape: shape)
        }.withFacts(sliceBySizeFacts),
        "concat": OperationDefinition(["values", "axis", "interleave"]) { context throws(RuntimeError) in try concat(context) }.withFacts(concatFacts),
        "stack": OperationDefinition(["values", "axis"]) { context throws(RuntimeError) in
            let values = try context.list("values")
            guard let first = values.first, values.allSatisfy({ $0.shape == first.shape }) else {
                throw context.invalid("stack needs values of one shape")
            }
            let axis = try context.axis(try context.int("axis", 0), rank: first.rank + 1)
            var shape = first.shape
            shape.insert(values.count, at: axis)
            try stack(context, values, outer: first.shape[..<axis].reduce(1, *), inner: first.shape[axis...].reduce(1, *), shape: shape)
        }.withFacts(stackFacts),
        "split": OperationDefinition(["x", "num_splits", "split_sizes", "axis"]) { context throws(RuntimeError) in try split(context) }.withFacts(splitFacts),
        "tile": OperationDefinition(["x", "reps"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            guard let reps = try context.ints("reps"), reps.count == x.rank, reps.allSatisfy({ $0 >= 0 }) else {
                throw context.invalid("reps needs \(x.rank) non-negative values")
            }
            try tile(context, x, reps: reps)
        }.withFacts(tileFacts),
        "pad": OperationDefinition(["x", "pad", "mode", "constant_val"]) { context throws(RuntimeError) in try pad(context) }.withFacts(padFacts),
        "shape": OperationDefinition(["x"]) { context throws(RuntimeError) in
            let x = try context.input()
            context.output(constant: Tensor(ints: x.shape.map { Int32($0) }, shape: [x.rank]))
        }.withFacts(shapeFacts),
        "fill": OperationDefinition(["shape", "value"]) { context throws(RuntimeError) in
            guard let shape = try context.ints("shape") else { throw context.invalid("no shape") }
            try fill(context, shape: shape)
        }.withFacts(fillFacts),
        "fill_like": OperationDefinition(["ref_tensor", "value"]) { context throws(RuntimeError) in
            try fill(context, shape: try context.input("ref_tensor").shape)
        }.withFacts(fillLikeFacts),
        "range_1d": OperationDefinition(["start", "end", "step"]) { context throws(RuntimeError) in
            guard let start = try context.constant("start")?.scalar, let end = try context.constant("end")?.scalar,
                  let step = try context.constant("step")?.scalar, step != 0 else {
                throw context.invalid("start, end and a non-zero step are required")
            }
            let count = max(0, Int(((end - start) / step).rounded(.up)))
            let values = (0..<count).map { start + Double($0) * step }
            context.output(constant: context.outputType().isFloat ? Tensor(floats: values.map(Float.init), shape: [count])
                : Tensor(ints: values.map { Int32(clamping: Int($0)) }, shape: [count]))
        }.withFacts(rangeFacts),
        // How many elements are non-zero decides the shape: planned once x is known (at run time, a stage of its own).
        "non_zero": OperationDefinition(["x"]) { context throws(RuntimeError) in
            guard let x = try context.constant("x") else { throw context.invalid("input x is missing") }
            let strides = Shapes.strides(x.shape)
            var indices: [Int32] = []
            for (position, value) in x.doubles.enumerated() where value != 0 {
                for axis in x.shape.indices { indices.append(Int32(position / strides[axis] % x.shape[axis])) }
            }
            context.output(constant: Tensor(ints: indices, shape: [indices.count / max(x.shape.count, 1), x.shape.count]))
        }.withFacts(nonZeroFacts),
        "band_part": OperationDefinition(["x", "lower", "upper"]) { context throws(RuntimeError) in
            let x = try context.input()
            guard x.rank >= 2 else { throw context.invalid("x has rank \(x.rank); band_part needs 2 or more") }
            let lower = try context.int("lower", -1), upper = try context.int("upper", -1)
            let rows = x.shape[x.rank - 2], columns = x.shape[x.rank - 1], count = x.count, from = x.id
            let out = try context.output(x.shape)
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.ints(from), target = buffers.ints(out)
                for index in 0..<count {
                    let i = index / columns % rows, j = index % columns
                    let keep = (lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper)
                    target[index] = keep ? source[index] : 0
                }
            }
        }.withFacts(FactsRules.same()),
    ]

    /// Operations only the engine's passes make (a program file naming one is refused).
    static let internalDefinitions: [String: OperationDefinition] = [
        // Neural networks have no rank-0 blobs: a squeeze of every size-1 axis of (1,) or (1, 1)
        // gives (1,). Internal to the network lowering, whose ranks are only known at plan time.
        "at_least_rank1": OperationDefinition(["x"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            try context.alias(x, shape: x.rank == 0 ? [1] : x.shape)
        }.withFacts(atLeastRank1Facts),
    ]

    // MARK: Kernels shared by the operations

    /// Copies `x` read at `offset` with `strides` (in elements, any sign) into a new `shape` output
    /// (an `x` held narrower than computed is widened as it is copied).
    static func copy(_ context: OperationContext, _ x: PlanValue, offset: Int, strides: [Int], shape: [Int]) throws(RuntimeError) {
        // One contiguous run of x (a transpose moving only axes of one element, a slice of whole inner axes): read in place.
        if isContiguousRun(strides: strides, shape: shape), shape.reduce(1, *) > 0, context.view(x, offset: offset, shape: shape) { return }
        let out = try context.output(shape)
        let from = x.id, step = strides.last ?? 0
        let contiguous = strides == Shapes.strides(shape)
        let count = shape.reduce(1, *)
        let stack = context.stack(of: x)?.copied(from: x.shape, offset: offset, strides: strides, to: shape)
        if x.isNarrow {
            let storage = x.storage, width = storage.byteWidth
            context.runCopy(of: x, into: out, stack: stack) { buffers in
                let source = UnsafeRawPointer(buffers.raw(from)), target = buffers.raw(out)
                if contiguous {
                    ElementConversion.widen(source + offset * width, storage: storage, count: count, into: target)
                    return
                }
                Shapes.walk(shape, [strides]) { o, offsets, n in
                    let start = offset + offsets[0]
                    if step == 1 {
                        ElementConversion.widen(source + start * width, storage: storage, count: n, into: target + o * 4)
                    } else {
                        for k in 0..<n { ElementConversion.widen(source + (start + k * step) * width, storage: storage, count: 1, into: target + (o + k) * 4) }
                    }
                }
            }
            return
        }
        context.runCopy(of: x, into: out, stack: stack) { buffers in
            let source = buffers.ints(from) + offset, target = buffers.ints(out)
            if contiguous {
                target.update(from: source, count: count)
                return
            }
            Shapes.walk(shape, [strides]) { o, offsets, n in
                let s = source + offsets[0]
                if step == 1 { (target + o).update(from: s, count: n) } else { for k in 0..<n { target[o + k] = s[k * step] } }
            }
        }
    }

    /// Whether elements read with `strides` in `shape`'s order are one run of
    /// consecutive elements (the strides of axes of one element never matter).
    static func isContiguousRun(strides: [Int], shape: [Int]) -> Bool {
        var expected = 1
        for axis in shape.indices.reversed() where shape[axis] != 1 {
            guard strides[axis] == expected else { return false }
            expected *= shape[axis]
        }
        return true
    }

    /// `slice_by_size` with `begin` computed at run time: every size must be
    /// given (no −1), so the output's shape is known now; a begin that does
    /// not fit is an error at prediction naming the operation.
    private static func sliceAtRunTime(_ context: OperationContext, _ x: PlanValue, begin: PlanValue, size: [Int]) throws(RuntimeError) {
        // A size of -1 takes the rest of the axis: the shape depends on begin's values.
        guard size.allSatisfy({ $0 >= 0 }) else { throw context.runTimeValueNeeded("begin") }
        guard begin.count == x.rank, !begin.isFloat else { throw context.invalid("begin needs \(x.rank) integer values") }
        for axis in 0..<x.rank where size[axis] > x.shape[axis] {
            throw context.invalid("size \(size[axis]) on axis \(axis) of size \(x.shape[axis])")
        }
        let out = try context.output(size)
        let strides = Shapes.strides(x.shape), shape = x.shape, from = x.id, at = begin.id, name = context.op.name
        let step = strides.last ?? 1
        context.run(reads: [x, begin], writes: [out]) { buffers throws(RuntimeError) in
            var offset = 0
            for axis in 0..<shape.count {
                var start = Int(buffers.ints(at)[axis])
                if start < 0 { start += shape[axis] }
                guard start >= 0, start + size[axis] <= shape[axis] else {
                    throw .invalidValue(feature: name, detail: "begin \(buffers.ints(at)[axis]) with size \(size[axis]) does not fit axis \(axis) of size \(shape[axis])")
                }
                offset += start * strides[axis]
            }
            let source = buffers.ints(from) + offset, target = buffers.ints(out)
            Shapes.walk(size, [strides]) { o, offsets, n in
                for k in 0..<n { target[o + k] = source[offsets[0] + k * step] }
            }
        }
    }

    /// A `shape` output whose element at each multi-index is `x`'s element at `source(index)`.
    static func indexed(_ context: OperationContext, _ x: PlanValue, shape: [Int], _ source: @escaping @Sendable ([Int]) -> Int) throws(RuntimeError) {
        let out = try context.output(shape)
        let from = x.id
        // The source positions are the same every run: computed once, now.
        var table: [Int32] = []
        table.reserveCapacity(shape.reduce(1, *))
        Shapes.forEachIndex(shape) { table.append(Int32(source($0))) }
        let positions = table
        context.run(reads: [x], writes: [out]) { buffers in
            let values = buffers.ints(from), target = buffers.ints(out)
            for index in positions.indices { target[index] = values[Int(positions[index])] }
        }
    }

    /// `x` repeated `reps[axis]` times along each axis: every row of the
    /// output (all axes but the last) is its source row of `x`, found by an
    /// odometer as the rows are written, copied `reps.last` times. Nothing
    /// per element at plan time: a decoder's every step plans its tiles anew.
    private static func tile(_ context: OperationContext, _ x: PlanValue, reps: [Int]) throws(RuntimeError) {
        let shape = zip(x.shape, reps).map { $0 * $1 }
        let out = try context.output(shape)
        guard x.rank > 0, !shape.contains(0) else {
            let x = context.widened(x)
            context.run(reads: [x], writes: [out]) { buffers in
                if x.rank == 0 { buffers.ints(out)[0] = buffers.ints(x.id)[0] }
            }
            return
        }
        let from = x.id, width = x.shape[x.rank - 1], copies = reps[x.rank - 1]
        let outer = Array(shape.dropLast()), sourceOuter = Array(x.shape.dropLast())
        let rows = outer.reduce(1, *)
        let storage = x.storage, narrow = x.isNarrow
        context.runCopy(of: x, into: out, stack: context.stack(of: x)?.tiled(from: x.shape, reps: reps)) { buffers in
            let values = buffers.ints(from)
            var target = buffers.ints(out)
            var index = [Int](repeating: 0, count: outer.count)
            for _ in 0..<rows {
                var row = 0
                for axis in outer.indices { row = row * sourceOuter[axis] + index[axis] % sourceOuter[axis] }
                if !narrow {
                    let source = values + row * width
                    for _ in 0..<copies {
                        target.update(from: source, count: width)
                        target += width
                    }
                } else {
                    // A row of narrower elements widened once, then copied from the first copy.
                    let first = target
                    ElementConversion.widen(UnsafeRawPointer(values) + row * width * storage.byteWidth, storage: storage, count: width, into: UnsafeMutableRawPointer(target))
                    target += width
                    for _ in 1..<max(copies, 1) {
                        target.update(from: first, count: width)
                        target += width
                    }
                }
                // The next output row's index.
                var axis = outer.count - 1
                while axis >= 0 {
                    index[axis] += 1
                    if index[axis] < outer[axis] { break }
                    index[axis] = 0
                    axis -= 1
                }
            }
        }
    }

    /// The parameter GraphReader gives a program's `reshape`: a 0 in `shape`
    /// copies the input dimension at the same distance from the end (1 where
    /// there is none), as MIL's iOS 17 `reshape` does; without it (a lowered
    /// network) a 0 copies the dimension at the same position from the start.
    static let zerosFromEnd = "zeros_from_end"

    private static func reshape(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.storedInput()
        guard let requested = try context.ints("shape") else { throw context.invalid("no shape") }
        let fromEnd = try context.bool(zerosFromEnd, false)
        var shape = requested.enumerated().map { axis, size in
            guard size == 0 else { return size }
            if fromEnd {
                let source = x.rank - (requested.count - axis)
                return source >= 0 ? x.shape[source] : 1
            }
            return axis < x.rank ? x.shape[axis] : size
        }
        if let unknown = shape.firstIndex(of: -1) {
            let known = shape.enumerated().filter { $0.offset != unknown }.reduce(1) { $0 * $1.element }
            guard shape.filter({ $0 == -1 }).count == 1 else { throw context.invalid("shape \(requested) has more than one -1") }
            guard known > 0, x.count % known == 0 else { throw context.invalid("shape \(requested) does not fit \(x.shape)") }
            shape[unknown] = x.count / known
        }
        guard shape.reduce(1, *) == x.count else { throw context.invalid("shape \(requested) does not fit \(x.shape) (\(x.count) elements)") }
        try context.alias(x, shape: shape)
    }

    private static func reshapeLike(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.storedInput()
        let references = try context.list("ref_tensors")
        let begins = try context.integerList("begins") ?? [], ends = try context.integerList("ends") ?? []
        let masks = (try context.integerList("end_masks") ?? []).map { $0 != 0 }
        guard begins.count == references.count, ends.count == references.count, masks.count == references.count else {
            throw context.invalid("begins, ends and end_masks need one value per reference tensor")
        }
        var shape: [Int] = []
        for (index, reference) in references.enumerated() {
            let begin = begins[index] < 0 ? begins[index] + reference.rank : begins[index]
            let end = masks[index] ? reference.rank : (ends[index] < 0 ? ends[index] + reference.rank : ends[index])
            guard begin >= 0, begin <= end, end <= reference.rank else { throw context.invalid("begin \(begins[index]) end \(ends[index]) outside rank \(reference.rank)") }
            shape += reference.shape[begin..<end]
        }
        guard shape.reduce(1, *) == x.count else { throw context.invalid("cannot reshape \(x.shape) to \(shape)") }
        try context.alias(x, shape: shape)
    }

    private static func sliceByIndex(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.storedInput()
        let slice = try slice(context, x)
        try copy(context, x, offset: slice.offset, strides: slice.strides, shape: slice.shape)
    }

    /// Where `slice_by_index`'s parameters (begin, end, stride, masks) select
    /// in `x`: the first element's offset, and the strides and shape of the
    /// selection (squeezed axes dropped).
    static func slice(_ context: OperationContext, _ x: PlanValue) throws(RuntimeError) -> (offset: Int, strides: [Int], shape: [Int]) {
        let rank = x.rank
        func list(_ key: String, _ fallback: Int) throws(RuntimeError) -> [Int] {
            let values = try context.ints(key) ?? Array(repeating: fallback, count: rank)
            guard values.count == rank else { throw context.invalid("\(key) has \(values.count) values for rank \(rank)") }
            return values
        }
        func mask(_ key: String) throws(RuntimeError) -> [Bool] {
            let values = try context.bools(key) ?? Array(repeating: false, count: rank)
            guard values.count == rank else { throw context.invalid("\(key) has \(values.count) values for rank \(rank)") }
            return values
        }
        let begin = try list("begin", 0), end = try list("end", 0), stride = try list("stride", 1)
        let beginMask = try mask("begin_mask"), endMask = try mask("end_mask"), squeezeMask = try mask("squeeze_mask")
        switch sliceGeometry(x.shape, begin: begin, end: end, stride: stride, beginMask: beginMask, endMask: endMask, squeezeMask: squeezeMask) {
        case .success(let geometry): return geometry
        case .failure(let problem): throw context.invalid(problem.description)
        }
    }

    /// A `slice_update`-style slice whose `begin` and `end` are read at run
    /// time (computed from the inputs, or constants a plan taken from the
    /// memo must not fix: a decoder's cache update): the stride and masks
    /// checked when the plan is made, the selection found at prediction.
    struct RunTimeSlice: Sendable {
        let shape: [Int], stride: [Int], beginMask: [Bool], endMask: [Bool], squeezeMask: [Bool]
        let begin: Int, end: Int, name: String

        /// Reads the stride and masks of `context`'s operation for a slice of
        /// a tensor of `shape`; `begin` and `end` must be `shape.count` integers.
        init(_ context: OperationContext, shape: [Int], begin: PlanValue, end: PlanValue) throws(RuntimeError) {
            let rank = shape.count
            guard begin.count == rank, end.count == rank, !begin.isFloat, !end.isFloat else {
                throw context.invalid("begin and end need \(rank) integer values")
            }
            let stride = try context.ints("stride") ?? Array(repeating: 1, count: rank)
            func mask(_ key: String) throws(RuntimeError) -> [Bool] { try context.bools(key) ?? Array(repeating: false, count: rank) }
            let beginMask = try mask("begin_mask"), endMask = try mask("end_mask"), squeezeMask = try mask("squeeze_mask")
            guard stride.count == rank, beginMask.count == rank, endMask.count == rank, squeezeMask.count == rank else {
                throw context.invalid("stride and masks need \(rank) values")
            }
            (self.shape, self.stride, self.beginMask, self.endMask, self.squeezeMask) = (shape, stride, beginMask, endMask, squeezeMask)
            (self.begin, self.end, name) = (begin.id, end.id, context.op.reportedName)
        }

        /// Where this prediction's `begin` and `end` select; it must be
        /// `count` elements (the update's), else an error naming the operation.
        func geometry(_ buffers: Buffers, count: Int) throws(RuntimeError) -> (offset: Int, strides: [Int], shape: [Int]) {
            let rank = shape.count
            let starts = (0..<rank).map { Int(buffers.ints(begin)[$0]) }, stops = (0..<rank).map { Int(buffers.ints(end)[$0]) }
            switch sliceGeometry(shape, begin: starts, end: stops, stride: stride, beginMask: beginMask, endMask: endMask,
                                 squeezeMask: squeezeMask) {
            case .success(let found):
                guard found.shape.reduce(1, *) == count else {
                    throw .invalidValue(feature: name, detail: "begin \(starts) and end \(stops) select \(found.shape), the update has \(count) values")
                }
                return found
            case .failure(let problem): throw .invalidValue(feature: name, detail: problem.description)
            }
        }
    }

    struct SliceProblem: Error, CustomStringConvertible {
        let description: String
    }

    /// Where a slice selects in a tensor of `shape`: the first element's
    /// offset, the strides and shape of the selection (squeezed axes dropped).
    static func sliceGeometry(_ shape: [Int], begin: [Int], end: [Int], stride: [Int], beginMask: [Bool], endMask: [Bool],
                              squeezeMask: [Bool]) -> Result<(offset: Int, strides: [Int], shape: [Int]), SliceProblem> {
        let inStrides = Shapes.strides(shape)
        var offset = 0, selected: [Int] = [], strides: [Int] = []
        for axis in shape.indices {
            let size = shape[axis], step = stride[axis]
            guard step != 0 else { return .failure(SliceProblem(description: "stride 0 on axis \(axis)")) }
            if squeezeMask[axis] {
                let index = begin[axis] < 0 ? begin[axis] + size : begin[axis]
                guard index >= 0, index < size else { return .failure(SliceProblem(description: "index \(begin[axis]) outside axis \(axis) of size \(size)")) }
                offset += index * inStrides[axis]
                continue
            }
            var start: Int, stop: Int
            if step > 0 {
                start = beginMask[axis] ? 0 : min(max(begin[axis] < 0 ? begin[axis] + size : begin[axis], 0), size)
                stop = endMask[axis] ? size : min(max(end[axis] < 0 ? end[axis] + size : end[axis], 0), size)
            } else {
                start = beginMask[axis] ? size - 1 : min(max(begin[axis] < 0 ? begin[axis] + size : begin[axis], -1), size - 1)
                stop = endMask[axis] ? -1 : min(max(end[axis] < 0 ? end[axis] + size : end[axis], -1), size - 1)
            }
            let length = step > 0 ? max(0, (stop - start + step - 1) / step) : max(0, (start - stop + (-step) - 1) / (-step))
            if length > 0 { offset += start * inStrides[axis] }
            selected.append(length)
            strides.append(inStrides[axis] * step)
        }
        return .success((offset, strides, selected))
    }

    private static func concat(_ context: OperationContext) throws(RuntimeError) {
        // Scalars concatenate as one-element vectors (shape arithmetic does this).
        let values = try context.list("values").map { value in
            value.rank == 0 ? PlanValue(id: value.id, type: value.type, shape: [1], constant: value.constant) : value
        }
        guard let first = values.first else { throw context.invalid("no values") }
        let axis = try context.axis(try context.int("axis", 0), rank: first.rank)
        if try context.bool("interleave", false) {
            guard values.allSatisfy({ $0.shape == first.shape }) else { throw context.invalid("interleaving needs values of one shape") }
            var shape = first.shape
            shape[axis] *= values.count
            try stack(context, values, outer: first.shape[...axis].reduce(1, *), inner: first.shape[(axis + 1)...].reduce(1, *), shape: shape)
            return
        }
        var shape = first.shape
        shape[axis] = 0
        for value in values {
            guard value.rank == first.rank, value.shape.indices.allSatisfy({ $0 == axis || value.shape[$0] == first.shape[$0] }) else {
                throw context.invalid("cannot concatenate shapes \(first.shape) and \(value.shape) on axis \(axis)")
            }
            shape[axis] += value.shape[axis]
        }
        let outer = first.shape[..<axis].reduce(1, *)
        let parts = values.map { (id: $0.id, inner: $0.shape[axis...].reduce(1, *)) }
        let total = shape[axis...].reduce(1, *)
        let out = try context.output(shape)
        context.run(reads: values, writes: [out]) { buffers in
            let target = buffers.ints(out)
            var start = 0
            for part in parts {
                let source = buffers.ints(part.id)
                for o in 0..<outer { (target + o * total + start).update(from: source + o * part.inner, count: part.inner) }
                start += part.inner
            }
        }
    }

    /// out[o][j][i] = values[j][o][i], for `outer` × count × `inner` elements.
    private static func stack(_ context: OperationContext, _ values: [PlanValue], outer: Int, inner: Int, shape: [Int]) throws(RuntimeError) {
        let out = try context.output(shape)
        let ids = values.map(\.id), count = values.count
        context.run(reads: values, writes: [out]) { buffers in
            let target = buffers.ints(out)
            for (j, id) in ids.enumerated() {
                let source = buffers.ints(id)
                for o in 0..<outer { (target + (o * count + j) * inner).update(from: source + o * inner, count: inner) }
            }
        }
    }

    private static func split(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        let axis = try context.axis(try context.int("axis", 0), rank: x.rank)
        let size = x.shape[axis]
        var sizes: [Int]
        if let given = try context.ints("split_sizes") {
            sizes = given
        } else {
            let parts = try context.int("num_splits", context.op.outputs.count)
            guard parts > 0, parts == context.op.outputs.count else {
                throw context.invalid("num_splits \(parts) for \(context.op.outputs.count) outputs")
            }
            // As NumPy's array_split (NeuralNetwork splitND): the first size % parts outputs are
            // one longer. MIL's split requires a size divisible by num_splits, where this is even.
            sizes = (0..<parts).map { size / parts + ($0 < size % parts ? 1 : 0) }
        }
        guard sizes.reduce(0, +) == size, sizes.count == context.op.outputs.count else {
            throw context.invalid("split_sizes \(sizes) for axis \(axis) of size \(size) into \(context.op.outputs.count) outputs")
        }
        let strides = Shapes.strides(x.shape)
        var start = 0
        for part in sizes {
            var shape = x.shape
            shape[axis] = part
            try copy(context, x, offset: start * strides[axis], strides: strides, shape: shape)
            start += part
        }
    }

    private static func pad(_ context: OperationContext) throws(RuntimeError) {
        let x = try context.input()
        guard let pads = try context.ints("pad"), pads.count % 2 == 0, pads.count / 2 <= x.rank else {
            throw context.invalid("pad needs two values for each of up to \(x.rank) axes")
        }
        let mode = try context.string("mode", "constant")
        let value = try context.float("constant_val", 0)
        let padded = pads.count / 2
        var before = [Int](repeating: 0, count: x.rank), after = before
        for index in 0..<padded {
            before[x.rank - padded + index] = pads[2 * index]
            after[x.rank - padded + index] = pads[2 * index + 1]
        }
        let shape = x.shape.indices.map { x.shape[$0] + before[$0] + after[$0] }
        guard ["constant", "reflect", "replicate"].contains(mode) else { throw context.unsupported("pad mode \(mode) is not supported") }
        if mode == "reflect" {
            for axis in x.shape.indices where before[axis] >= x.shape[axis] || after[axis] >= x.shape[axis] {
                throw context.invalid("pad: reflect padding of \(max(before[axis], after[axis])) on axis \(axis) of size \(x.shape[axis])")
            }
        }
        // Positions into x, or -1 for the constant.
        var table: [Int32] = []
        table.reserveCapacity(shape.reduce(1, *))
        Shapes.forEachIndex(shape) { index in
            var source = 0
            for axis in index.indices {
                var i = index[axis] - before[axis]
                let size = x.shape[axis]
                if i < 0 || i >= size {
                    switch mode {
                    case "reflect": i = i < 0 ? -i : 2 * (size - 1) - i
                    case "replicate": i = min(max(i, 0), size - 1)
                    default: source = -1
                    }
                }
                if source < 0 { break }
                source = source * size + i
            }
            table.append(Int32(source))
        }
        let positions = table, from = x.id
        let isFloat = x.isFloat
        let fillBits: Int32 = isFloat ? Int32(bitPattern: value.bitPattern) : truncatedInt32(value)
        let out = try context.output(shape)
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.ints(from), target = buffers.ints(out)
            for index in positions.indices { target[index] = positions[index] < 0 ? fillBits : source[Int(positions[index])] }
        }
    }

    private static func fill(_ context: OperationContext, shape: [Int]) throws(RuntimeError) {
        let value = try context.optional("value")
        guard shape.allSatisfy({ $0 >= 0 }) else { throw context.invalid("shape \(shape) has a negative dimension") }
        let isFloat = context.outputType().isFloat
        if let constant = value?.constant ?? (value == nil ? Tensor(floats: [0], shape: []) : nil) {
            let count = shape.reduce(1, *)
            let scalar = constant.scalar ?? 0
            context.output(constant: isFloat ? Tensor(floats: Array(repeating: Float(scalar), count: count), shape: shape)
                : Tensor(ints: Array(repeating: Int32(clamping: Int(scalar)), count: count), shape: shape))
            return
        }
        guard let value else { return }
        let out = try context.output(shape)
        let count = shape.reduce(1, *), from = value.id, valueFloat = value.isFloat
        context.run(reads: [value], writes: [out]) { buffers in
            let bits: Int32 = valueFloat == isFloat ? buffers.ints(from)[0]
                : (isFloat ? Int32(bitPattern: Float(buffers.ints(from)[0]).bitPattern) : truncatedInt32(buffers.floats(from)[0]))
            let target = buffers.ints(out)
            for index in 0..<count { target[index] = bits }
        }
    }
}

// MARK: Facts

extension ShapeOperations {
    /// `reshape`: the shape's dimensions where it is a constant (0 copies, -1
    /// found from the others), else its length's rank with none known.
    static let reshapeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let requested = context.ints("shape") else {
            let length = try context.input("shape").dimension(0)
            return [length.map { ValueType(x.element, rank: $0) } ?? .unknownRank(x.element)]
        }
        let fromEnd = context.bool(zerosFromEnd, false)
        var dims: [Int?] = requested.enumerated().map { axis, size in
            guard size == 0 else { return size }
            let source = fromEnd ? (x.rank ?? 0) - (requested.count - axis) : axis
            return x.shape.flatMap { $0.indices.contains(source) ? $0[source] : nil }
        }
        if let unknown = dims.firstIndex(of: -1) {
            let others = dims.enumerated().filter { $0.offset != unknown }.map(\.element)
            let count = x.shape.flatMap { dims in dims.allSatisfy { $0 != nil } ? dims.reduce(1) { $0 * $1! } : nil }
            if let count, others.allSatisfy({ $0 != nil }) {
                let known = others.reduce(1) { $0 * $1! }
                dims[unknown] = known > 0 ? count / known : nil
            } else {
                dims[unknown] = nil
            }
        }
        return [ValueType(x.element, shape: dims)]
    }

    static let expandDimsFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard var dims = x.shape, let axes = context.ints("axes") ?? (context.has("axes") ? nil : [0]) else {
            return [.unknownRank(x.element)]
        }
        let rank = dims.count + axes.count
        var resolved: [Int] = []
        for axis in axes { resolved.append(try context.axis(axis, rank: rank, key: "axes")) }
        for axis in resolved.sorted() { dims.insert(1, at: min(axis, dims.count)) }
        return [ValueType(x.element, shape: dims)]
    }

    /// `squeeze`: the axes given dropped; without axes, every dimension of 1,
    /// which leaves the rank unknown unless every dimension is known.
    static let squeezeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [.unknownRank(x.element)] }
        guard let axes = context.ints("axes") else {
            guard !context.has("axes"), dims.allSatisfy({ $0 != nil }) else { return [.unknownRank(x.element)] }
            return [ValueType(x.element, shape: dims.filter { $0 != 1 })]
        }
        var drop = Set<Int>()
        for axis in axes { drop.insert(try context.axis(axis, rank: dims.count, key: "axes")) }
        return [ValueType(x.element, shape: dims.indices.filter { !drop.contains($0) }.map { dims[$0] })]
    }

    static let flattenFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [ValueType(x.element, rank: 2)] }
        let axis = context.int("axis", 1)
        let split = axis < 0 ? axis + dims.count : axis
        guard split >= 0, split <= dims.count else { throw context.invalid("axis \(axis) of a rank-\(dims.count) tensor") }
        func product(_ part: ArraySlice<Int?>) -> Int? { part.allSatisfy { $0 != nil } ? part.reduce(1) { $0 * $1! } : nil }
        return [ValueType(x.element, shape: [product(dims[..<split]), product(dims[split...])])]
    }

    static let transposeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [.unknownRank(x.element)] }
        guard let perm = context.ints("perm") ?? (context.has("perm") ? nil : Array(dims.indices.reversed())) else {
            return [ValueType(x.element, rank: dims.count)]
        }
        guard perm.count == dims.count else { throw context.invalid("perm has \(perm.count) values for rank \(dims.count)") }
        var result: [Int?] = []
        for axis in perm { result.append(dims[try context.axis(axis, rank: dims.count, key: "perm")]) }
        return [ValueType(x.element, shape: result)]
    }

    static let sliceByIndexFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [.unknownRank(x.element)] }
        let rank = dims.count
        let squeeze = context.bools("squeeze_mask") ?? Array(repeating: false, count: rank)
        guard squeeze.count == rank else { throw context.invalid("squeeze_mask has \(squeeze.count) values for rank \(rank)") }
        let begin = context.ints("begin"), end = context.ints("end")
        let stride = context.ints("stride") ?? Array(repeating: 1, count: rank)
        let beginMask = context.bools("begin_mask") ?? Array(repeating: false, count: rank)
        let endMask = context.bools("end_mask") ?? Array(repeating: false, count: rank)
        var result: [Int?] = []
        for axis in 0..<rank where !squeeze[axis] {
            guard let count = dims[axis], let begin, let end, begin.count == rank, end.count == rank, stride.count == rank,
                  beginMask.count == rank, endMask.count == rank else {
                result.append(nil)
                continue
            }
            result.append(ValueType.slicedLength(count, begin: begin[axis], end: end[axis], stride: stride[axis],
                                                  fromStart: beginMask[axis], toEnd: endMask[axis]))
        }
        return [ValueType(x.element, shape: result)]
    }

    static let sliceBySizeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [.unknownRank(x.element)] }
        guard let size = context.ints("size") else { return [ValueType(x.element, rank: dims.count)] }
        guard size.count == dims.count else { throw context.invalid("size needs \(dims.count) values") }
        let begin = context.ints("begin")
        return [ValueType(x.element, shape: size.indices.map { axis in
            if size[axis] != -1 { return size[axis] }
            guard let count = dims[axis], let begin, begin.count == dims.count else { return nil }
            return count - (begin[axis] < 0 ? begin[axis] + count : begin[axis])
        })]
    }

    /// `concat`: the values' dimensions, summed along `axis`. Scalars count as
    /// one-element vectors, as the plan reads them; values whose ranks still
    /// differ leave the result the largest rank with no dimension known (the
    /// plan decides from the shapes it is given).
    static let concatFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let values = try context.list("values").map { $0.rank == 0 ? ValueType($0.element, shape: [1]) : $0 }
        guard let first = values.first else { throw context.invalid("concat needs values") }
        let ranks = Set(values.compactMap(\.rank))
        guard let rank = ranks.max() else { return [.unknownRank(first.element)] }
        guard ranks.count == 1 else { return [ValueType(first.element, rank: rank)] }
        let axis = try context.axis(context.int("axis", 0), rank: rank)
        var dims: [Int?] = Array(repeating: nil, count: rank)
        var total: Int? = 0
        for value in values {
            guard let valueDims = value.shape else { total = nil; continue }
            for index in 0..<rank where index != axis { dims[index] = dims[index] ?? valueDims[index] }
            total = total.flatMap { sum in valueDims[axis].map { sum + $0 } }
        }
        dims[axis] = total
        return [ValueType(first.element, shape: dims)]
    }

    static let stackFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let values = try context.list("values")
        guard let first = values.first else { throw context.invalid("stack needs values") }
        guard var dims = values.lazy.compactMap(\.shape).first else { return [.unknownRank(first.element)] }
        let axis = try context.axis(context.int("axis", 0), rank: dims.count + 1)
        dims.insert(values.count, at: axis)
        return [ValueType(first.element, shape: dims)]
    }

    /// `split`: one output per size, or `num_splits` equal parts.
    static let splitFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        let sizes: [Int?]
        if let given = context.ints("split_sizes") {
            sizes = given
        } else if let parts = context.constant("num_splits")?.scalar.map({ Int($0) }), parts > 0 {
            let axis = x.rank.map { rank in context.int("axis", 0) < 0 ? context.int("axis", 0) + rank : context.int("axis", 0) }
            let whole = axis.flatMap { x.dimension($0) }
            sizes = Array(repeating: whole.map { $0 / parts }, count: parts)
        } else {
            throw context.invalid("split needs split_sizes or num_splits given as constants")
        }
        guard let dims = x.shape else { return sizes.map { _ in .unknownRank(x.element) } }
        let axis = try context.axis(context.int("axis", 0), rank: dims.count)
        return sizes.map { size in
            var part = dims
            part[axis] = size
            return ValueType(x.element, shape: part)
        }
    }

    static let tileFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape else { return [.unknownRank(x.element)] }
        guard let reps = context.ints("reps"), reps.count == dims.count else { return [ValueType(x.element, rank: dims.count)] }
        return [ValueType(x.element, shape: zip(dims, reps).map { dim, rep in dim.map { $0 * rep } })]
    }

    /// `pad`: the last `pad.count / 2` dimensions grow by their two amounts.
    static let padFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard var dims = x.shape else { return [.unknownRank(x.element)] }
        guard let pad = context.ints("pad") else { return [ValueType(x.element, rank: dims.count)] }
        guard pad.count % 2 == 0, pad.count / 2 <= dims.count else { throw context.invalid("pad has \(pad.count) values for rank \(dims.count)") }
        let first = dims.count - pad.count / 2
        for index in 0..<(pad.count / 2) { dims[first + index] = dims[first + index].map { $0 + pad[2 * index] + pad[2 * index + 1] } }
        return [ValueType(x.element, shape: dims)]
    }

    /// `fill`: the shape's values where it is a constant, else its length's rank; the value's type.
    static let fillFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let element = try context.optional("value")?.element ?? .float32
        if let shape = context.ints("shape") { return [ValueType(element, shape: shape)] }
        let length = try context.input("shape").dimension(0)
        return [length.map { ValueType(element, rank: $0) } ?? .unknownRank(element)]
    }

    /// `shape`: an int32 vector of `x`'s rank.
    static let shapeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        [ValueType(.int32, shape: [try context.input().rank])]
    }

    static let fillLikeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        [ValueType(try context.optional("value")?.element ?? .float32, shape: try context.input("ref_tensor").shape)]
    }

    /// `range_1d`: a vector of `start`'s type whose length waits for the values.
    static let rangeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        [ValueType(try context.input("start").element, rank: 1)]
    }

    /// `non_zero`: one int32 row of `x`'s rank per element that is not zero.
    static let nonZeroFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        [ValueType(.int32, shape: [nil, try context.input().rank])]
    }

    static let atLeastRank1Facts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        return [x.rank == 0 ? ValueType(x.element, shape: [1]) : x]
    }
}

extension ShapeOperations {
    /// `reshape_like`: the slices `begins..<ends` of the reference tensors' dimensions, joined.
    static let reshapeLikeFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input(), references = try context.list("ref_tensors")
        guard let begins = context.ints("begins"), let ends = context.ints("ends"), let masks = context.bools("end_masks"),
              begins.count == references.count, ends.count == references.count, masks.count == references.count else {
            return [.unknownRank(x.element)]
        }
        var shape: [Int?] = []
        for (index, reference) in references.enumerated() {
            guard let dims = reference.shape else { return [.unknownRank(x.element)] }
            let begin = begins[index] < 0 ? begins[index] + dims.count : begins[index]
            let end = masks[index] ? dims.count : (ends[index] < 0 ? ends[index] + dims.count : ends[index])
            guard begin >= 0, begin <= end, end <= dims.count else { throw context.invalid("begin \(begins[index]) end \(ends[index]) outside rank \(dims.count)") }
            shape += dims[begin..<end]
        }
        return [ValueType(x.element, shape: shape)]
    }
}
