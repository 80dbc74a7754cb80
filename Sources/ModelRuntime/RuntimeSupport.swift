import ModelFeatures
import ModelLoader
import ModelSpec
import TensorRuntime

/// Whether modelc runs a model, and if not, everything in it that it cannot
/// run: model kinds (pipeline stages included), network layers and program
/// operations, judged by what the engines take (for networks, the lowering
/// onto the tensor engine) and named with their refusal messages.
public struct RuntimeSupport: Sendable, Equatable {
    /// One line per thing that cannot run, naming it and why.
    public var problems: [String]

    /// Whether the whole model runs here.
    public var runs: Bool { problems.isEmpty }

    /// Checks `specification` without preparing it.
    public init(_ specification: Specification, bundle: ModelBundle? = nil) {
        problems = withExtendedLifetime(specification) {
            Self.problems(specification.model, summary: ModelSummary(specification, blobs: nil), bundle: bundle)
        }
    }

    private static func problems(_ model: ModelMessage, summary: ModelSummary,
                                 bundle: ModelBundle?) -> [String] {
        let kind = summary.modelType ?? "unset"
        if let stages = summary.pipeline {
            return zip(model.stages, stages).enumerated().flatMap { index, stage in
                problems(stage.0, summary: stage.1, bundle: bundle).map { "pipeline stage \(index): \($0)" }
            }
        }
        let network = ["neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor"].contains(kind)
        if network {
            // Every layer kind the lowering has no rule for, without preparing the network.
            let withoutRule = TensorEngine.layersWithoutLowering(in: model.pointer)
            if !withoutRule.isEmpty { return withoutRule.map(\.description) }
        }
        do {
            _ = try EngineBuilder.engine(for: model, summary: summary, context: .init(bundle: bundle, modelDirectory: bundle?.path, threads: 1))
            return []
        } catch {
            switch error {
            case .unsupportedModel: return [error.description]
            // Networks and ML programs are read whole when prepared: the first layer or operation the tensor engine refuses.
            case .unsupportedLayer where network || kind == "mlProgram": return [error.description]
            default: return []
            }
        }
    }
}
