import Foundation
import ModelFeatures
import ModelSpec

/// The trees of a tree ensemble, flattened for evaluation: every node in one
/// array, children by position, leaves holding their (dimension, value) pairs.
struct TreeForest: Sendable {
    enum Test: UInt8, Sendable {
        case lessThanOrEqual, lessThan, greaterThanOrEqual, greaterThan, equal, notEqual
    }

    /// 24 bytes, so that a tree's nodes stay in the cache while many rows walk it.
    struct Node: Sendable {
        var threshold: Double
        /// The feature tested; -1 for a leaf.
        var feature: Int32
        /// Branches: the children's positions. Leaves: the range of their
        /// values in `leafValues`.
        var trueChild: Int32
        var falseChild: Int32
        var test: Test
        var missingGoesTrue: Bool

        var leafStart: Int { Int(trueChild) }
        var leafEnd: Int { Int(falseChild) }
    }

    let nodes: [Node]
    let roots: [Int]
    let leafValues: [LeafValue]
    let dimensions: Int
    let base: [Double]
    /// The largest feature index tested, plus one.
    let featureCount: Int
    /// The test every branch makes, when they all make the same.
    let uniformTest: Test?

    init(_ parameters: TreeEnsembleParameters, model: String) throws(RuntimeError) {
        let source = parameters.nodes
        dimensions = Int(clamping: parameters.numPredictionDimensions)
        guard dimensions > 0 else { throw .invalidParameters(model: model, detail: "numPredictionDimensions is 0") }
        let baseValues = parameters.basePredictionValue
        guard baseValues.isEmpty || baseValues.count == dimensions else {
            throw .invalidParameters(model: model, detail: "\(baseValues.count) base prediction values for \(dimensions) dimensions")
        }
        base = baseValues.isEmpty ? Array(repeating: 0, count: dimensions) : baseValues

        struct Key: Hashable { let tree: UInt64; let node: UInt64 }
        var position: [Key: Int] = [:]
        for (index, node) in source.enumerated() {
            let key = Key(tree: node.treeID, node: node.nodeID)
            guard position[key] == nil else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeID) has two nodes with id \(node.nodeID)")
            }
            position[key] = index
        }
        var isChild = Set<Int>()
        var nodes: [Node] = []
        var leafValues: [LeafValue] = []
        var featureCount = 0
        nodes.reserveCapacity(source.count)
        for node in source {
            let test: Test
            switch node.behavior {
            case .leafNode:
                let start = leafValues.count
                for info in node.evaluationInfo {
                    let dimension = Int(clamping: info.evaluationIndex)
                    guard dimension < dimensions else {
                        throw .invalidParameters(model: model, detail: "tree \(node.treeID) node \(node.nodeID) writes dimension \(dimension) of \(dimensions)")
                    }
                    leafValues.append(LeafValue(dimension: dimension, value: info.evaluationValue))
                }
                guard leafValues.count <= Int32.max else {
                    throw .invalidParameters(model: model, detail: "more than \(Int32.max) leaf values")
                }
                nodes.append(Node(threshold: 0, feature: -1, trueChild: Int32(start), falseChild: Int32(leafValues.count),
                                  test: .lessThanOrEqual, missingGoesTrue: false))
                continue
            case .branchOnValueLessThanEqual: test = .lessThanOrEqual
            case .branchOnValueLessThan: test = .lessThan
            case .branchOnValueGreaterThanEqual: test = .greaterThanOrEqual
            case .branchOnValueGreaterThan: test = .greaterThan
            case .branchOnValueEqual: test = .equal
            case .branchOnValueNotEqual: test = .notEqual
            case .unknown(let value):
                throw .invalidParameters(model: model, detail: "tree \(node.treeID) node \(node.nodeID) has unknown behavior \(value)")
            }
            guard let trueChild = position[Key(tree: node.treeID, node: node.trueChildNodeID)],
                  let falseChild = position[Key(tree: node.treeID, node: node.falseChildNodeID)]
            else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeID) node \(node.nodeID) names a child that does not exist")
            }
            isChild.insert(trueChild)
            isChild.insert(falseChild)
            guard node.branchFeatureIndex < UInt64(Int32.max), source.count <= Int32.max else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeID) node \(node.nodeID) tests feature \(node.branchFeatureIndex), past what modelc indexes")
            }
            let feature = Int32(node.branchFeatureIndex)
            featureCount = max(featureCount, Int(feature) + 1)
            nodes.append(Node(threshold: node.branchFeatureValue, feature: feature,
                              trueChild: Int32(trueChild), falseChild: Int32(falseChild), test: test,
                              missingGoesTrue: node.missingValueTracksTrueChild))
        }
        // A tree's root is its one node that no other node names as a child.
        var roots: [Int] = []
        var seenTrees = Set<UInt64>()
        for (index, node) in source.enumerated() where !isChild.contains(index) {
            guard seenTrees.insert(node.treeID).inserted else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeID) has more than one root")
            }
            roots.append(index)
        }
        self.nodes = nodes
        self.roots = roots
        self.leafValues = leafValues
        self.featureCount = featureCount
        let tests = Set(nodes.filter { $0.feature >= 0 }.map(\.test))
        uniformTest = tests.count == 1 ? tests.first : nil
        // Walking cannot loop: every child is reached from one root by a path
        // that only descends if the node graph is a forest; check that.
        try Self.checkAcyclic(nodes: nodes, roots: roots, model: model)
    }

    private static func checkAcyclic(nodes: [Node], roots: [Int], model: String) throws(RuntimeError) {
        var visits = [UInt8](repeating: 0, count: nodes.count)
        var stack = roots
        while let index = stack.popLast() {
            visits[index] += 1
            guard visits[index] == 1 else {
                throw .invalidParameters(model: model, detail: "the trees are not trees: node \(index) is reached twice")
            }
            let node = nodes[index]
            if node.feature >= 0 { stack.append(Int(node.trueChild)); stack.append(Int(node.falseChild)) }
        }
    }

    /// The summed leaf values of every tree plus the base prediction.
    func evaluate(_ x: UnsafeBufferPointer<Double>) -> [Double] {
        var sums = base
        sums.withUnsafeMutableBufferPointer { sums in
            evaluate(rows: x, count: 1, stride: x.count, into: sums)
        }
        return sums
    }

    /// Rows processed per tree before moving to the next tree: enough for the
    /// tree's nodes to be reused from the cache, few enough that the rows'
    /// features and sums stay there too.
    static let rowsPerBlock = 64

    /// The sums of `count` rows laid out `stride` values apart in `rows`
    /// (each at least `featureCount` long), added into `sums` (`count` ×
    /// `dimensions`, which the caller fills with the base prediction).
    /// Tree by tree over blocks of rows, as scikit-learn's forests predict.
    func evaluate(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int, into sums: UnsafeMutableBufferPointer<Double>) {
        // Converted models test one way throughout (scikit-learn x ≤ t,
        // XGBoost x < t): those walk without a switch per node.
        switch uniformTest {
        case .lessThanOrEqual?:
            walk(rows: rows, count: count, stride: stride, into: sums) { value, node in value <= node.threshold }
        case .lessThan?:
            walk(rows: rows, count: count, stride: stride, into: sums) { value, node in value < node.threshold }
        default:
            walk(rows: rows, count: count, stride: stride, into: sums) { value, node in
                switch node.test {
                case .lessThanOrEqual: value <= node.threshold
                case .lessThan: value < node.threshold
                case .greaterThanOrEqual: value >= node.threshold
                case .greaterThan: value > node.threshold
                case .equal: value == node.threshold
                case .notEqual: value != node.threshold
                }
            }
        }
    }

    /// Rows walked down a tree together: their node loads are independent, so
    /// the processor overlaps them instead of waiting on one path at a time.
    static let lanes = 16

    /// Walks every tree for blocks of rows, `lanes` rows in step. `test` is
    /// the branch's comparison for a value that is not NaN (NaN compares
    /// false, and then follows the node's missing-value track).
    @inline(__always)
    private func walk(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int, into sums: UnsafeMutableBufferPointer<Double>,
                      test: (Double, Node) -> Bool) {
        nodes.withUnsafeBufferPointer { nodes in
            leafValues.withUnsafeBufferPointer { leaves in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: Self.lanes) { position in
                    func step(_ node: Node, row: Int) -> Int {
                        let value = rows[row * stride + Int(node.feature)]
                        let goesTrue = value.isNaN ? node.missingGoesTrue : test(value, node)
                        return Int(goesTrue ? node.trueChild : node.falseChild)
                    }
                    func add(_ leaf: Node, row: Int) {
                        for index in leaf.leafStart..<leaf.leafEnd {
                            sums[row * dimensions + leaves[index].dimension] += leaves[index].value
                        }
                    }
                    var blockStart = 0
                    while blockStart < count {
                        let blockEnd = min(count, blockStart + Self.rowsPerBlock)
                        for root in roots {
                            var row = blockStart
                            while row + Self.lanes <= blockEnd {
                                for lane in 0..<Self.lanes { position[lane] = root }
                                var walking = true
                                while walking {
                                    walking = false
                                    for lane in 0..<Self.lanes {
                                        let node = nodes[position[lane]]
                                        if node.feature >= 0 {
                                            position[lane] = step(node, row: row + lane)
                                            walking = true
                                        }
                                    }
                                }
                                for lane in 0..<Self.lanes { add(nodes[position[lane]], row: row + lane) }
                                row += Self.lanes
                            }
                            while row < blockEnd {
                                var node = nodes[root]
                                while node.feature >= 0 { node = nodes[step(node, row: row)] }
                                add(node, row: row)
                                row += 1
                            }
                        }
                        blockStart = blockEnd
                    }
                }
            }
        }
    }

    /// Every row's sums: the rows' input vectors gathered, then evaluated
    /// together. A row whose inputs cannot be read gets its error.
    func evaluate(batch: [[String: FeatureValue]], interface: ModelInterface) -> [Result<ArraySlice<Double>, RuntimeError>] {
        let width = max(featureCount, 1)
        var rows = [Double](repeating: 0, count: batch.count * width)
        var failures: [Int: RuntimeError] = [:]
        for (row, inputs) in batch.enumerated() {
            do throws(RuntimeError) {
                try interface.withInputVector(inputs) { x throws(RuntimeError) in
                    guard x.count >= featureCount else {
                        throw .invalidValue(feature: interface.inputs.map(\.name).joined(separator: ", "),
                                            detail: "\(x.count) input values, the trees test feature \(featureCount - 1)")
                    }
                    for index in 0..<featureCount { rows[row * width + index] = x[index] }
                }
            } catch {
                failures[row] = error
            }
        }
        var sums = [Double](repeating: 0, count: batch.count * dimensions)
        for row in 0..<batch.count {
            for dimension in 0..<dimensions { sums[row * dimensions + dimension] = base[dimension] }
        }
        rows.withUnsafeBufferPointer { rows in
            sums.withUnsafeMutableBufferPointer { sums in
                evaluate(rows: rows, count: batch.count, stride: width, into: sums)
            }
        }
        return (0..<batch.count).map { row in
            if let failure = failures[row] { return .failure(failure) }
            return .success(sums[(row * dimensions)..<((row + 1) * dimensions)])
        }
    }
}

