import ModelFeatures

/// A value's type is what is known of it before any plan is made (its
/// facts): element type, rank and each dimension fixed at load. A file
/// declares them for its values; an operation's definition computes its
/// outputs' from its operands' (`OperationDefinition.outputFacts`), without
/// planning, and the network lowering builds its graph on them.
extension ValueType: CustomStringConvertible {
    /// A value of `element` type with dimensions `shape` (`nil` where unknown; `nil` as a whole: rank unknown).
    init(_ element: ElementType, shape: [Int?]?) {
        self.init(element: element, shape: shape)
    }

    /// A value of rank `rank` with no dimension known.
    init(_ element: ElementType, rank: Int) {
        self.init(element: element, shape: Array(repeating: nil, count: rank))
    }

    /// A value whose rank itself is known only at run time.
    static func unknownRank(_ element: ElementType) -> ValueType { ValueType(element: element, shape: nil) }

    /// The type of a constant: every dimension known.
    init(_ tensor: Tensor) {
        self.init(element: tensor.type, shape: tensor.shape.map { $0 })
    }

    var rank: Int? { shape?.count }

    /// The dimension at `axis` (negative counts from the end), if the rank and it are known.
    func dimension(_ axis: Int) -> Int? {
        guard let shape else { return nil }
        let resolved = axis < 0 ? axis + shape.count : axis
        return shape.indices.contains(resolved) ? shape[resolved] : nil
    }

    /// The same dimensions with another element type.
    func with(_ element: ElementType) -> ValueType { ValueType(element: element, shape: shape) }

    var description: String {
        guard let shape else { return "\(element.rawValue)[rank unknown]" }
        return "\(element.rawValue)[\(shape.map { $0.map(String.init) ?? "?" }.joined(separator: ", "))]"
    }

    /// The dimensions operands broadcast to (NumPy's rule, from the right): a
    /// dimension is known where one operand's is and every other's is it or 1.
    static func broadcast(_ operands: [[Int?]]) -> [Int?] {
        let rank = operands.map(\.count).max() ?? 0
        return (0..<rank).map { position in
            var result: Int? = 1
            for dims in operands {
                let index = dims.count - rank + position
                guard index >= 0 else { continue }
                switch (result, dims[index]) {
                case (1?, let other): result = other
                case (_, 1?): break
                case (let known?, let other?) where known == other: break
                case (let known?, nil) where known != 1: break  // the other is 1 or the same
                case (nil, let other?) where other != 1: result = other
                default: result = nil
                }
            }
            return result
        }
    }

    /// How many elements a slice along one axis of `count` selects (MIL's
    /// `slice_by_index`: negative bounds count from the end, masks take the
    /// whole extent, bounds clamped); `nil` for a zero stride.
    static func slicedLength(_ count: Int, begin: Int, end: Int, stride: Int, fromStart: Bool, toEnd: Bool) -> Int? {
        guard stride != 0 else { return nil }
        let first = begin < 0 ? begin + count : begin, last = end < 0 ? end + count : end
        if stride > 0 {
            let from = fromStart ? 0 : min(max(first, 0), count), to = toEnd ? count : min(max(last, 0), count)
            return max(0, (to - from + stride - 1) / stride)
        }
        let from = fromStart ? count - 1 : min(max(first, -1), count - 1), to = toEnd ? -1 : min(max(last, -1), count - 1)
        return max(0, (from - to - stride - 1) / -stride)
    }
}

/// What an operation's facts rule sees: its arguments' facts, and the values
/// of arguments that are constants (axes, shapes, flags).
///
/// A scalar parameter read with a fallback (`int`, `bool`, `string`) that is
/// given but computed at run time leaves the rule's answer unfounded: the
/// context records it (`unresolved`) and `OperationRegistry.outputFacts`
/// answers that nothing is known of the results.
final class FactsContext {
    let op: GraphOperation
    /// The facts of a value computed before the operation, by name.
    let known: (String) -> ValueType?
    /// The value of a constant named in the program (a block's `const`), by name.
    let constants: (String) -> Tensor?
    /// Whether a parameter the rule read with a fallback is computed at run time.
    private(set) var unresolved = false

    init(op: GraphOperation, known: @escaping (String) -> ValueType?, constants: @escaping (String) -> Tensor? = { _ in nil }) {
        self.op = op
        self.known = known
        self.constants = constants
    }

    /// The operation's parameters contradict each other or its operands.
    func invalid(_ detail: String) -> RuntimeError {
        .invalidParameters(model: "operation \"\(op.reportedName)\" (\(op.reportedType))", detail: detail)
    }

    private func facts(_ argument: GraphArgument) throws(RuntimeError) -> ValueType {
        switch argument {
        case .constant(let tensor): return ValueType(tensor)
        case .value(let name):
            if let facts = known(name) { return facts }
            if let tensor = constants(name) { return ValueType(tensor) }
            throw invalid("reads \"\(name)\", which nothing computes before it")
        }
    }

    func has(_ key: String) -> Bool { !(op.arguments[key] ?? []).isEmpty }

    /// The facts of an operand, if given.
    func optional(_ key: String) throws(RuntimeError) -> ValueType? {
        guard let argument = op.arguments[key]?.first else { return nil }
        return try facts(argument)
    }

    /// The facts of an operand the operation requires.
    func input(_ key: String = "x") throws(RuntimeError) -> ValueType {
        guard let facts = try optional(key) else { throw invalid("input \(key) is missing") }
        return facts
    }

