import CoreMLSchema
import ModelSpec

/// Rules on pipelines: their stages, the features flowing between them, and
/// the outputs they produce. Each stage is validated as a model of its own.
enum PipelineRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, context: ValidationContext, sink: inout DiagnosticSink) {
        let stages = ModelSummary.pipelineModels(model.pointee)
        if stages.isEmpty {
            sink.error("pipeline.models.empty", "the pipeline has no models")
            return
        }
        if let pipeline = pipelineMessage(model)?.pointee, pipeline.n_names > 0, pipeline.n_names != pipeline.n_models {
            sink.error("pipeline.names.count",
                       "the pipeline names \(counted(pipeline.n_names, "model")) but holds \(pipeline.n_models)")
        }
        var available: [String: (source: String, type: CoreML__Specification__FeatureType__TypeCase)] = [:]
        for input in model.inputs where !input.name.isEmpty {
            available[input.name] = ("pipeline input \(quoted(input.name))", input.typeCase)
        }
        for (index, stage) in stages.enumerated() {
            let stageModel = UnsafePointer(stage)
            sink.at("pipeline model \(index)") { sink in
                ModelRules.check(stageModel, context: context, sink: &sink)
                for input in stageModel.inputs where !input.name.isEmpty {
                    guard let source = available[input.name] else {
                        if !input.isOptional {
                            sink.at(input.location) { sink in
                                sink.error("pipeline.stage.input.undefined",
                                           "neither a pipeline input nor an output of an earlier model")
                            }
                        }
                        continue
                    }
                    if !compatible(source.type, input.typeCase) {
                        sink.at(input.location) { sink in
                            sink.error("pipeline.stage.input.type",
                                       "the model takes a \(featureTypeName(input.typeCase)) but \(source.source) is a \(featureTypeName(source.type))")
                        }
                    }
                }
                if stage.pointee.isupdatable != 0 && index != stages.count - 1 {
                    sink.error("pipeline.updatable.notLast",
                               "the model is updatable but is not the last of the pipeline's \(stages.count) models; only the last may be")
                }
                for output in stageModel.outputs where !output.name.isEmpty {
                    available[output.name] = ("the output of pipeline model \(index)", output.typeCase)
                }
            }
        }
        for output in model.outputs where !output.name.isEmpty {
            guard let source = available[output.name] else {
                sink.at(output.location) { sink in
                    sink.error("pipeline.output.unproduced", "no model of the pipeline produces this output")
                }
                continue
            }
            if !compatible(source.type, output.typeCase) {
                sink.at(output.location) { sink in
                    sink.error("pipeline.stage.input.type",
                               "the pipeline declares a \(featureTypeName(output.typeCase)) but \(source.source) is a \(featureTypeName(source.type))")
                }
            }
        }
    }

    /// Whether a feature of type `produced` can feed one of type `consumed`;
    /// unset types are reported elsewhere and pass here.
    static func compatible(_ produced: CoreML__Specification__FeatureType__TypeCase, _ consumed: CoreML__Specification__FeatureType__TypeCase) -> Bool {
        let unset = CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE__NOT_SET
        return produced == consumed || produced == unset || consumed == unset
    }

    private static func pipelineMessage(_ model: UnsafePointer<CoreML__Specification__Model>) -> UnsafeMutablePointer<CoreML__Specification__Pipeline>? {
        switch model.pointee.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE: model.pointee.pipeline
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER: model.pointee.pipelineclassifier?.pointee.pipeline
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR: model.pointee.pipelineregressor?.pointee.pipeline
        default: nil
        }
    }
}
