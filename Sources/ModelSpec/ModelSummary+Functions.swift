import CoreMLSchema

extension ModelSummary {
    /// The names of a multi-function ML program's functions (specification 9),
    /// in the model description's order; empty for single-function models.
    public var functionNames: [String] { functionInterfaces.map(\.name) }

    /// The summary as one function of a multi-function program sees it: that
    /// function's inputs, outputs, states and classifier names in place of
    /// the model's. `nil` when the description lists no function of that name.
    public func selectingFunction(_ name: String) -> ModelSummary? {
        guard let function = functionInterfaces.first(where: { $0.name == name }) else { return nil }
        var summary = self
        summary.inputs = function.inputs
        summary.outputs = function.outputs
        summary.states = function.states
        summary.predictedFeatureName = function.predictedFeatureName ?? predictedFeatureName
        summary.predictedProbabilitiesName = function.predictedProbabilitiesName ?? predictedProbabilitiesName
        return summary
    }
}

/// One function's interface in a multi-function model description.
public struct FunctionInterface: Equatable, Sendable {
    public var name: String
    public var inputs: [FeatureDescription]
    public var outputs: [FeatureDescription]
    public var states: [FeatureDescription]
    public var predictedFeatureName: String?
    public var predictedProbabilitiesName: String?
}

extension FunctionInterface {
    init(_ function: CoreML__Specification__FunctionDescription) {
        func list(_ items: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__FeatureDescription>?>?, _ count: Int) -> [FeatureDescription] {
            elements(items, count).map { FeatureDescription($0.pointee) }
        }
        name = text(function.name)
        inputs = list(function.input, function.n_input)
        outputs = list(function.output, function.n_output)
        states = list(function.state, function.n_state)
        let feature = text(function.predictedfeaturename), probabilities = text(function.predictedprobabilitiesname)
        predictedFeatureName = feature.isEmpty ? nil : feature
        predictedProbabilitiesName = probabilities.isEmpty ? nil : probabilities
    }

    /// The functions a model description lists, and its default function's name.
    package static func read(_ model: UnsafePointer<CoreML__Specification__Model>) -> (functions: [FunctionInterface], defaultName: String?) {
        guard let description = model.pointee.description?.pointee else { return ([], nil) }
        let functions = elements(description.functions, description.n_functions).map { FunctionInterface($0.pointee) }
        let name = text(description.defaultfunctionname)
        return (functions, name.isEmpty ? nil : name)
    }
}
