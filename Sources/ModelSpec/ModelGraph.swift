/// The dataflow of a model as nodes, edges and nested clusters: what
/// `modelc inspect --graph` draws.
///
/// Built by `ModelGraph(_:)` from a `ModelFile`. Inputs and outputs of the
/// model are nodes; so is every neural-network layer and every ML-program
/// operation except constants, which are folded into the operations that use
/// them (small values as parameters, stored tensors as weights). Pipeline
/// stages, program functions and the blocks of `cond` / `while_loop` are
/// clusters. An edge carries one value from its producer to a consumer.
public struct ModelGraph: Equatable, Sendable {
    /// The whole model: its inputs and outputs, and everything inside.
    public var root: GraphCluster
    /// Every edge, in the order values are consumed.
    public var edges: [GraphEdge]

    public init(root: GraphCluster, edges: [GraphEdge]) {
        self.root = root
        self.edges = edges
    }

    /// Every node, depth first through the clusters.
    public var allNodes: [GraphNode] { root.allNodes }
    /// Every cluster below the root, depth first.
    public var allClusters: [GraphCluster] { root.allClusters }
}

/// One box of the graph.
public struct GraphNode: Equatable, Sendable {
    public enum Kind: String, Equatable, Sendable {
        /// A model, function or block input.
        case input
        /// A model output.
        case output
        /// A layer, an operation, or a whole non-network model.
        case operation
    }

    /// Unique within the graph (`n0`, `n1`, …).
    public var id: String
    public var kind: Kind
    /// The layer kind or operation type (`convolution`, `conv`); for inputs
    /// and outputs, the feature or value name.
    public var title: String
    /// The layer name or the operation's first output; empty for inputs and outputs.
    public var name: String
    /// Key parameters and the output type, one short line each.
    public var details: [String]
    /// The weights the node holds or reads: `weight: fp16 [64, 3, 3, 3]`.
    public var weights: [String]

    public init(id: String, kind: Kind, title: String, name: String, details: [String], weights: [String]) {
        self.id = id
        self.kind = kind
        self.title = title
        self.name = name
        self.details = details
        self.weights = weights
    }
}

/// A group of nodes drawn inside a frame.
public struct GraphCluster: Equatable, Sendable {
    /// Unique within the graph (`cluster_0`, …); `root` for the whole model.
    public var id: String
    public var label: String
    public var nodes: [GraphNode]
    public var clusters: [GraphCluster]

    public init(id: String, label: String, nodes: [GraphNode], clusters: [GraphCluster]) {
        self.id = id
        self.label = label
        self.nodes = nodes
        self.clusters = clusters
    }

    /// The nodes of this cluster and of every cluster inside it.
    public var allNodes: [GraphNode] { nodes + clusters.flatMap(\.allNodes) }
    /// The clusters inside this one, at any depth, depth first.
    public var allClusters: [GraphCluster] { clusters.flatMap { [$0] + $0.allClusters } }
}

/// A value passed from one node to another.
public struct GraphEdge: Equatable, Sendable {
    /// The producing node's id.
    public var from: String
    /// The consuming node's id.
    public var to: String
    /// The value's name.
    public var value: String

    public init(from: String, to: String, value: String) {
        self.from = from
        self.to = to
        self.value = value
    }
}