/// One value a leaf adds to one prediction dimension.
struct LeafValue: Sendable {
    var dimension: Int
    var value: Double
}

extension TreeEnsembleTransform {
    /// The transformed sums.
    func apply(_ values: [Double]) -> [Double] {
        switch self {
        case .none: values
        case .logistic: values.map(sigmoid)
        case .softmax: ClassicModels.softmax(values)
        case .softmaxWithZeroReference: ClassicModels.softmax([0] + values)
        }
    }
}

/// A tree-ensemble regressor: the transformed sums, one per dimension.
struct TreeEnsembleRegressorEngine: PredictionEngine {
    let interface: ModelInterface
    let forest: TreeForest
    let transform: TreeEnsembleTransform

    init(_ model: TreeEnsembleRegressorParameters, interface: ModelInterface) throws(RuntimeError) {
        guard let parameters = model.treeEnsemble else {
            throw .invalidParameters(model: interface.kind, detail: "no tree ensemble parameters")
        }
        self.interface = interface
        forest = try TreeForest(parameters, model: interface.kind)
        transform = model.transform
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        guard x.count >= forest.featureCount else {
            throw .invalidValue(feature: interface.inputs.map(\.name).joined(separator: ", "),
                                detail: "\(x.count) input values, the trees test feature \(forest.featureCount - 1)")
        }
        return outputs(transform.apply(x.withUnsafeBufferPointer(forest.evaluate)))
    }

