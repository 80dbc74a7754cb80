import CoreMLSchema

/// What makes a neural network a classifier beyond its layers: the class
/// labels (read as `ModelSummary.classLabels` reads every classifier's) and
/// the blob holding their probabilities.
package struct NetworkClassifier: Sendable, Equatable {
    /// The labels, in the order of the probabilities.
    package var labels: ClassLabels
    /// `labelProbabilityLayerName`, or when that is empty the first output of
    /// the last layer (Core ML's rule); `nil` for a network without layers.
    package var probabilities: String?

    package init(_ network: CoreML__Specification__NeuralNetworkClassifier) {
        labels = ClassLabels(classifier: network) ?? .int64s([])
        let named = text(network.labelprobabilitylayername)
        let layers = elements(network.layers, network.n_layers)
        probabilities = named.isEmpty ? layers.last.flatMap { strings($0.pointee.output, $0.pointee.n_output).first } : named
    }
}
