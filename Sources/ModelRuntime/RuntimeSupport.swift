import CoreMLSchema
import ModelFeatures
import ModelLoader
import ModelSpec
import NetworkRuntime

/// Whether modelc runs a model, and if not, everything in it that it cannot
/// run: model kinds (pipeline stages included) and network layers.
public struct RuntimeSupport: Sendable, Equatable {
    /// One line per thing that cannot run, naming it and why.
    public var problems: [String]

    /// Whether the whole model runs here.
    public var runs: Bool { problems.isEmpty }

    /// Checks `specification` without preparing it.
    public init(_ specification: Specification, bundle: ModelBundle? = nil) {
        problems = withExtendedLifetime(specification) {
            Self.problems(specification.root, summary: ModelSummary(specification, blobs: nil), bundle: bundle)
        }
    }

    private static func problems(_ model: UnsafePointer<CoreML__Specification__Model>, summary: ModelSummary,
                                 bundle: ModelBundle?) -> [String] {
        let kind = summary.modelType ?? "unset"
        if let stages = summary.pipeline {
            return zip(ModelSummary.pipelineModels(model.pointee), stages).enumerated().flatMap { index, stage in
                problems(stage.0, summary: stage.1, bundle: bundle).map { "pipeline stage \(index): \($0)" }
            }
        }
        switch kind {
        case "neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor":
            return NetworkEngine.unsupportedLayers(in: model, bundle: bundle).map(\.description)
        default:
            do {
                _ = try EngineBuilder.engine(for: model, summary: summary, context: .init(bundle: bundle, modelDirectory: bundle?.path, threads: 1))
                return []
            } catch {
                switch error {
                case .unsupportedModel: return [error.description]
                // ML programs are read whole when prepared: the first operation neither engine runs.
                case .unsupportedLayer where kind == "mlProgram": return [error.description]
                default: return []
                }
            }
        }
    }
}
