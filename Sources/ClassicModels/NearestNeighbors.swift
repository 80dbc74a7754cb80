import Foundation
import ModelFeatures
import ModelSpec

/// A k-nearest-neighbours classifier over squared Euclidean distance, with
/// uniform or inverse-distance votes; searched linearly or through a k-d tree,
/// as the model's index says (both give the same neighbours).
struct NearestNeighborsClassifierEngine: PredictionEngine {
    let interface: ModelInterface
    let samples: [Double]
    let dimension: Int
    let sampleLabels: [ClassLabel]
    /// The distinct labels, in order of first appearance.
    let classes: [ClassLabel]
    let classIndex: [Int]
    let k: Int
    let inverseDistance: Bool
    let defaultLabel: ClassLabel?
    let tree: KDTree?

    init(_ knn: NearestNeighborsClassifierParameters, interface: ModelInterface) throws(RuntimeError) {
        let model = interface.kind
        self.interface = interface
        guard let index = knn.index else {
            throw .invalidParameters(model: model, detail: "no nearest-neighbours index")
        }
        let dimension = Int(index.numberOfDimensions)
        self.dimension = dimension
        let rows = index.floatSamples.map { $0.map(Double.init) }
        if let bad = rows.firstIndex(where: { $0.count != dimension }) {
            throw .invalidParameters(model: model, detail: "sample \(bad) has \(rows[bad].count) values, the index has \(dimension) dimensions")
        }
        let samples = rows.flatMap { $0 }
        self.samples = samples
        let labels = knn.classLabels ?? .strings([])
        guard labels.count == rows.count else {
            throw .invalidParameters(model: model, detail: "\(labels.count) labels for \(rows.count) samples")
        }
        sampleLabels = (0..<labels.count).map(labels.label(at:))
        var classes: [ClassLabel] = []
        var positions: [ClassLabel: Int] = [:]
        for label in sampleLabels where positions[label] == nil {
            positions[label] = classes.count
            classes.append(label)
        }
        self.classes = classes
        classIndex = sampleLabels.map { positions[$0] ?? 0 }
        k = Int(clamping: knn.numberOfNeighbors ?? 1)
        guard k >= 1 else { throw .invalidParameters(model: model, detail: "numberOfNeighbors is \(k)") }
        inverseDistance = knn.inverseDistanceWeighting
        defaultLabel = knn.defaultLabel.map(ClassLabel.init)
        if case .singleKdTree(let leafSize) = index.kind {
            tree = KDTree(samples: samples, dimension: dimension, leafSize: max(1, Int(leafSize ?? 30)))
        } else {
            tree = nil
        }
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        let x = try interface.inputVector(inputs)
        try interface.require(x, count: dimension)
        let neighbours = tree?.nearest(k, to: x) ?? linearNearest(k, to: x)
        guard !neighbours.isEmpty else {
            guard let defaultLabel, let name = interface.predictedFeatureName ?? interface.outputs.first?.name else {
                throw .invalidParameters(model: interface.kind, detail: "the index holds no samples and the model has no default label")
            }
            return [name: defaultLabel.featureValue]
        }
        var scores = [Double](repeating: 0, count: classes.count)
        let exact = neighbours.filter { $0.distance == 0 }
        if inverseDistance, !exact.isEmpty {
            // A sample at distance zero outweighs every other: only those vote.
            for neighbour in exact { scores[classIndex[neighbour.index]] += 1 }
        } else {
            for neighbour in neighbours {
                scores[classIndex[neighbour.index]] += inverseDistance ? 1 / neighbour.distance.squareRoot() : 1
            }
        }
        let total = scores.reduce(0, +)
        let list: ClassLabels = switch classes.first {
        case .int64: .int64s(classes.map { if case .int64(let value) = $0 { value } else { 0 } })
        default: .strings(classes.map(\.description))
        }
        return interface.classifierOutputs(labels: list, probabilities: scores.map { $0 / total })
    }

    /// The k nearest samples by scanning every one; ties keep sample order.
    private func linearNearest(_ k: Int, to x: [Double]) -> [Neighbour] {
        var best = NeighbourHeap(capacity: k)
        samples.withUnsafeBufferPointer { all in
            for row in 0..<(all.count / max(dimension, 1)) {
                let distance = LinearAlgebra.squaredDistance(UnsafeBufferPointer(rebasing: all[(row * dimension)..<((row + 1) * dimension)]), x)
                best.offer(Neighbour(index: row, distance: distance))
            }
        }
        return best.sorted
    }
}

