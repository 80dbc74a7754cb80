import ModelSpec

/// The interface of one model: what an engine reads and what it must write.
public struct ModelInterface: Sendable {
    public var inputs: [FeatureDescription]
    public var outputs: [FeatureDescription]
    /// Classifiers: the output holding the predicted label.
    public var predictedFeatureName: String?
    /// Classifiers: the output holding the label → probability dictionary.
    public var predictedProbabilitiesName: String?
    /// The model type's schema name, for messages (`glmClassifier`, …).
    public var kind: String

    public init(_ summary: ModelSummary) {
        inputs = summary.inputs
        outputs = summary.outputs
        predictedFeatureName = summary.predictedFeatureName
        predictedProbabilitiesName = summary.predictedProbabilitiesName
        kind = summary.modelType ?? "unset"
    }

    /// The output written when a model has exactly one value to give: the
    /// predicted feature when named, else the first output.
    public var primaryOutput: String? { predictedFeatureName ?? outputs.first?.name }

    /// The inputs' numbers, concatenated in declaration order: a double or
    /// int64 gives one value, a multi-array all its elements.
    public func inputVector(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [Double] {
        if self.inputs.count == 1, let value = inputs[self.inputs[0].name], case .multiArray(let array) = value {
            return array.doubles
        }
        var vector: [Double] = []
        for description in self.inputs {
            guard let value = inputs[description.name] else {
                throw .missingInput(feature: description.name, expected: description.type.expectation)
            }
            switch value {
            case .double(let number): vector.append(number)
            case .int64(let number): vector.append(Double(number))
            case .multiArray(let array): vector.append(contentsOf: array.doubles)
            default:
                throw .wrongType(feature: description.name, expected: "numbers", got: value.kindText)
            }
        }
        return vector
    }

    /// Calls `body` with the inputs' numbers as `inputVector` gives them,
    /// without copying a single float64 multi-array input.
    public func withInputVector<Value>(
        _ inputs: [String: FeatureValue], _ body: (UnsafeBufferPointer<Double>) throws(RuntimeError) -> Value
    ) throws(RuntimeError) -> Value {
        let result: Result<Value, RuntimeError>
        if self.inputs.count == 1, case .multiArray(let array)? = inputs[self.inputs[0].name], array.dataType == .float64 {
            result = array.withUnsafeBytes { raw in
                Result { () throws(RuntimeError) in try body(raw.bindMemory(to: Double.self)) }
            }
        } else {
            let vector = try inputVector(inputs)
            result = vector.withUnsafeBufferPointer { buffer in
                Result { () throws(RuntimeError) in try body(buffer) }
            }
        }
        return try result.get()
    }

    /// Checks that a vector has the length the parameters need.
    public func require(_ vector: [Double], count: Int) throws(RuntimeError) {
        guard vector.count == count else {
            throw .invalidValue(feature: inputs.map(\.name).joined(separator: ", "),
                                detail: "\(vector.count) input values, the \(kind) model takes \(count)")
        }
    }

    /// A classifier's outputs: the label with the highest probability
    /// (the first on ties) and the probabilities, under the declared names.
    public func classifierOutputs(labels: ClassLabels, probabilities: [Double]) -> [String: FeatureValue] {
        var best = 0
        for index in probabilities.indices where probabilities[index] > probabilities[best] { best = index }
        return classifierOutputs(labels: labels, winner: best, probabilities: probabilities)
    }

    /// A classifier's outputs with the winning class chosen by the caller.
    public func classifierOutputs(labels: ClassLabels, winner: Int, probabilities: [Double]) -> [String: FeatureValue] {
        var outputs: [String: FeatureValue] = [:]
        if let name = predictedFeatureName ?? outputs.first?.key ?? self.outputs.first?.name {
            outputs[name] = labels.label(at: winner).featureValue
        }
        if let name = predictedProbabilitiesName {
            outputs[name] = .dictionary(labels.dictionary(probabilities))
        }
        return outputs
    }
}

extension ClassLabels {
    /// The label at `index`, as a classifier predicts it.
    public func label(at index: Int) -> ClassLabel {
        switch self {
        case .strings(let labels): .string(labels[index])
        case .int64s(let labels): .int64(labels[index])
        }
    }

    /// The labels as text, for ordering dictionaries when printing.
    public var texts: [String] {
        switch self {
        case .strings(let labels): labels
        case .int64s(let labels): labels.map(String.init)
        }
    }

    /// Each label with its value of `values` (in the labels' order).
    public func dictionary(_ values: [Double]) -> FeatureDictionary {
        switch self {
        case .strings(let labels):
            .strings(Dictionary(zip(labels, values), uniquingKeysWith: { first, _ in first }))
        case .int64s(let labels):
            .int64s(Dictionary(zip(labels, values), uniquingKeysWith: { first, _ in first }))
        }
    }
}
