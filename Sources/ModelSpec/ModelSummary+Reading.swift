import CoreMLSchema


extension ModelSummary {
    /// Summarizes a model read from disk, reading the headers of an ML
    /// program's weight file (not the weights themselves).
    public init(_ file: ModelFile) {
        self.init(file.specification, blobs: BlobMetadataReader(model: file))
        format = file.format
    }

    /// Summarizes an unpacked specification; `blobs` reads ML program weight
    /// file headers when given.
    package init(_ specification: Specification, blobs: BlobMetadataReader?) {
        self = withExtendedLifetime(specification) { ModelSummary(specification.root, blobs: blobs) }
    }

    init(_ model: UnsafePointer<CoreML__Specification__Model>, blobs: BlobMetadataReader?) {
        let spec = model.pointee
        let view = MessageView(model)
        specificationVersion = Int(spec.specificationversion)
        modelType = spec.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE__NOT_SET
            ? nil : view.fieldName(number: spec.type_case.rawValue)
        isUpdatable = spec.isupdatable != 0
        format = nil

        let description = spec.description?.pointee
        inputs = features(description?.input, description?.n_input)
        outputs = features(description?.output, description?.n_output)
        states = features(description?.state, description?.n_state)
        trainingInputs = features(description?.traininginput, description?.n_traininginput)
        predictedFeatureName = nonEmpty(text(description?.predictedfeaturename))
        predictedProbabilitiesName = nonEmpty(text(description?.predictedprobabilitiesname))
        (functionInterfaces, defaultFunctionName) = FunctionInterface.read(model)
        metadata = description?.metadata.map { Metadata($0.pointee) }.flatMap { $0.isEmpty ? nil : $0 }

        let typeMessage: MessageView? = modelType.flatMap { view.message(named: $0) }
        classLabels = typeMessage.flatMap(Self.classLabels(in:))

        layers = nil
        weights = nil
        pipeline = nil
        functions = nil
        operations = nil
        blobWeights = nil

        switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_NEURAL_NETWORK_REGRESSOR:
            let network = typeMessage.map { NeuralNetworkReader(network: $0) }
            layers = network?.layers ?? []
            weights = network?.weights ?? []
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER,
             CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR:
            let stages = Self.pipelineModels(spec)
            pipeline = stages.map { ModelSummary(UnsafePointer($0), blobs: blobs) }
            if classLabels == nil { classLabels = pipeline?.last?.classLabels }
        case CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM:
            if let program = spec.mlprogram {
                let reader = ProgramReader(program: program, blobs: blobs)
                functions = reader.functions
                operations = reader.operations
                blobWeights = reader.blobWeights
            }
        default:
            break
        }
    }

    /// The stage models of a pipeline of any of the three pipeline kinds.
    package static func pipelineModels(_ spec: CoreML__Specification__Model) -> [UnsafeMutablePointer<CoreML__Specification__Model>] {
        let pipeline: UnsafeMutablePointer<CoreML__Specification__Pipeline>? = switch spec.type_case {
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE: spec.pipeline
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_CLASSIFIER: spec.pipelineclassifier?.pointee.pipeline
        case CORE_ML__SPECIFICATION__MODEL__TYPE_PIPELINE_REGRESSOR: spec.pipelineregressor?.pointee.pipeline
        default: nil
        }
        guard let pipeline else { return [] }
        return elements(pipeline.pointee.models, pipeline.pointee.n_models)
    }

    /// Class labels of any classifier: every classifier message in the schema
    /// holds them in fields named `stringClassLabels` / `int64ClassLabels`.
    /// `nil` when neither is set. The one reader of class labels: summaries,
    /// validation, neural-network and classic classifiers all call it.
    package static func classLabels(in message: MessageView) -> ClassLabels? {
        if let labels = message.message(named: "stringClassLabels") {
            let vector = labels.pointer.assumingMemoryBound(to: CoreML__Specification__StringVector.self).pointee
            return .strings(strings(vector.vector, vector.n_vector))
        }
        if let labels = message.message(named: "int64ClassLabels") {
            let vector = labels.pointer.assumingMemoryBound(to: CoreML__Specification__Int64Vector.self).pointee
            return .int64s(scalars(vector.vector, vector.n_vector))
        }
        return nil
    }
}

extension ClassLabels {
    /// The labels of one classifier message (`NeuralNetworkClassifier`,
    /// `GLMClassifier`, `TreeEnsembleClassifier`, …), read by
    /// `ModelSummary.classLabels(in:)`; `nil` when it sets none.
    package init?<Classifier>(classifier: Classifier) {
        guard let labels = withUnsafePointer(to: classifier, { ModelSummary.classLabels(in: MessageView($0)) }) else { return nil }
        self = labels
    }
}

private func nonEmpty(_ value: String) -> String? { value.isEmpty ? nil : value }

private func features(
    _ list: UnsafeMutablePointer<UnsafeMutablePointer<CoreML__Specification__FeatureDescription>?>?, _ count: Int?
) -> [FeatureDescription] {
    elements(list, count ?? 0).map { FeatureDescription($0.pointee) }
}