/// A neighbour: a sample's position and squared distance.
struct Neighbour: Sendable {
    var index: Int
    var distance: Double

    /// Orders by distance, then by sample position, so ties are deterministic.
    func isCloser(than other: Neighbour) -> Bool {
        distance < other.distance || (distance == other.distance && index < other.index)
    }
}

/// The k best neighbours seen so far (k is small: a sorted insert).
struct NeighbourHeap {
    let capacity: Int
    private(set) var sorted: [Neighbour] = []

    init(capacity: Int) { self.capacity = capacity }

    /// The distance a candidate must beat, or infinity while not full.
    var bound: Double { sorted.count < capacity ? .infinity : sorted[sorted.count - 1].distance }

    mutating func offer(_ candidate: Neighbour) {
        if sorted.count == capacity, let last = sorted.last, !candidate.isCloser(than: last) { return }
        let position = sorted.firstIndex { candidate.isCloser(than: $0) } ?? sorted.count
        sorted.insert(candidate, at: position)
        if sorted.count > capacity { sorted.removeLast() }
    }
}

/// A k-d tree over the samples: split on the widest dimension at the median,
/// leaves of at most `leafSize` samples; exact k-nearest search.
struct KDTree: Sendable {
    private struct Node: Sendable {
        var dimension: Int
        var split: Double
        var left: Int
        var right: Int
        /// Leaves: the range of `order` they hold.
        var start: Int
        var end: Int
        var isLeaf: Bool { left < 0 }
    }

    private let samples: [Double]
    private let dimension: Int
    private var order: [Int]
    private var nodes: [Node] = []

    /// Bytes of the index, apart from the samples it shares with its engine.
    var indexBytes: Int { ResidentBytes.of(order) + ResidentBytes.of(nodes) }

    init(samples: [Double], dimension: Int, leafSize: Int) {
        self.samples = samples
        self.dimension = dimension
        let count = dimension > 0 ? samples.count / dimension : 0
        order = Array(0..<count)
        if count > 0 { _ = build(0, count, leafSize: leafSize) }
    }

    private mutating func build(_ start: Int, _ end: Int, leafSize: Int) -> Int {
        let position = nodes.count
        nodes.append(Node(dimension: 0, split: 0, left: -1, right: -1, start: start, end: end))
        guard end - start > leafSize else { return position }
        var widest = 0, widestSpread = -1.0
        for axis in 0..<dimension {
            var low = Double.infinity, high = -Double.infinity
            for index in start..<end {
                let value = samples[order[index] * dimension + axis]
                low = min(low, value)
                high = max(high, value)
            }
            if high - low > widestSpread { widestSpread = high - low; widest = axis }
        }
        guard widestSpread > 0 else { return position }
        let samples = self.samples, dimension = self.dimension
        order[start..<end].sort { samples[$0 * dimension + widest] < samples[$1 * dimension + widest] }
        let middle = (start + end) / 2
        let split = samples[order[middle] * dimension + widest]
        let left = build(start, middle, leafSize: leafSize)
        let right = build(middle, end, leafSize: leafSize)
        nodes[position] = Node(dimension: widest, split: split, left: left, right: right, start: start, end: end)
        return position
    }

    /// The k nearest samples, ordered as the linear scan orders them.
    func nearest(_ k: Int, to x: [Double]) -> [Neighbour] {
        var best = NeighbourHeap(capacity: k)
        guard !nodes.isEmpty else { return [] }
        search(0, x, &best)
        return best.sorted
    }

    private func search(_ position: Int, _ x: [Double], _ best: inout NeighbourHeap) {
        let node = nodes[position]
        if node.isLeaf {
            samples.withUnsafeBufferPointer { all in
                for slot in node.start..<node.end {
                    let row = order[slot]
                    let distance = LinearAlgebra.squaredDistance(UnsafeBufferPointer(rebasing: all[(row * dimension)..<((row + 1) * dimension)]), x)
                    best.offer(Neighbour(index: row, distance: distance))
                }
            }
            return
        }
        let difference = x[node.dimension] - node.split
        let (near, far) = difference < 0 ? (node.left, node.right) : (node.right, node.left)
        search(near, x, &best)
        // The far side can hold a closer (or equally close, earlier) sample
        // only if the splitting plane is within the current bound.
        if difference * difference <= best.bound { search(far, x, &best) }
    }
}
