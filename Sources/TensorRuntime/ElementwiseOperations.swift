import Foundation
import ModelFeatures

/// Unary and binary elementwise operations (NumPy broadcasting), `cast`,
/// `select`, comparisons and logical operations on bool.
enum ElementwiseOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = {
        var all: [String: OperationDefinition] = [:]
        for (name, function) in unaryFloat {
            all[name] = OperationDefinition(["x", "epsilon", "alpha", "beta"], layout: .elementwise) { context throws(RuntimeError) in
                let epsilon = try context.float("epsilon", defaultEpsilon[name] ?? 0)
                let alpha = try context.float("alpha", 0), beta = try context.float("beta", 0)
                try unary(context, integer: integerUnary[name]) { function($0, epsilon, alpha, beta) }
            }.withFacts(FactsRules.same())
        }
        all["logical_not"] = OperationDefinition(["x"]) { context throws(RuntimeError) in
            try unary(context, integer: { $0 == 0 ? 1 : 0 }) { $0 == 0 ? 1 : 0 }
        }.withFacts(FactsRules.same(element: .bool))
        all["identity"] = OperationDefinition(["x"]) { context throws(RuntimeError) in
            let x = try context.storedInput()
            try context.alias(x, shape: x.shape)
        }.withFacts(FactsRules.same())
        all["cast"] = OperationDefinition(["x", "dtype"]) { context throws(RuntimeError) in try cast(context) }
            .withFacts { context throws(RuntimeError) in
                let name = context.string("dtype", "fp32")
                guard let type = ElementType(milName: name), type != .string else { throw context.invalid("dtype \"\(name)\" is not supported") }
                return [try context.input().with(type)]
            }
        for (name, operation) in binaryFloat {
            all[name] = OperationDefinition(["x", "y"], layout: .elementwise) { context throws(RuntimeError) in
                try binary(context, float: operation, integer: binaryInteger[name], specialised: ElementwiseKernels.binary[name])
            }.withFacts(FactsRules.broadcast(element: boolResults.contains(name) ? .bool : nil))
        }
        all["select"] = OperationDefinition(["cond", "a", "b"]) { context throws(RuntimeError) in try select(context) }
            .withFacts(FactsRules.broadcast(["cond", "a", "b"], typeFrom: "a"))
        return all
    }()

    /// The binary operations whose results are bool: comparisons and logical operations.
    static let boolResults: Set<String> = [
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
    ]

    // MARK: Unary

    /// f(x, epsilon, alpha, beta) for floats.
    static let unaryFloat: [String: @Sendable (Float, Float, Float, Float) -> Float] = [
        "abs": { x, _, _, _ in abs(x) }, "acos": { x, _, _, _ in acos(x) }, "asin": { x, _, _, _ in asin(x) },
        "atan": { x, _, _, _ in atan(x) }, "atanh": { x, _, _, _ in atanh(x) }, "ceil": { x, _, _, _ in x.rounded(.up) },
        "cos": { x, _, _, _ in cos(x) }, "cosh": { x, _, _, _ in cosh(x) }, "erf": { x, _, _, _ in erf(x) },
        "exp": { x, _, _, _ in exp(x) }, "exp2": { x, _, _, _ in exp2(x) }, "floor": { x, _, _, _ in x.rounded(.down) },
        "inverse": { x, e, _, _ in 1 / (x + e) }, "log": { x, e, _, _ in log(x + e) },
        "round": { x, _, _, _ in x.rounded(.toNearestOrEven) }, "rsqrt": { x, e, _, _ in 1 / (x + e).squareRoot() },
        "sign": { x, _, _, _ in x > 0 ? 1 : (x < 0 ? -1 : 0) }, "sin": { x, _, _, _ in sin(x) }, "sinh": { x, _, _, _ in sinh(x) },
        "sqrt": { x, _, _, _ in x.squareRoot() }, "square": { x, _, _, _ in x * x }, "tan": { x, _, _, _ in tan(x) },
        "tanh": { x, _, _, _ in tanh(x) }, "threshold": { x, _, a, _ in max(x, a) },
        "clip": { x, _, a, b in min(max(x, a), b) },
    ]

    /// The same operations on integers, where MIL allows them.
    static let integerUnary: [String: @Sendable (Int32) -> Int32] = [
        "abs": { $0 == .min ? .min : abs($0) }, "sign": { $0 > 0 ? 1 : ($0 < 0 ? -1 : 0) }, "square": { $0 &* $0 },
        "ceil": { $0 }, "floor": { $0 }, "round": { $0 },
    ]

    static let defaultEpsilon: [String: Float] = ["inverse": 1e-4, "log": Float.leastNonzeroMagnitude, "rsqrt": 1e-12]

    static func unary(_ context: OperationContext, integer: (@Sendable (Int32) -> Int32)?,
                      _ function: @escaping @Sendable (Float) -> Float) throws(RuntimeError) {
        let x = try context.input()
        let out = try context.output(x.shape)
        let count = x.count, from = x.id
        let outFloat = context.outputType().isFloat
        if x.isFloat {
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from)
                if outFloat {
                    let target = buffers.floats(out)
                    for index in 0..<count { target[index] = function(source[index]) }
                } else {
                    let target = buffers.ints(out)
                    for index in 0..<count { target[index] = function(source[index]) != 0 ? 1 : 0 }
                }
            }
            return
        }
        guard let integer else {
            // Integer inputs of float-only operations are computed in float and truncated.
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.ints(from)
                if outFloat {
                    for index in 0..<count { buffers.floats(out)[index] = function(Float(source[index])) }
                } else {
                    for index in 0..<count { buffers.ints(out)[index] = truncatedInt32(function(Float(source[index]))) }
                }
            }
            return
        }
        context.run(reads: [x], writes: [out]) { buffers in
            let source = buffers.ints(from), target = buffers.ints(out)
            for index in 0..<count { target[index] = integer(source[index]) }
        }
    }

    // MARK: Cast

    static func cast(_ context: OperationContext) throws(RuntimeError) {
        let stored = try context.storedInput()
        let name = try context.string("dtype", "fp32")
        guard let target = ElementType(milName: name), target != .string else { throw context.unsupported("dtype \"\(name)\" is not supported") }
        // Floats that keep their values (fp16 to fp32, fp32 and fp64 either way, halves to any float): a view, no copy.
        let halves = stored.type == .float16 || stored.storage == .float16
        if stored.isFloat, target.isFloat, target != .float16 || halves, context.outputType() == target {
            try context.alias(stored, shape: stored.shape)
            return
        }
        let x = context.widened(stored)
        let out = try context.output(x.shape, type: target)
        let count = x.count, from = x.id
        switch (x.isFloat, target.isFloat) {
        case (true, true):
            // Values of an fp16 tensor are already fp16's: only a cast to fp16 rounds.
            let half = target == .float16 && x.type != .float16
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from), result = buffers.floats(out)
                if half {
                    for index in 0..<count { result[index] = roundedToHalf(source[index]) }
                } else {
                    result.update(from: source, count: count)
                }
            }
        case (true, false):
            let bool = target == .bool
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.floats(from), result = buffers.ints(out)
                for index in 0..<count {
                    result[index] = bool ? (source[index] != 0 ? 1 : 0) : wrap(truncatedInt32(source[index]), to: target)
                }
            }
        case (false, true):
            let half = target == .float16
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.ints(from), result = buffers.floats(out)
                for index in 0..<count { result[index] = half ? Float(Float16(Float(source[index]))) : Float(source[index]) }
            }
        case (false, false):
            context.run(reads: [x], writes: [out]) { buffers in
                let source = buffers.ints(from), result = buffers.ints(out)
                for index in 0..<count { result[index] = target == .bool ? (source[index] != 0 ? 1 : 0) : wrap(source[index], to: target) }
            }
        }
    }

    /// `value` rounded to the nearest fp16 (ties to even), as `Float(Float16(value))`
    /// gives it, without the conversion library calls for normal fp16 values.
    @inline(__always)
    static func roundedToHalf(_ value: Float) -> Float {
        let magnitude = abs(value)
        // fp16's normal range; the rest (subnormals, overflow to infinity, NaN) through Float16.
        guard magnitude >= 0x1p-14, magnitude <= 65504 else { return Float(Float16(value)) }
        let bits = value.bitPattern
        // Keep 10 of Float's 23 mantissa bits, rounding to nearest even.
        let rounded = (bits &+ 0xFFF &+ ((bits >> 13) & 1)) & ~0x1FFF
        return Float(bitPattern: rounded)
    }

    /// An int32 as the narrower integer type would hold it (wrapping, as NumPy's `astype`).
    @inline(__always)
    static func wrap(_ value: Int32, to type: ElementType) -> Int32 {
        switch type {
        case .int8: Int32(Int8(truncatingIfNeeded: value))
        case .uint8: Int32(UInt8(truncatingIfNeeded: value))
        case .int16: Int32(Int16(truncatingIfNeeded: value))
        case .uint16: Int32(UInt16(truncatingIfNeeded: value))
        default: value
        }
    }

    // MARK: Binary

    static let binaryFloat: [String: @Sendable (Float, Float) -> Float] = [
        "add": { $0 + $1 }, "sub": { $0 - $1 }, "mul": { $0 * $1 }, "real_div": { $0 / $1 },
        "floor_div": { ($0 / $1).rounded(.down) },
        "mod": { x, y in let r = fmod(x, y); return r != 0 && (r < 0) != (y < 0) ? r + y : r },
        "pow": { pow($0, $1) }, "maximum": { Swift.max($0, $1) }, "minimum": { Swift.min($0, $1) },
        "equal": { $0 == $1 ? 1 : 0 }, "not_equal": { $0 != $1 ? 1 : 0 }, "less": { $0 < $1 ? 1 : 0 },
        "less_equal": { $0 <= $1 ? 1 : 0 }, "greater": { $0 > $1 ? 1 : 0 }, "greater_equal": { $0 >= $1 ? 1 : 0 },
        "logical_and": { $0 != 0 && $1 != 0 ? 1 : 0 }, "logical_or": { $0 != 0 || $1 != 0 ? 1 : 0 },
        "logical_xor": { ($0 != 0) != ($1 != 0) ? 1 : 0 },
    ]

    static let binaryInteger: [String: @Sendable (Int32, Int32) -> Int32] = [
        "add": { $0 &+ $1 }, "sub": { $0 &- $1 }, "mul": { $0 &* $1 },
        "real_div": { $1 == 0 ? 0 : truncatedInt32(Float(Double($0) / Double($1))) },
        "floor_div": { x, y in
            guard y != 0 else { return 0 }
            let q = x / y
            return (x % y != 0) && ((x < 0) != (y < 0)) ? q - 1 : q
        },
        "mod": { x, y in
            guard y != 0 else { return 0 }
            let r = x % y
            return r != 0 && (r < 0) != (y < 0) ? r + y : r
        },
        "pow": { x, y in
            guard y >= 0 else { return x == 1 ? 1 : (x == -1 ? (y % 2 == 0 ? 1 : -1) : 0) }
            var result: Int32 = 1, base = x, exponent = y
            while exponent > 0 {
                if exponent & 1 == 1 { result = result &* base }
                base = base &* base
                exponent >>= 1
            }
            return result
        },
        "maximum": { Swift.max($0, $1) }, "minimum": { Swift.min($0, $1) },
        "equal": { $0 == $1 ? 1 : 0 }, "not_equal": { $0 != $1 ? 1 : 0 }, "less": { $0 < $1 ? 1 : 0 },
        "less_equal": { $0 <= $1 ? 1 : 0 }, "greater": { $0 > $1 ? 1 : 0 }, "greater_equal": { $0 >= $1 ? 1 : 0 },
        "logical_and": { $0 != 0 && $1 != 0 ? 1 : 0 }, "logical_or": { $0 != 0 || $1 != 0 ? 1 : 0 },
        "logical_xor": { ($0 != 0) != ($1 != 0) ? 1 : 0 },
    ]

    /// `specialised`, when given, computes float operands into a float output
    /// (the same operation as `float`, in a loop with no call per element).
    static func binary(_ context: OperationContext, float: @escaping @Sendable (Float, Float) -> Float,
                       integer: (@Sendable (Int32, Int32) -> Int32)?,
                       specialised: ElementwiseKernels.BinaryRun? = nil) throws(RuntimeError) {
        let x = try context.input("x"), y = try context.input("y")
        guard let shape = Shapes.broadcast(x.shape, y.shape) else {
            throw context.invalid("shapes \(x.shape) and \(y.shape) do not broadcast")
        }
        let outType = context.outputType()
        let out = try context.output(shape)
        let strides = [Shapes.broadcastStrides(x.shape, to: shape), Shapes.broadcastStrides(y.shape, to: shape)]
        let a = x.id, b = y.id
        let sa = strides[0].last ?? 0, sb = strides[1].last ?? 0
        let count = shape.reduce(1, *)
        let same = x.shape == shape && y.shape == shape
        let xCount = x.count, yCount = y.count
        if !x.isFloat, !y.isFloat, let integer {
            context.run(reads: [x, y], writes: [out]) { buffers in
                let left = buffers.ints(a), right = buffers.ints(b)
                if outType.isFloat {
                    let target = buffers.floats(out)
                    Shapes.walk(shape, strides) { o, offsets, n in
                        for k in 0..<n { target[o + k] = Float(integer(left[offsets[0] + k * sa], right[offsets[1] + k * sb])) }
                    }
                    return
                }
                let target = buffers.ints(out)
                if same {
                    for k in 0..<count { target[k] = integer(left[k], right[k]) }
                    return
                }
                Shapes.walk(shape, strides) { o, offsets, n in
                    for k in 0..<n { target[o + k] = integer(left[offsets[0] + k * sa], right[offsets[1] + k * sb]) }
                }
            }
            return
        }
        let leftFloat = x.isFloat, rightFloat = y.isFloat
        context.run(reads: [x, y], writes: [out]) { buffers in
            @inline(__always) func load(_ id: Int, _ isFloat: Bool, _ index: Int) -> Float {
                isFloat ? buffers.floats(id)[index] : Float(buffers.ints(id)[index])
            }
            if outType.isFloat {
                let target = buffers.floats(out)
                if leftFloat, rightFloat {
                    let left = buffers.floats(a), right = buffers.floats(b)
                    if let specialised {
                        if xCount == count, yCount == count {
                            specialised(left, 1, right, 1, target, count)
                        } else if xCount == count, yCount == 1 {
                            specialised(left, 1, right, 0, target, count)
                        } else if xCount == 1, yCount == count {
                            specialised(left, 0, right, 1, target, count)
                        } else {
                            Shapes.walk(shape, strides) { o, offsets, n in
                                specialised(left + offsets[0], sa, right + offsets[1], sb, target + o, n)
                            }
                        }
                        return
                    }
                    if same {
                        for k in 0..<count { target[k] = float(left[k], right[k]) }
                        return
                    }
                    Shapes.walk(shape, strides) { o, offsets, n in
                        let l = left + offsets[0], r = right + offsets[1], t = target + o
                        if sa == 1, sb == 1 {
                            for k in 0..<n { t[k] = float(l[k], r[k]) }
                        } else if sb == 0 {
                            let v = r[0]
                            for k in 0..<n { t[k] = float(l[k * sa], v) }
                        } else {
                            for k in 0..<n { t[k] = float(l[k * sa], r[k * sb]) }
                        }
                    }
                    return
                }
                Shapes.walk(shape, strides) { o, offsets, n in
                    for k in 0..<n { target[o + k] = float(load(a, leftFloat, offsets[0] + k * sa), load(b, rightFloat, offsets[1] + k * sb)) }
                }
                return
            }
            let target = buffers.ints(out)
            Shapes.walk(shape, strides) { o, offsets, n in
                for k in 0..<n {
                    let value = float(load(a, leftFloat, offsets[0] + k * sa), load(b, rightFloat, offsets[1] + k * sb))
                    target[o + k] = outType == .bool ? (value != 0 ? 1 : 0) : truncatedInt32(value)
                }
            }
        }
    }

    // MARK: Select

    static func select(_ context: OperationContext) throws(RuntimeError) {
        let condition = try context.input("cond"), a = try context.input("a"), b = try context.input("b")
        guard let partial = Shapes.broadcast(a.shape, b.shape), let shape = Shapes.broadcast(condition.shape, partial) else {
            throw context.invalid("shapes \(condition.shape), \(a.shape) and \(b.shape) do not broadcast")
        }
        let out = try context.output(shape)
        let strides = [condition.shape, a.shape, b.shape].map { Shapes.broadcastStrides($0, to: shape) }
        let steps = strides.map { $0.last ?? 0 }
        let c = condition.id, left = a.id, right = b.id
        let conditionFloat = condition.isFloat
        let floatOut = context.outputType().isFloat
        let aFloat = a.isFloat, bFloat = b.isFloat
        context.run(reads: [condition, a, b], writes: [out]) { buffers in
            Shapes.walk(shape, strides) { o, offsets, n in
                for k in 0..<n {
                    let ci = offsets[0] + k * steps[0]
                    let chosen = conditionFloat ? buffers.floats(c)[ci] != 0 : buffers.ints(c)[ci] != 0
                    let (id, index, isFloat) = chosen ? (left, offsets[1] + k * steps[1], aFloat) : (right, offsets[2] + k * steps[2], bFloat)
                    if floatOut {
                        buffers.floats(out)[o + k] = isFloat ? buffers.floats(id)[index] : Float(buffers.ints(id)[index])
                    } else {
                        buffers.ints(out)[o + k] = isFloat ? truncatedInt32(buffers.floats(id)[index]) : buffers.ints(id)[index]
                    }
                }
            }
        }
    }
}
