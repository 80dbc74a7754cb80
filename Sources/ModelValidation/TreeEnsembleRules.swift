import CoreMLSchema
import ModelSpec

/// Rules on tree ensembles: node ids, child links, leaves and prediction
/// dimensions.
enum TreeEnsembleRules {
    typealias Node = CoreML__Specification__TreeEnsembleParameters__TreeNode

    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        let parameters: UnsafeMutablePointer<CoreML__Specification__TreeEnsembleParameters>? =
            model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER
            ? model.pointee.treeensembleclassifier?.pointee.treeensemble
            : model.pointee.treeensembleregressor?.pointee.treeensemble
        guard let ensemble = parameters?.pointee else {
            sink.error("tree.params.missing", "the tree ensemble has no parameters (treeEnsemble)")
            return
        }
        let dimensions = ensemble.numpredictiondimensions
        if dimensions == 0 {
            sink.error("tree.dimensions", "numPredictionDimensions is 0; it must be at least 1")
        }
        let base = ensemble.n_basepredictionvalue
        if base != 0 && UInt64(base) != dimensions {
            sink.error("tree.dimensions",
                       "basePredictionValue has \(counted(base, "value")), expected \(dimensions) (numPredictionDimensions)")
        }
        let nodes = elements(ensemble.nodes, ensemble.n_nodes)
        if nodes.isEmpty {
            sink.error("tree.nodes.empty", "the tree ensemble has no nodes")
        }

        var trees: [UInt64: [Int]] = [:]
        var treeOrder: [UInt64] = []
        for (index, node) in nodes.enumerated() {
            let tree = node.pointee.treeid
            if trees[tree] == nil { treeOrder.append(tree) }
            trees[tree, default: []].append(index)
        }
        for tree in treeOrder {
            var byID: [UInt64: Int] = [:]
            for index in trees[tree] ?? [] {
                let node = nodes[index].pointee
                if let first = byID[node.nodeid] {
                    sink.at(location(index, node)) { sink in
                        sink.error("tree.node.duplicate", "node id \(node.nodeid) is already used by tree node \(first) in tree \(tree)")
                    }
                } else {
                    byID[node.nodeid] = index
                }
            }
            for index in trees[tree] ?? [] {
                let node = nodes[index].pointee
                sink.at(location(index, node)) { sink in
                    checkNode(node, byID: byID, dimensions: dimensions, sink: &sink)
                }
            }
            if let cycle = findCycle(byID: byID, nodes: nodes) {
                sink.error("tree.cycle", "tree \(tree) has a cycle through node id \(cycle); trees must not loop")
            }
        }
    }

    private static func location(_ index: Int, _ node: Node) -> String {
        "tree node \(index) (tree \(node.treeid), node \(node.nodeid))"
    }

    private static func checkNode(_ node: Node, byID: [UInt64: Int], dimensions: UInt64, sink: inout DiagnosticSink) {
        let isLeaf = node.nodebehavior == CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__LeafNode
        if isLeaf {
            let info = elements(node.evaluationinfo, node.n_evaluationinfo)
            if info.isEmpty {
                sink.error("tree.leaf.values", "the leaf has no evaluation info (no values to add)")
            }
            for entry in info where entry.pointee.evaluationindex >= dimensions && dimensions > 0 {
                sink.error("tree.dimensions",
                           "the leaf adds to dimension \(entry.pointee.evaluationindex), outside numPredictionDimensions \(dimensions)")
            }
        } else {
            for (branch, child) in [("true", node.truechildnodeid), ("false", node.falsechildnodeid)] where byID[child] == nil {
                sink.error("tree.child.missing", "the \(branch) child node id \(child) does not exist in tree \(node.treeid)")
            }
        }
    }

    /// A node id on a cycle, if the tree's child links form one.
    private static func findCycle(byID: [UInt64: Int], nodes: [UnsafeMutablePointer<Node>]) -> UInt64? {
        enum Mark { case visiting, done }
        var marks: [UInt64: Mark] = [:]
        for start in byID.keys.sorted() where marks[start] == nil {
            var stack: [(id: UInt64, next: Int)] = [(start, 0)]
            marks[start] = .visiting
            while let top = stack.last {
                guard let index = byID[top.id] else { stack.removeLast(); continue }
                let node = nodes[index].pointee
                let isLeaf = node.nodebehavior == CORE_ML__SPECIFICATION__TREE_ENSEMBLE_PARAMETERS__TREE_NODE__TREE_NODE_BEHAVIOR__LeafNode
                let children = isLeaf ? [] : [node.truechildnodeid, node.falsechildnodeid]
                if top.next >= children.count {
                    marks[top.id] = .done
                    stack.removeLast()
                    continue
                }
                stack[stack.count - 1].next += 1
                let child = children[top.next]
                guard byID[child] != nil else { continue }
                switch marks[child] {
                case .visiting: return child
                case .done: continue
                case nil:
                    marks[child] = .visiting
                    stack.append((child, 0))
                }
            }
        }
        return nil
    }
}
