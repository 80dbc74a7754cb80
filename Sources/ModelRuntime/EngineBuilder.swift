import ClassicModels
import ModelFeatures
import ModelLoader
import ModelSpec
import TensorRuntime

/// Prepares the engine for any model modelc runs, pipelines included, and
/// refuses the rest at load with the reason.
enum EngineBuilder {
    /// What engines need beyond the specification.
    struct Context {
        /// The bundle the specification came from: where network weights live.
        var bundle: ModelBundle?
        /// The directory `@model_path` names in ML programs (the bundle, or a package's model folder).
        var modelDirectory: String?
        var threads: Int
        /// The function of a multi-function ML program to run; `nil` for its default.
        var functionName: String?
    }

    static func engine(for model: ModelMessage, summary: ModelSummary,
                       context: Context) throws(RuntimeError) -> any PredictionEngine {
        let interface = ModelInterface(summary)
        let kind = summary.modelType ?? "unset"
        if let stages = summary.pipeline {
            let models = model.stages
            var engines: [PipelineEngine.Stage] = []
            // An input the pipeline marks optional may be left out even when
            // a stage declares it required, as Create ML's detectors do with
            // their thresholds (the NMS stage then uses its own parameters).
            let optional = Set(summary.inputs.filter(\.isOptional).map(\.name))
            for (index, (stageModel, stageSummary)) in zip(models, stages).enumerated() {
                let stageInputs = stageSummary.inputs.map { input in
                    var input = input
                    if optional.contains(input.name) { input.isOptional = true }
                    return input
                }
                do {
                    engines.append(PipelineEngine.Stage(
                        engine: try engine(for: stageModel, summary: stageSummary, context: context),
                        inputs: stageInputs, outputs: stageSummary.outputs))
                } catch {
                    throw error.inPipelineStage(index, kind: stageSummary.modelType ?? "unset")
                }
            }
            return PipelineEngine(stages: engines, outputs: summary.outputs)
        }
        if let classic = model.classicModel {
            return try ClassicModelFactory.engine(for: classic, interface: interface)
        }
        switch kind {
        case "neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor":
            return try networkEngine(for: model, interface: interface, context: context)
        case "mlProgram":
            return try programEngine(for: model, summary: summary, interface: interface, context: context)
        default:
            break
        }
        throw .unsupportedModel(kind: kind, reason: refusalReason(kind))
    }

    /// The engine for an ML program (docs/runtime.md, "Which engine runs an
    /// ML program"): the tensor engine; a program it refuses at load is refused.
    static func programEngine(for model: ModelMessage, summary: ModelSummary, interface: ModelInterface,
                              context: Context) throws(RuntimeError) -> any PredictionEngine {
        try TensorEngine(program: model.pointer, interface: interface, modelDirectory: context.modelDirectory,
                         functionName: context.functionName ?? summary.defaultFunctionName, threads: context.threads)
    }

    /// The engine for a neural network (docs/runtime.md, "Neural networks on
    /// the tensor engine"): the network lowered onto the tensor engine; a
    /// layer the lowering refuses is refused.
    static func networkEngine(for model: ModelMessage, interface: ModelInterface,
                              context: Context) throws(RuntimeError) -> any PredictionEngine {
        let decoder = WeightDecoder(bundle: context.bundle)
        let weights = NetworkWeightReader { params, layer, role, channels throws(RuntimeError) in
            try decoder.floats(WeightParameters(params), layer: layer, role: role, channels: channels)
        }
        let engine = try TensorEngine(network: model.pointer, interface: interface, weights: weights, threads: context.threads)
        // The weights are decoded: their mapped pages need not count against this process any more.
        context.bundle?.releaseWeightPages()
        return engine
    }

    /// Why modelc does not run a model kind.
    static func refusalReason(_ kind: String) -> String {
        switch kind {
        case "textClassifier", "wordTagger", "gazetteer", "wordEmbedding":
            "its parameters are Apple's closed Natural Language data, which only Apple's frameworks can read"
        case "visionFeaturePrint":
            "it is Apple's built-in Vision feature extractor, whose network ships only with Apple's systems"
        case "soundAnalysisPreprocessing", "audioFeaturePrint":
            "it is Apple's built-in SoundAnalysis front end, which ships only with Apple's systems"
        case "customModel":
            "a custom model names an Objective-C class that implements it; there is no such class here"
        case "linkedModel":
            "a linked model refers to another compiled model on an Apple device"
        case "serializedModel":
            "a serialized model holds an opaque Apple format"
        case "unset":
            "the specification sets no model type"
        default:
            "modelc has no evaluator for this kind yet"
        }
    }
}

extension RuntimeError {
    /// The error, saying which pipeline stage it came from.
    func inPipelineStage(_ index: Int, kind: String) -> RuntimeError {
        switch self {
        case .unsupportedModel(let inner, let reason):
            .unsupportedModel(kind: inner, reason: "\(reason) (pipeline stage \(index))")
        case .invalidParameters(let model, let detail):
            .invalidParameters(model: "pipeline stage \(index) (\(model))", detail: detail)
        default:
            self
        }
    }
}

/// Runs stages in order over one table of named features, as Core ML's
/// pipelines do: each stage reads its inputs by name from everything given
/// and computed so far, and adds its outputs.
struct PipelineEngine: PredictionEngine {
    struct Stage: Sendable {
        let engine: any PredictionEngine
        let inputs: [FeatureDescription]
        let outputs: [FeatureDescription]
    }

    let stages: [Stage]
    let outputs: [FeatureDescription]

    var residentBytes: Int { stages.reduce(0) { $0 + $1.engine.residentBytes } }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        var features = inputs
        for stage in stages {
            let stageInputs = try InputChecker.check(features, against: stage.inputs)
            let produced = OutputConformer.conform(try stage.engine.predict(stageInputs), to: stage.outputs)
            features.merge(produced) { _, new in new }
        }
        return features.filter { name, _ in outputs.contains { $0.name == name } }
    }
}
