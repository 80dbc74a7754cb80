import CoreMLSchema
import ModelSpec

/// Rules on classifiers: their class labels and the outputs that carry the
/// predicted class and the class probabilities.
enum ClassifierRules {
    enum LabelKind: String {
        case string, int64
    }

    static let classifierTypes: Set<CoreML__Specification__Model__TypeCase> = [
        CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_TREE_ENSEMBLE_CLASSIFIER,
        CORE_ML__SPECIFICATION__MODEL__TYPE_K_NEAREST_NEIGHBORS_CLASSIFIER,
    ]

    /// The class labels of a classifier model (read by
    /// `ModelSummary.classLabels(in:)`): their kind and count; `nil` when none
    /// are set.
    static func labels(of model: UnsafePointer<CoreML__Specification__Model>) -> (kind: LabelKind, count: Int)? {
        let view = MessageView(model)
        guard let name = view.fieldName(number: model.pointee.type_case.rawValue),
              let typeMessage = view.message(named: name)
        else { return nil }
        return switch ModelSummary.classLabels(in: typeMessage) {
        case .strings(let labels): (.string, labels.count)
        case .int64s(let labels): (.int64, labels.count)
        case nil: nil
        }
    }

    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        let type = model.pointee.type_case
        let labels: (kind: LabelKind, count: Int)?
        if classifierTypes.contains(type) {
            labels = Self.labels(of: model)
            guard let labels else {
                sink.error("classifier.labels.missing", "the classifier has no class labels (stringClassLabels or int64ClassLabels)")
                return
            }
            if labels.count == 0 {
                sink.error("classifier.labels.empty", "the classifier's \(labels.kind) class label list is empty")
            }
        } else if type == CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER {
            labels = ModelSummary.pipelineModels(model.pointee).last.flatMap { Self.labels(of: UnsafePointer($0)) }
        } else {
            return
        }

        let description = model.pointee.description?.pointee
        let outputs = model.outputs
        let predicted = text(description?.predictedfeaturename)
        if predicted.isEmpty {
            sink.error("classifier.predictedFeature.missing", "the classifier names no predicted feature (predictedFeatureName)")
        } else if let output = outputs.first(where: { $0.name == predicted }) {
            let found = output.typeCase
            let expected: [CoreML__Specification__FeatureType__TypeCase] = switch labels?.kind {
            case .string: [CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE]
            case .int64: [CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE]
            case nil: [CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE, CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE]
            }
            if !expected.contains(found) {
                let wanted = labels.map { "\($0.kind.rawValue), like the class labels" } ?? "string or int64"
                sink.at(output.location) { sink in
                    sink.error("classifier.predictedFeature.type",
                               "the predicted class is \(featureTypeName(found)), expected \(wanted)")
                }
            }
        } else {
            sink.error("classifier.predictedFeature.missing",
                       "the predicted feature \(quoted(predicted)) is not among the outputs")
        }

        let probabilities = text(description?.predictedprobabilitiesname)
        guard !probabilities.isEmpty else { return }
        guard let output = outputs.first(where: { $0.name == probabilities }) else {
            sink.error("classifier.probabilities.missing",
                       "the probabilities output \(quoted(probabilities)) (predictedProbabilitiesName) is not among the outputs")
            return
        }
        sink.at(output.location) { sink in
            switch output.typeCase {
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE:
                break
            case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE:
                let key = output.type?.pointee.dictionarytype?.pointee.key_type_case
                let keyKind: LabelKind? = switch key {
                case CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE: .string
                case CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_INT64_KEY_TYPE: .int64
                default: nil
                }
                if let labels, let keyKind, keyKind != labels.kind {
                    sink.error("classifier.probabilities.type",
                               "the probabilities dictionary is keyed by \(keyKind.rawValue), expected \(labels.kind.rawValue) like the class labels")
                }
            default:
                sink.error("classifier.probabilities.type",
                           "the probabilities output is \(featureTypeName(output.typeCase)), expected a dictionary keyed by class label")
            }
        }
    }
}
