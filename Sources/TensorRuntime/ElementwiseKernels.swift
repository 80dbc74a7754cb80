import Foundation

/// Loops specialised per binary operation on floats, with no call per
/// element: the compiler sees the operation and vectorises the contiguous
/// and scalar cases. A `BinaryRun` computes `n` results from operands read
/// with element strides (1 contiguous, 0 one value repeated).
enum ElementwiseKernels {
    typealias BinaryRun = @Sendable (_ left: UnsafePointer<Float>, _ leftStride: Int, _ right: UnsafePointer<Float>, _ rightStride: Int,
                                     _ target: UnsafeMutablePointer<Float>, _ count: Int) -> Void

    /// The float binary operations with a specialised loop, by MIL name.
    static let binary: [String: BinaryRun] = [
        "add": run(Add.self), "sub": run(Subtract.self), "mul": run(Multiply.self), "real_div": run(Divide.self),
        "maximum": run(Maximum.self), "minimum": run(Minimum.self), "pow": power,
    ]

    /// `pow`, with a constant exponent of 2 (an RMS norm's square) as one
    /// multiplication: `x · x` is x² correctly rounded, as `pow` returns it.
    private static let power: BinaryRun = { left, leftStride, right, rightStride, target, count in
        if leftStride == 1, rightStride == 0, right[0] == 2 {
            for index in 0..<count { target[index] = left[index] * left[index] }
        } else {
            run(Power.self)(left, leftStride, right, rightStride, target, count)
        }
    }

    private static func run<Operation: FloatBinaryOperation>(_: Operation.Type) -> BinaryRun {
        { left, leftStride, right, rightStride, target, count in
            switch (leftStride, rightStride) {
            case (1, 1):
                for index in 0..<count { target[index] = Operation.apply(left[index], right[index]) }
            case (1, 0):
                let value = right[0]
                for index in 0..<count { target[index] = Operation.apply(left[index], value) }
            case (0, 1):
                let value = left[0]
                for index in 0..<count { target[index] = Operation.apply(value, right[index]) }
            default:
                for index in 0..<count { target[index] = Operation.apply(left[index * leftStride], right[index * rightStride]) }
            }
        }
    }
}

/// One float binary operation, for `ElementwiseKernels`' specialised loops.
protocol FloatBinaryOperation: Sendable {
    static func apply(_ left: Float, _ right: Float) -> Float
}

private enum Add: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { left + right }
}

private enum Subtract: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { left - right }
}

private enum Multiply: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { left * right }
}

private enum Divide: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { left / right }
}

private enum Maximum: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { Swift.max(left, right) }
}

private enum Power: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { pow(left, right) }
}

private enum Minimum: FloatBinaryOperation {
    @inline(__always) static func apply(_ left: Float, _ right: Float) -> Float { Swift.min(left, right) }
}
