import CoreMLSchema
import ModelSpec

/// Rules on feature-engineering models: one-hot encoders, feature
/// vectorizers, array feature extractors and scalers.
enum FeatureEngineeringRules {
    static func check(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        switch model.pointee.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ONE_HOT_ENCODER:
            guard let encoder = model.pointee.onehotencoder?.pointee else { return }
            let count: Int = switch encoder.category_type_case {
            case CORE_ML__SPECIFICATION__ONE_HOT_ENCODER__CATEGORY_TYPE_STRING_CATEGORIES: encoder.stringcategories?.pointee.n_vector ?? 0
            case CORE_ML__SPECIFICATION__ONE_HOT_ENCODER__CATEGORY_TYPE_INT64_CATEGORIES: encoder.int64categories?.pointee.n_vector ?? 0
            default: 0
            }
            if count == 0 {
                sink.error("oneHot.categories.empty", "the one-hot encoder has no categories")
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_FEATURE_VECTORIZER:
            guard let vectorizer = model.pointee.featurevectorizer?.pointee else { return }
            let columns = elements(vectorizer.inputlist, vectorizer.n_inputlist)
            if columns.isEmpty {
                sink.error("featureVectorizer.size", "the feature vectorizer has no input columns")
                return
            }
            var total: UInt64 = 0
            for (index, column) in columns.enumerated() {
                let size = column.pointee.inputdimensions
                if size == 0 {
                    sink.error("featureVectorizer.size", "input column \(index) \(quoted(text(column.pointee.inputcolumn))) has 0 dimensions")
                }
                total = total.addingReportingOverflow(size).overflow ? UInt64.max : total + size
            }
            if let output = model.outputs.first, model.outputs.count == 1,
               let array = output.type?.pointee.multiarraytype?.pointee, array.n_shape == 1,
               let length = scalars(array.shape, array.n_shape).first, length > 0, UInt64(length) != total {
                let sizes = columns.map { String($0.pointee.inputdimensions) }.joined(separator: " + ")
                sink.at(output.location) { sink in
                    sink.error("featureVectorizer.size", "the output holds \(length) values, but the input columns add up to \(total) = \(sizes)")
                }
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ARRAY_FEATURE_EXTRACTOR:
            guard let extractor = model.pointee.arrayfeatureextractor?.pointee else { return }
            let indices = scalars(extractor.extractindex, extractor.n_extractindex)
            if indices.isEmpty {
                sink.error("arrayFeatureExtractor.index", "the array feature extractor extracts no indices")
            }
            if let length = inputVectorLength(model), model.inputs.count == 1 {
                for (position, index) in indices.enumerated() where index >= UInt64(length) {
                    sink.error("arrayFeatureExtractor.index",
                               "extract index \(position) is \(index), outside the input's \(counted(length, "value"))")
                }
            }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_SCALER:
            guard let scaler = model.pointee.scaler?.pointee else { return }
            let length = inputVectorLength(model)
            for (name, count) in [("shiftValue", scaler.n_shiftvalue), ("scaleValue", scaler.n_scalevalue)]
            where count > 1 && length.map({ count != $0 }) ?? false {
                sink.error("scaler.size", "\(name) has \(counted(count, "value")), expected 0, 1 or \(length ?? 0) (the input's length)")
            }
        default:
            break
        }
    }
}
