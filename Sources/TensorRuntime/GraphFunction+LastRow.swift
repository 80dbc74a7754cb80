extension GraphFunction {
    /// This function computing output `output` for its last row only, where a
    /// product computes it row by row (`linear`, `fused_linear` without a
    /// residual, `matmul`; then `cast`s): its input `x`, `[1, …, rows, n]`
    /// with every axis before the rows 1, is sliced to its last row first
    /// (a view: no copy), so the output is `[1, …, 1, columns]`. A decoder's
    /// LM head: a prompt's logits for every position were a sixth of its
    /// products and 16 MB of a 200M decoder's arena, of which a generator
    /// reads the last position's. `nil` where the output is not computed so.
    func lastRowOnly(of output: String) -> GraphFunction? {
        guard block.outputs.contains(output) else { return nil }
        var operations = block.operations
        var name = output
        var chain: [Int] = []
        while let index = operations.lastIndex(where: { $0.outputs.contains { $0.name == name } }) {
            chain.append(index)
            let op = operations[index]
            guard op.type == "cast" else { break }
            guard case .value(let input)? = op.arguments["x"]?.first else { return nil }
            name = input
        }
        guard let productIndex = chain.last else { return nil }
        let product = operations[productIndex]
        let rowWise = product.type == "linear" || (product.type == "fused_linear" && product.arguments["residual"] == nil)
            || (product.type == "matmul" && Self.isFalse(product.arguments["transpose_x"]))
        guard rowWise, product.outputs.count == 1, case .value(let x)? = product.arguments["x"]?.first,
              let type = valueType(x), let shape = type.shape, shape.count >= 2,
              shape.dropLast(2).allSatisfy({ $0 == 1 }) else { return nil }
        let rank = shape.count
        var rowShape = shape
        rowShape[rank - 2] = 1
        let begin = (0..<rank).map { Int32($0 == rank - 2 ? -1 : 0) }
        let size = (0..<rank).map { Int32($0 == rank - 2 ? 1 : -1) }
        let row = "\(x) (last row)"
        let slice = GraphOperation(type: "slice_by_size", arguments: [
            "x": [.value(x)],
            "begin": [.constant(Tensor(ints: begin, shape: [rank]))],
            "size": [.constant(Tensor(ints: size, shape: [rank]))],
        ], outputs: [(row, ValueType(element: type.element, shape: rowShape))], blocks: [])
        // The chain's outputs have one row now.
        for index in chain {
            for output in operations[index].outputs.indices {
                if var outputShape = operations[index].outputs[output].type.shape, outputShape.count >= 2 {
                    outputShape[outputShape.count - 2] = 1
                    operations[index].outputs[output].type.shape = outputShape
                }
            }
        }
        operations[productIndex].arguments["x"] = [.value(row)]
        operations.insert(slice, at: productIndex)
        var function = self
        function.name = "\(self.name) (last row of \(output))"
        function.block.operations = operations
        return function
    }

    /// Whether a flag argument is absent or a constant 0.
    private static func isFalse(_ argument: [GraphArgument]?) -> Bool {
        guard let argument else { return true }
        if case .constant(let flag)? = argument.first { return flag.floats.first == 0 }
        return false
    }

    /// The declared type of value `name`: an input's, or the output's of the operation computing it.
    private func valueType(_ name: String) -> ValueType? {
        if let input = inputs.first(where: { $0.name == name }) { return input.type }
        for op in block.operations.reversed() {
            if let output = op.outputs.first(where: { $0.name == name }) { return output.type }
        }
        return nil
    }
}