extension Metadata {
    init(_ metadata: CoreML__Specification__Metadata) {
        shortDescription = text(metadata.shortdescription)
        author = text(metadata.author)
        license = text(metadata.license)
        versionString = text(metadata.versionstring)
        var entries: [String: String] = [:]
        for entry in elements(metadata.userdefined, metadata.n_userdefined) {
            entries[text(entry.pointee.key)] = text(entry.pointee.value)
        }
        userDefined = entries
    }
}

extension FeatureDescription {
    init(_ feature: CoreML__Specification__FeatureDescription) {
        name = text(feature.name)
        shortDescription = text(feature.shortdescription)
        isOptional = feature.type?.pointee.isoptional ?? 0 != 0
        type = feature.type.map { FeatureType($0.pointee) } ?? .unset
    }
}

extension FeatureType {
    init(_ type: CoreML__Specification__FeatureType) {
        switch type.type_case {
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_INT64_TYPE: self = .int64
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DOUBLE_TYPE: self = .double
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STRING_TYPE: self = .string
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_IMAGE_TYPE:
            self = type.imagetype.map { .image(ImageType($0.pointee)) } ?? .unset
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE:
            self = type.multiarraytype.map { .multiArray(MultiArrayType($0.pointee)) } ?? .unset
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_DICTIONARY_TYPE:
            let keyType = type.dictionarytype.map { dictionary -> String in
                switch dictionary.pointee.key_type_case {
                case CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_INT64_KEY_TYPE: "int64KeyType"
                case CORE_ML__SPECIFICATION__DICTIONARY_FEATURE_TYPE__KEY_TYPE_STRING_KEY_TYPE: "stringKeyType"
                default: "unset"
                }
            }
            self = .dictionary(keyType: keyType ?? "unset")
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_SEQUENCE_TYPE:
            self = type.sequencetype.map { .sequence(SequenceType($0.pointee)) } ?? .unset
        case CORE_ML__SPECIFICATION__FEATURE_TYPE__TYPE_STATE_TYPE:
            let array = type.statetype?.pointee.type_case == CORE_ML__SPECIFICATION__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE
                ? type.statetype?.pointee.arraytype : nil
            self = array.map { .state(MultiArrayType($0.pointee)) } ?? .unset
        default:
            self = .unset
        }
    }
}

extension SizeRange {
    init(_ range: UnsafeMutablePointer<CoreML__Specification__SizeRange>?) {
        lowerBound = range?.pointee.lowerbound ?? 0
        upperBound = range?.pointee.upperbound ?? 0
    }
}

extension ImageType {
    init(_ image: CoreML__Specification__ImageFeatureType) {
        width = image.width
        height = image.height
        space = ImageColorSpace(schemaName: enumValueName(
            core_ml__specification__image_feature_type__color_space__descriptor,
            Int32(bitPattern: image.colorspace.rawValue)))
        switch image.size_flexibility_case {
        case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_ENUMERATED_SIZES:
            let sizes = image.enumeratedsizes.map { elements($0.pointee.sizes, $0.pointee.n_sizes) } ?? []
            sizeFlexibility = .enumerated(sizes.map { ImageSize(width: $0.pointee.width, height: $0.pointee.height) })
        case CORE_ML__SPECIFICATION__IMAGE_FEATURE_TYPE__SIZE_FLEXIBILITY_IMAGE_SIZE_RANGE:
            sizeFlexibility = .ranges(width: SizeRange(image.imagesizerange?.pointee.widthrange),
                                      height: SizeRange(image.imagesizerange?.pointee.heightrange))
        default:
            sizeFlexibility = nil
        }
    }
}

extension MultiArrayType {
    init(_ array: CoreML__Specification__ArrayFeatureType) {
        dataType = enumValueName(
            core_ml__specification__array_feature_type__array_data_type__descriptor,
            Int32(bitPattern: array.datatype.rawValue))
        shape = scalars(array.shape, array.n_shape)
        switch array.shape_flexibility_case {
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_ENUMERATED_SHAPES:
            let shapes = array.enumeratedshapes.map { elements($0.pointee.shapes, $0.pointee.n_shapes) } ?? []
            shapeFlexibility = .enumerated(shapes.map { scalars($0.pointee.shape, $0.pointee.n_shape) })
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__SHAPE_FLEXIBILITY_SHAPE_RANGE:
            let ranges = array.shaperange.map { elements($0.pointee.sizeranges, $0.pointee.n_sizeranges) } ?? []
            shapeFlexibility = .ranges(ranges.map { SizeRange($0) })
        default:
            shapeFlexibility = nil
        }
        defaultValue = switch array.default_optional_value_case {
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_INT_DEFAULT_VALUE: Double(array.intdefaultvalue)
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_FLOAT_DEFAULT_VALUE: Double(array.floatdefaultvalue)
        case CORE_ML__SPECIFICATION__ARRAY_FEATURE_TYPE__DEFAULT_OPTIONAL_VALUE_DOUBLE_DEFAULT_VALUE: array.doubledefaultvalue
        default: nil
        }
    }
}

extension SequenceType {
    init(_ sequence: CoreML__Specification__SequenceFeatureType) {
        elementType = switch sequence.type_case {
        case CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_INT64_TYPE: "int64Type"
        case CORE_ML__SPECIFICATION__SEQUENCE_FEATURE_TYPE__TYPE_STRING_TYPE: "stringType"
        default: "unset"
        }
        sizeRange = sequence.sizerange.map { SizeRange($0) }
    }
}
