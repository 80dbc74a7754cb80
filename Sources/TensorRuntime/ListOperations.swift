import ModelFeatures

/// MIL's tensor lists (`make_list`, `list_read`, `list_write`,
/// `list_gather`, `list_scatter`, `list_length`) held as one tensor
/// `[length] + element shape`. A list grows when written past its end (the
/// elements between are zeros), so a write's index decides the next list's
/// shape: computed at run time, it stages the plan (see `Planner`), and a
/// loop that appends is unrolled once its values are known.
enum ListOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "make_list": OperationDefinition(["init_length", "dynamic_length", "elem_shape", "dtype"]) { context throws(RuntimeError) in
            let length = try context.int("init_length", 1)
            guard let shape = try context.integerList("elem_shape") else {
                throw context.unsupported("a list without an element shape (elem_shape) is not supported")
            }
            let name = try context.string("dtype", "fp32")
            guard let type = ElementType(milName: name), type != .string else { throw context.invalid("dtype \"\(name)\" is not a tensor type") }
            guard length >= 0, shape.allSatisfy({ $0 >= 0 }) else { throw context.invalid("init_length \(length), elem_shape \(shape)") }
            let full = [length] + shape, count = full.reduce(1, *)
            context.output(constant: type.isFloat ? Tensor(floats: [Float](repeating: 0, count: count), shape: full, type: type)
                : Tensor(ints: [Int32](repeating: 0, count: count), shape: full, type: type))
        },
        "list_length": OperationDefinition(["ls"]) { context throws(RuntimeError) in
            let list = try context.input("ls")
            context.output(constant: Tensor(ints: [Int32(list.shape.first ?? 0)], shape: []))
        },
        "list_read": OperationDefinition(["ls", "index"]) { context throws(RuntimeError) in
            let list = try list(context)
            let index = try context.input("index")
            try gather(context, list, indices: index, shape: Array(list.shape.dropFirst()))
        },
        "list_gather": OperationDefinition(["ls", "indices"]) { context throws(RuntimeError) in
            let list = try list(context)
            let indices = try context.input("indices")
            try gather(context, list, indices: indices, shape: [indices.count] + list.shape.dropFirst())
        },
        "list_write": OperationDefinition(["ls", "index", "value"]) { context throws(RuntimeError) in
            let list = try list(context)
            let index = try context.int("index", 0)
            try write(context, list, rows: [index], value: try context.input("value"), elementCount: 1)
        },
        "list_scatter": OperationDefinition(["ls", "indices", "value"]) { context throws(RuntimeError) in
            let list = try list(context)
            guard let indices = try context.ints("indices") else { throw context.invalid("indices are missing") }
            try write(context, list, rows: indices, value: try context.input("value"), elementCount: indices.count)
        },
    ]

    private static func list(_ context: OperationContext) throws(RuntimeError) -> PlanValue {
        let list = try context.input("ls")
        guard list.rank >= 1 else { throw context.invalid("ls is not a list") }
        return list
    }

    /// Rows `indices` of `list` (read at run time); rows past the end read as zeros.
    private static func gather(_ context: OperationContext, _ list: PlanValue, indices: PlanValue, shape: [Int]) throws(RuntimeError) {
        guard !indices.isFloat else { throw context.invalid("indices must be integers") }
        let out = try context.output(shape, type: list.type)
        let from = list.id, at = indices.id, count = indices.count, length = list.shape[0]
        let row = list.shape.dropFirst().reduce(1, *)
        context.run(reads: [list, indices], writes: [out]) { buffers in
            let source = buffers.ints(from), target = buffers.ints(out), positions = buffers.ints(at)
            for k in 0..<count {
                var index = Int(positions[k])
                if index < 0 { index += length }
                if index >= 0, index < length {
                    (target + k * row).update(from: source + index * row, count: row)
                } else {
                    (target + k * row).update(repeating: 0, count: row)
                }
            }
        }
    }

    /// `list` with `value`'s `elementCount` elements written at `rows`,
    /// grown (with zeros) to hold the largest row.
    private static func write(_ context: OperationContext, _ list: PlanValue, rows: [Int], value: PlanValue, elementCount: Int) throws(RuntimeError) {
        let element = Array(list.shape.dropFirst()), row = element.reduce(1, *)
        guard value.count == elementCount * row else {
            throw context.invalid("value of shape \(value.shape) for \(elementCount) elements of shape \(element)")
        }
        guard rows.allSatisfy({ $0 >= 0 }) else { throw context.invalid("negative list index in \(rows)") }
        let length = max(list.shape[0], (rows.max() ?? -1) + 1)
        let out = try context.output([length] + element, type: list.type)
        let from = list.id, source = value.id, old = list.count
        let total = length * row
        context.run(reads: [list, value], writes: [out]) { buffers in
            let target = buffers.ints(out)
            if from != out { target.update(from: buffers.ints(from), count: old) }
            (target + old).update(repeating: 0, count: total - old)
            for (k, index) in rows.enumerated() { (target + index * row).update(from: buffers.ints(source) + k * row, count: row) }
        }
    }
}
