import CoreMLSchema
import Foundation
import ModelFeatures
import ModelSpec

/// The trees of a tree ensemble, flattened for evaluation: every node in one
/// array, children by position, leaves holding their (dimension, value) pairs.
struct TreeForest: Sendable {
    enum Test: Sendable {
        case lessThanOrEqual, lessThan, greaterThanOrEqual, greaterThan, equal, notEqual
    }

    struct Node: Sendable {
        /// The feature tested; -1 for a leaf.
        var feature: Int
        var threshold: Double
        var test: Test
        var trueChild: Int
        var falseChild: Int
        var missingGoesTrue: Bool
        /// The range of this leaf's values in `leafValues`.
        var leafStart: Int
        var leafEnd: Int
    }

    let nodes: [Node]
    let roots: [Int]
    let leafValues: [(dimension: Int, value: Double)]
    let dimensions: Int
    let base: [Double]
    /// The largest feature index tested, plus one.
    let featureCount: Int

    init(_ parameters: CoreML__Specification__TreeEnsembleParameters, model: String) throws(RuntimeError) {
        let source = elements(parameters.nodes, parameters.n_nodes).map(\.pointee)
        dimensions = Int(clamping: parameters.numpredictiondimensions)
        guard dimensions > 0 else { throw .invalidParameters(model: model, detail: "numPredictionDimensions is 0") }
        let baseValues = CSupport.doubles(parameters.basepredictionvalue, parameters.n_basepredictionvalue)
        guard baseValues.isEmpty || baseValues.count == dimensions else {
            throw .invalidParameters(model: model, detail: "\(baseValues.count) base prediction values for \(dimensions) dimensions")
        }
        base = baseValues.isEmpty ? Array(repeating: 0, count: dimensions) : baseValues

        struct Key: Hashable { let tree: UInt64; let node: UInt64 }
        var position: [Key: Int] = [:]
        for (index, node) in source.enumerated() {
            let key = Key(tree: node.treeid, node: node.nodeid)
            guard position[key] == nil else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeid) has two nodes with id \(node.nodeid)")
            }
            position[key] = index
        }
        var isChild = Set<Int>()
        var nodes: [Node] = []
        var leafValues: [(dimension: Int, value: Double)] = []
        var featureCount = 0
        nodes.reserveCapacity(source.count)
        for node in source {
            let behavior = node.nodebehavior
            if behavior == CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__LeafNode {
                let start = leafValues.count
                for info in elements(node.evaluationinfo, node.n_evaluationinfo) {
                    let dimension = Int(clamping: info.pointee.evaluationindex)
                    guard dimension < dimensions else {
                        throw .invalidParameters(model: model, detail: "tree \(node.treeid) node \(node.nodeid) writes dimension \(dimension) of \(dimensions)")
                    }
                    leafValues.append((dimension, info.pointee.evaluationvalue))
                }
                nodes.append(Node(feature: -1, threshold: 0, test: .lessThanOrEqual, trueChild: -1, falseChild: -1,
                                  missingGoesTrue: false, leafStart: start, leafEnd: leafValues.count))
                continue
            }
            let test: Test
            switch behavior {
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueLessThanEqual: test = .lessThanOrEqual
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueLessThan: test = .lessThan
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueGreaterThanEqual: test = .greaterThanOrEqual
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueGreaterThan: test = .greaterThan
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueEqual: test = .equal
            case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__BranchOnValueNotEqual: test = .notEqual
            default:
                throw .invalidParameters(model: model, detail: "tree \(node.treeid) node \(node.nodeid) has unknown behavior \(behavior.rawValue)")
            }
            guard let trueChild = position[Key(tree: node.treeid, node: node.truechildnodeid)],
                  let falseChild = position[Key(tree: node.treeid, node: node.falsechildnodeid)]
            else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeid) node \(node.nodeid) names a child that does not exist")
            }
            isChild.insert(trueChild)
            isChild.insert(falseChild)
            let feature = Int(clamping: node.branchfeatureindex)
            featureCount = max(featureCount, feature + 1)
            nodes.append(Node(feature: feature, threshold: node.branchfeaturevalue, test: test,
                              trueChild: trueChild, falseChild: falseChild,
                              missingGoesTrue: node.missingvaluetrackstruechild != 0, leafStart: 0, leafEnd: 0))
        }
        // A tree's root is its one node that no other node names as a child.
        var roots: [Int] = []
        var seenTrees = Set<UInt64>()
        for (index, node) in source.enumerated() where !isChild.contains(index) {
            guard seenTrees.insert(node.treeid).inserted else {
                throw .invalidParameters(model: model, detail: "tree \(node.treeid) has more than one root")
            }
            roots.append(index)
        }
        self.nodes = nodes
        self.roots = roots
        self.leafValues = leafValues
        self.featureCount = featureCount
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
            if node.feature >= 0 { stack.append(node.trueChild); stack.append(node.falseChild) }
        }
    }

    /// The summed leaf values of every tree plus the base prediction.
    func evaluate(_ x: UnsafeBufferPointer<Double>) -> [Double] {
        var sums = base
        nodes.withUnsafeBufferPointer { nodes in
            for root in roots {
                var index = root
                while true {
                    let node = nodes[index]
                    if node.feature < 0 {
                        for leaf in node.leafStart..<node.leafEnd {
                            let (dimension, value) = leafValues[leaf]
                            sums[dimension] += value
                        }
                        break
                    }
                    let value = x[node.feature]
                    let goesTrue: Bool
                    if value.isNaN {
                        goesTrue = node.missingGoesTrue
                    } else {
                        switch node.test {
                        case .lessThanOrEqual: goesTrue = value <= node.threshold
                        case .lessThan: goesTrue = value < node.threshold
                        case .greaterThanOrEqual: goesTrue = value >= node.threshold
                        case .greaterThan: goesTrue = value > node.threshold
                        case .equal: goesTrue = value == node.threshold
                        case .notEqual: goesTrue = value != node.threshold
                        }
                    }
                    index = goesTrue ? node.trueChild : node.falseChild
                }
            }
        }
        return sums
    }
}