    func predictions(_ batch: [[String: FeatureValue]]) -> [Result<[String: FeatureValue], RuntimeError>] {
        forest.evaluate(batch: batch, interface: interface).map { sums in sums.map { outputs(transform.apply(Array($0))) } }
    }

    private func outputs(_ values: [Double]) -> [String: FeatureValue] {
        guard let name = interface.primaryOutput else { return [:] }
        return [name: values.count == 1 ? .double(values[0]) : .multiArray(MultiArray(values, shape: [values.count]))]
    }
}

/// A tree-ensemble classifier. With one dimension and two classes the value
/// is the second class's probability (after the transform); otherwise one
/// dimension per class.
struct TreeEnsembleClassifierEngine: PredictionEngine {
    let interface: ModelInterface
    let forest: TreeForest
    let transform: TreeEnsembleTransform
    let labels: ClassLabels

    init(_ model: TreeEnsembleClassifierParameters, interface: ModelInterface) throws(RuntimeError) {
        guard let parameters = model.treeEnsemble else {
            throw .invalidParameters(model: interface.kind, detail: "no tree ensemble parameters")
        }
        self.interface = interface
        forest = try TreeForest(parameters, model: interface.kind)
        transform = model.transform
        labels = model.classLabels ?? .strings([])
        let expected = transform == .softmaxWithZeroReference ? labels.count - 1 : labels.count
        guard forest.dimensions == expected || (forest.dimensions == 1 && labels.count == 2) else {
            throw .invalidParameters(model: interface.kind, detail: "\(forest.dimensions) prediction dimensions for \(labels.count) class labels")
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        guard x.count >= forest.featureCount else {
            throw .invalidValue(feature: interface.inputs.map(\.name).joined(separator: ", "),
                                detail: "\(x.count) input values, the trees test feature \(forest.featureCount - 1)")
        }
        return outputs(x.withUnsafeBufferPointer(forest.evaluate))
    }

    func predictions(_ batch: [[String: FeatureValue]]) -> [Result<[String: FeatureValue], RuntimeError>] {
        forest.evaluate(batch: batch, interface: interface).map { sums in sums.map { outputs(Array($0)) } }
    }

    private func outputs(_ sums: [Double]) -> [String: FeatureValue] {
        var values = transform.apply(sums)
        if values.count == 1, labels.count == 2 { values = [1 - values[0], values[0]] }
        return interface.classifierOutputs(labels: labels, probabilities: values)
    }
}

extension TreeForest {
    /// The sums of `count` rows `stride` doubles apart, base prediction
    /// included, `dimensions` per row.
    ///
    /// - Throws: `RuntimeError.invalidValue` when the rows are shorter than the features the trees test.
    func sums(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int, interface: ModelInterface) throws(RuntimeError) -> [Double] {
        guard stride >= featureCount else {
            throw .invalidValue(feature: interface.inputs.map(\.name).joined(separator: ", "),
                                detail: "\(stride) input values, the trees test feature \(featureCount - 1)")
        }
        var sums = [Double](repeating: 0, count: count * dimensions)
        for row in 0..<count {
            for dimension in 0..<dimensions { sums[row * dimensions + dimension] = base[dimension] }
        }
        sums.withUnsafeMutableBufferPointer { sums in evaluate(rows: rows, count: count, stride: stride, into: sums) }
        return sums
    }
}

extension TreeEnsembleRegressorEngine: ColumnarPredictionEngine {
    func predictions(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int) throws(RuntimeError) -> [String: FeatureColumn] {
        let sums = try forest.sums(rows: rows, count: count, stride: stride, interface: interface)
        let dimensions = forest.dimensions
        let width = transform == .softmaxWithZeroReference ? dimensions + 1 : dimensions
        var values = MultiArray(shape: width == 1 ? [count] : [count, width], dataType: .float64)
        values.withUnsafeMutableBytes { raw in
            let out = raw.bindMemory(to: Double.self)
            for row in 0..<count {
                let transformed = transform.apply(Array(sums[(row * dimensions)..<((row + 1) * dimensions)]))
                for index in 0..<width { out[row * width + index] = transformed[index] }
            }
        }
        guard let name = interface.primaryOutput else { return [:] }
        return [name: .array(values)]
    }
}

extension TreeEnsembleClassifierEngine: ColumnarPredictionEngine {
    func predictions(rows: UnsafeBufferPointer<Double>, count: Int, stride: Int) throws(RuntimeError) -> [String: FeatureColumn] {
        let sums = try forest.sums(rows: rows, count: count, stride: stride, interface: interface)
        let dimensions = forest.dimensions
        let classes = labels.count
        var probabilities = MultiArray(shape: [count, classes], dataType: .float64)
        probabilities.withUnsafeMutableBytes { raw in
            let out = raw.bindMemory(to: Double.self)
            for row in 0..<count {
                let slice = sums[(row * dimensions)..<((row + 1) * dimensions)]
                // The common case (scikit-learn's forests: no transform, one
                // dimension per class) is copied without a row array.
                if transform == .none, dimensions == classes {
                    for index in 0..<classes { out[row * classes + index] = slice[slice.startIndex + index] }
                    continue
                }
                var values = transform.apply(Array(slice))
                if values.count == 1, classes == 2 { values = [1 - values[0], values[0]] }
                for index in 0..<min(classes, values.count) { out[row * classes + index] = values[index] }
            }
        }
        return interface.classifierColumns(labels: labels, probabilities: probabilities)
    }
}
