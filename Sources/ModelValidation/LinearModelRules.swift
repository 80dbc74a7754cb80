import CoreMLSchema
import ModelSpec

/// Rules on generalized linear models and support vector machines: the
/// sizes of weights, offsets, coefficients and support vectors.
enum LinearModelRules {
    static func checkGLM(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        let rows: [[Double]]
        let offsets: Int
        if model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_GLM_CLASSIFIER {
            guard let glm = model.pointee.glmclassifier?.pointee else { return }
            rows = elements(glm.weights, glm.n_weights).map { scalars($0.pointee.value, $0.pointee.n_value) }
            offsets = glm.n_offset
            if let labels = ClassifierRules.labels(of: model), labels.count > 0 {
                let expected = labels.count == 2 ? 1 : labels.count
                if rows.count != expected {
                    let why = labels.count == 2 ? "1 for 2 classes" : "one per class"
                    sink.error("glm.weights.count",
                               "the classifier has \(counted(rows.count, "weight vector")) for \(counted(labels.count, "class")), expected \(expected) (\(why))")
                }
            }
        } else {
            guard let glm = model.pointee.glmregressor?.pointee else { return }
            rows = elements(glm.weights, glm.n_weights).map { scalars($0.pointee.value, $0.pointee.n_value) }
            offsets = glm.n_offset
        }
        if rows.isEmpty {
            sink.error("glm.weights.count", "the model has no weight vectors")
            return
        }
        if offsets != rows.count {
            sink.error("glm.offsets.count", "the model has \(counted(offsets, "offset")) for \(counted(rows.count, "weight vector")); they must match")
        }
        let inputLength = inputVectorLength(model)
        for (index, row) in rows.enumerated() {
            if let inputLength, row.count != inputLength {
                sink.error("glm.weights.count", "weight vector \(index) has \(counted(row.count, "value")), expected \(inputLength), the length of the input")
            } else if inputLength == nil, row.count != rows[0].count {
                sink.error("glm.weights.count", "weight vector \(index) has \(counted(row.count, "value")), but weight vector 0 has \(rows[0].count)")
            }
        }
    }

    static func checkSVM(_ model: UnsafePointer<CoreML__Specification__Model>, sink: inout DiagnosticSink) {
        if model.pointee.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_SUPPORT_VECTOR_REGRESSOR {
            guard let svm = model.pointee.supportvectorregressor?.pointee else { return }
            checkKernel(svm.kernel, sink: &sink)
            let vectors = supportVectorCount(dense: svm.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_REGRESSOR__SUPPORT_VECTORS_DENSE_SUPPORT_VECTORS,
                                             sparse: svm.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_REGRESSOR__SUPPORT_VECTORS_SPARSE_SUPPORT_VECTORS,
                                             denseVectors: svm.densesupportvectors, sparseVectors: svm.sparsesupportvectors)
            let alphas = svm.coefficients?.pointee.n_alpha ?? 0
            if alphas != vectors {
                sink.error("svm.coefficients", "the regressor has \(counted(alphas, "coefficient")) for \(counted(vectors, "support vector")); they must match")
            }
            return
        }
        guard let svm = model.pointee.supportvectorclassifier?.pointee else { return }
        checkKernel(svm.kernel, sink: &sink)
        let vectors = supportVectorCount(dense: svm.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_CLASSIFIER__SUPPORT_VECTORS_DENSE_SUPPORT_VECTORS,
                                         sparse: svm.support_vectors_case == CORE_ML__SPECIFICATION__SUPPORT_VECTOR_CLASSIFIER__SUPPORT_VECTORS_SPARSE_SUPPORT_VECTORS,
                                         denseVectors: svm.densesupportvectors, sparseVectors: svm.sparsesupportvectors)
        let perClass = scalars(svm.numberofsupportvectorsperclass, svm.n_numberofsupportvectorsperclass)
        let classes = ClassifierRules.labels(of: model)?.count ?? perClass.count
        if perClass.count != classes {
            sink.error("svm.supportVectors",
                       "numberOfSupportVectorsPerClass has \(counted(perClass.count, "entry").replacingOccurrences(of: "entrys", with: "entries")), expected \(classes), one per class")
        }
        let total = perClass.reduce(0) { $0 + Int($1) }
        if total != vectors {
            sink.error("svm.supportVectors",
                       "numberOfSupportVectorsPerClass adds up to \(total), but the model holds \(counted(vectors, "support vector"))")
        }
        let coefficients = elements(svm.coefficients, svm.n_coefficients)
        if classes > 1 && coefficients.count != classes - 1 {
            sink.error("svm.coefficients",
                       "the classifier has \(counted(coefficients.count, "coefficient vector")), expected \(classes - 1) (classes − 1)")
        }
        for (index, vector) in coefficients.enumerated() where vector.pointee.n_alpha != vectors {
            sink.error("svm.coefficients",
                       "coefficient vector \(index) has \(counted(vector.pointee.n_alpha, "value")), expected \(vectors), one per support vector")
        }
        let pairs = classes * (classes - 1) / 2
        if classes > 1 && svm.n_rho != pairs {
            sink.error("svm.rho", "rho has \(counted(svm.n_rho, "value")), expected \(pairs), one per pair of classes")
        }
    }

    private static func checkKernel(_ kernel: UnsafeMutablePointer<CoreML__Specification__Kernel>?, sink: inout DiagnosticSink) {
        if kernel == nil || kernel?.pointee.kernel_case == CORE_ML__SPECIFICATION__KERNEL__KERNEL__NOT_SET {
            sink.error("svm.kernel", "the support vector machine has no kernel (linear, rbf, poly or sigmoid)")
        }
    }

    private static func supportVectorCount(
        dense: Bool, sparse: Bool,
        denseVectors: UnsafeMutablePointer<CoreML__Specification__DenseSupportVectors>?,
        sparseVectors: UnsafeMutablePointer<CoreML__Specification__SparseSupportVectors>?
    ) -> Int {
        if dense { return denseVectors?.pointee.n_vectors ?? 0 }
        if sparse { return sparseVectors?.pointee.n_vectors ?? 0 }
        return 0
    }
}

/// The length of a model's input vector when it is knowable: one 1-D
/// multi-array input, or a set of double/int64 inputs (one value each).
func inputVectorLength(_ model: UnsafePointer<CoreML__Specification__Model>) -> Int? {
    let inputs = model.inputs
    if inputs.count == 1, inputs[0].typeCase == CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE,
       let array = inputs[0].type?.pointee.multiarraytype?.pointee, array.n_shape == 1,
       array.shape_flexibility_case == CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY__NOT_SET,
       let length = scalars(array.shape, array.n_shape).first, length > 0 {
        return Int(clamping: length)
    }
    let scalarTypes: Set<CoreML__Specification__FeatureType__TypeCase> = [
        CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE, CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE,
    ]
    if !inputs.isEmpty, inputs.allSatisfy({ scalarTypes.contains($0.typeCase) }) {
        return inputs.count
    }
    return nil
}