/// The post-evaluation transforms of tree ensembles.
enum TreeTransform {
    case none, softmax, logistic, softmaxWithZeroReference

    init(_ transform: CoreML__Specification__TreeEnsemblePostEvaluationTransform) {
        switch transform {
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Classification_SoftMax: self = .softmax
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Regression_Logistic: self = .logistic
        case CORE_ML__SPECIFICATION__TREE_ENSEMBLE_POST_EVALUATION_TRANSFORM__Classification_SoftMaxWithZeroClassReference:
            self = .softmaxWithZeroReference
        default: self = .none
        }
    }

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
    let transform: TreeTransform

    init(_ model: CoreML__Specification__TreeEnsembleRegressor, interface: ModelInterface) throws(RuntimeError) {
        guard let parameters = model.treeensemble?.pointee else {
            throw .invalidParameters(model: interface.kind, detail: "no tree ensemble parameters")
        }
        self.interface = interface
        forest = try TreeForest(parameters, model: interface.kind)
        transform = TreeTransform(model.postevaluationtransform)
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        guard x.count >= forest.featureCount else {
            throw .invalidValue(feature: interface.inputs.map(\.name).joined(separator: ", "),
                                detail: "\(x.count) input values, the trees test feature \(forest.featureCount - 1)")
        }
        let values = transform.apply(x.withUnsafeBufferPointer(forest.evaluate))
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
    let transform: TreeTransform
    let labels: ClassLabelList

    init(_ model: CoreML__Specification__TreeEnsembleClassifier, interface: ModelInterface) throws(RuntimeError) {
        guard let parameters = model.treeensemble?.pointee else {
            throw .invalidParameters(model: interface.kind, detail: "no tree ensemble parameters")
        }
        self.interface = interface
        forest = try TreeForest(parameters, model: interface.kind)
        transform = TreeTransform(model.postevaluationtransform)
        labels = CSupport.labels(case: model.class_labels_case.rawValue, strings: model.stringclasslabels, int64s: model.int64classlabels)
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
        var values = transform.apply(x.withUnsafeBufferPointer(forest.evaluate))
        if values.count == 1, labels.count == 2 { values = [1 - values[0], values[0]] }
        return interface.classifierOutputs(labels: labels, probabilities: values)
    }
}