    /// The facts of each value of a variadic operand (`concat`'s values).
    func list(_ key: String) throws(RuntimeError) -> [ValueType] {
        var result: [ValueType] = []
        for argument in op.arguments[key] ?? [] { result.append(try facts(argument)) }
        return result
    }

    /// A parameter that is a constant (given in place or named); `nil` when absent or computed.
    func constant(_ key: String) -> Tensor? {
        switch op.arguments[key]?.first {
        case .constant(let tensor)?: tensor
        case .value(let name)?: constants(name)
        case nil: nil
        }
    }

    /// A scalar parameter's constant value, `nil` when absent; one computed at run time is recorded as `unresolved`.
    private func scalar(_ key: String) -> Tensor? {
        guard has(key) else { return nil }
        guard let value = constant(key) else {
            unresolved = true
            return nil
        }
        return value
    }

    func ints(_ key: String) -> [Int]? { constant(key)?.ints }

    func int(_ key: String, _ fallback: Int) -> Int { scalar(key)?.scalar.map { Int($0) } ?? fallback }

    func bool(_ key: String, _ fallback: Bool) -> Bool { scalar(key)?.scalar.map { $0 != 0 } ?? fallback }

    func bools(_ key: String) -> [Bool]? { constant(key)?.ints.map { $0 != 0 } }

    func string(_ key: String, _ fallback: String) -> String { scalar(key)?.strings.first ?? fallback }

    /// An axis in `0..<rank` from a possibly negative one.
    func axis(_ axis: Int, rank: Int, key: String = "axis") throws(RuntimeError) -> Int {
        let resolved = axis < 0 ? axis + rank : axis
        guard resolved >= 0, resolved < max(rank, 1) else { throw invalid("\(key) \(axis) is outside a rank-\(rank) tensor") }
        return resolved
    }
}

extension OperationDefinition {
    /// How an operation's outputs' facts follow from its operands'.
    typealias FactsRule = @Sendable (FactsContext) throws(RuntimeError) -> [ValueType]

    /// This definition with the rule giving its outputs' facts.
    func withFacts(_ rule: @escaping FactsRule) -> OperationDefinition {
        var copy = self
        copy.outputFacts = rule
        return copy
    }
}

/// The facts rules operations share: one operand's shape, broadcasting, reductions.
enum FactsRules {
    typealias Rule = OperationDefinition.FactsRule

    /// The shape and type of operand `key` (`element`, or operand `typeFrom`'s type, instead of its type where given).
    static func same(_ key: String = "x", typeFrom: String? = nil, element: ElementType? = nil) -> Rule {
        { context throws(RuntimeError) in
            let x = try context.input(key)
            if let element { return [x.with(element)] }
            if let typeFrom { return [x.with(try context.input(typeFrom).element)] }
            return [x]
        }
    }

    /// The operands `keys` broadcast together; the type of `typeFrom` (the
    /// first operand by default) or `element`.
    static func broadcast(_ keys: [String] = ["x", "y"], typeFrom: String? = nil, element: ElementType? = nil) -> Rule {
        { context throws(RuntimeError) in
            var operands: [ValueType] = []
            for key in keys { operands.append(try context.input(key)) }
            let type = if let element { element } else { try context.input(typeFrom ?? keys[0]).element }
            let all = operands.compactMap(\.shape)
            guard all.count == operands.count else { return [.unknownRank(type)] }
            return [ValueType(type, shape: ValueType.broadcast(all))]
        }
    }

    /// A reduction over `axes` (or `axis`; when neither is given, `defaultAxis`
    /// or else every axis), keeping them as 1s where `keep_dims` is true (false by default).
    static func reduction(element: ElementType? = nil, defaultAxis: Int? = nil) -> Rule {
        { context throws(RuntimeError) in
            let x = try context.input()
            let type = element ?? x.element
            guard let dims = x.shape else { return [.unknownRank(type)] }
            let given = context.ints("axes") ?? (context.has("axis") ? [context.int("axis", 0)] : defaultAxis.map { [$0] })
            if context.has("axes") || context.has("axis"), given == nil { return [.unknownRank(type)] }
            var reduced = Set<Int>()
            for axis in given ?? Array(dims.indices) { reduced.insert(try context.axis(axis, rank: dims.count, key: "axes")) }
            let keep = context.bool("keep_dims", false)
            var result: [Int?] = []
            for index in dims.indices {
                if !reduced.contains(index) { result.append(dims[index]) } else if keep { result.append(1) }
            }
            return [ValueType(type, shape: result)]
        }
    }

    /// Outputs of fixed ranks, of operand `key`'s type, whose dimensions are not followed.
    static func ranks(_ ranks: [Int], typeFrom key: String) -> Rule {
        { context throws(RuntimeError) in
            let element = try context.input(key).element
            return ranks.map { ValueType(element, rank: $0) }
        }
    }

    /// One output of operand `key`'s rank and type, with the dimensions
    /// `keeping` lists kept and the others unknown (a convolution keeps its
    /// batch; a resampling its batch and channels).
    static func sameRank(_ key: String = "x", keeping kept: [Int] = []) -> Rule {
        { context throws(RuntimeError) in
            let x = try context.input(key)
            guard let dims = x.shape else { return [.unknownRank(x.element)] }
            return [ValueType(x.element, shape: dims.indices.map { kept.contains($0) ? dims[$0] : nil })]
        }
    }
}
