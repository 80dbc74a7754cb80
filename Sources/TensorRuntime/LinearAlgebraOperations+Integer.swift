import ModelFeatures

extension LinearAlgebraOperations {
    /// A matrix product with an int32 operand (MIL's matmul takes fp16, fp32
    /// or int32 for each): our own loop, exact. An integer output wraps like
    /// int32; with a float operand or output, the sum is taken in double.
    static func integerMatmul(_ context: OperationContext, x: PlanValue, y: PlanValue, transposeX tx: Bool, transposeY ty: Bool,
                              bias: PlanValue?, shape: [Int], batch: [Int], m: Int, n: Int, k: Int) throws(RuntimeError) {
        let xShape = x.rank == 1 ? [1, x.shape[0]] : x.shape, yShape = y.rank == 1 ? [y.shape[0], 1] : y.shape
        let xStrides = Shapes.broadcastStrides(Array(xShape.dropLast(2)), to: batch)
        let yStrides = Shapes.broadcastStrides(Array(yShape.dropLast(2)), to: batch)
        var xOffsets: [Int] = [], yOffsets: [Int] = []
        Shapes.forEachIndex(batch) { index in
            xOffsets.append(zip(index, xStrides).reduce(0) { $0 + $1.0 * $1.1 })
            yOffsets.append(zip(index, yStrides).reduce(0) { $0 + $1.0 * $1.1 })
        }
        if xOffsets.isEmpty { xOffsets = [0]; yOffsets = [0] }
        let type = context.outputType()
        let out = try context.output(shape, type: type)
        let a = x.id, b = y.id, biasID = bias?.id, biasCount = bias?.count ?? 0
        let xFloat = x.isFloat, yFloat = y.isFloat, biasFloat = bias?.isFloat ?? false
        let integer = !type.isFloat && !xFloat && !yFloat && !biasFloat
        let offsetsX = xOffsets, offsetsY = yOffsets
        context.run(reads: [x, y] + (bias.map { [$0] } ?? []), writes: [out]) { buffers in
            func element(_ id: Int, _ isFloat: Bool, _ index: Int) -> Double {
                isFloat ? Double(buffers.floats(id)[index]) : Double(buffers.ints(id)[index])
            }
            for (item, (xo, yo)) in zip(offsetsX, offsetsY).enumerated() {
                for row in 0..<m {
                    for column in 0..<n {
                        let target = (item * m + row) * n + column
                        let biasIndex = biasCount == 1 ? 0 : column
                        if integer {
                            var sum: Int32 = biasID.map { buffers.ints($0)[biasIndex] } ?? 0
                            for p in 0..<k {
                                let left = buffers.ints(a)[xo * m * k + (tx ? p * m + row : row * k + p)]
                                let right = buffers.ints(b)[yo * k * n + (ty ? column * k + p : p * n + column)]
                                sum = sum &+ left &* right
                            }
                            buffers.ints(out)[target] = sum
                            continue
                        }
                        var sum = biasID.map { element($0, biasFloat, biasIndex) } ?? 0
                        for p in 0..<k {
                            sum += element(a, xFloat, xo * m * k + (tx ? p * m + row : row * k + p))
                                * element(b, yFloat, yo * k * n + (ty ? column * k + p : p * n + column))
                        }
                        if type.isFloat { buffers.floats(out)[target] = Float(sum) } else { buffers.ints(out)[target] = truncatedInt32(Float(sum)) }
                    }
                }
            }
        }
    }
}
