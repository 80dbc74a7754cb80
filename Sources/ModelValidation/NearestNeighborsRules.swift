import CoreMLSchema
import ModelSpec

/// Rules on k-nearest-neighbors classifiers: the index's dimensions, its
/// examples and their labels.
enum NearestNeighborsRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        guard let knn = model.pointee.knearestneighborsclassifier?.pointee else { return }
        guard let index = knn.nearestneighborsindex?.pointee else {
            sink.error("knn.index.missing", "the classifier has no nearest-neighbors index")
            return
        }
        let dimensions = Int(index.numberofdimensions)
        if dimensions <= 0 {
            sink.error("knn.dimensions", "numberOfDimensions is \(dimensions); it must be at least 1")
        }
        let samples = elements(index.floatsamples, index.n_floatsamples)
        for (number, sample) in samples.enumerated() where dimensions > 0 && sample.pointee.n_vector != dimensions {
            sink.error("knn.dimensions",
                       "example \(number) has \(counted(sample.pointee.n_vector, "value")), expected \(dimensions) (numberOfDimensions)")
        }
        if let length = inputVectorLength(model), dimensions > 0, length != dimensions {
            sink.error("knn.dimensions", "the input holds \(counted(length, "value")), but numberOfDimensions is \(dimensions)")
        }
        if let labels = ClassifierRules.labels(of: model), labels.count != samples.count, labels.count > 0 || !samples.isEmpty {
            sink.error("knn.labels.count",
                       "the classifier has \(counted(labels.count, "class label")) for \(counted(samples.count, "example")); they must match")
        }
        if knn.numberofneighbors == nil {
            sink.error("knn.neighbors", "the classifier sets no number of neighbors (numberOfNeighbors)")
        }
    }
}
