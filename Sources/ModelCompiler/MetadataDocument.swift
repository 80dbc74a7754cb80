import ModelSpec

/// `metadata.json`: the model's interface and provenance with the keys
/// Apple's compiler writes (an array of one object), so tools that read
/// compiled Core ML bundles find what they expect.
enum MetadataDocument {
    static let outputVersion = "3.0"

    static func make(_ summary: ModelSummary, sourceName: String) -> JSONValue {
        var object: [String: JSONValue] = [
            "metadataOutputVersion": .string(outputVersion),
            "specificationVersion": .int(summary.specificationVersion),
            "isUpdatable": .string(summary.isUpdatable ? "1" : "0"),
            "modelType": .object(["name": .string("MLModelType_" + (summary.modelType ?? "unset"))]),
            "inputSchema": .array(summary.inputs.map(schemaEntry)),
            "outputSchema": .array(summary.outputs.map(schemaEntry)),
            "userDefinedMetadata": .object((summary.metadata?.userDefined ?? [:]).mapValues(JSONValue.string)),
            "generatedClassName": .string(generatedClassName(sourceName)),
            "availability": .object(availability(summary.specificationVersion).mapValues(JSONValue.string)),
            "method": .string("predict"),
        ]
        if !summary.states.isEmpty { object["stateSchema"] = .array(summary.states.map(schemaEntry)) }
        if !summary.trainingInputs.isEmpty { object["trainingInputSchema"] = .array(summary.trainingInputs.map(schemaEntry)) }
        if let metadata = summary.metadata {
            let fields = [("author", metadata.author), ("license", metadata.license),
                          ("version", metadata.versionString), ("shortDescription", metadata.shortDescription)]
            for (key, value) in fields where !value.isEmpty { object[key] = .string(value) }
        }
        switch summary.classLabels {
        case .strings(let labels): object["classLabels"] = .array(labels.map(JSONValue.string))
        case .int64s(let labels): object["classLabels"] = .array(labels.map { .string(String($0)) })
        case nil: break
        }
        if let layers = summary.layers {
            object["neuralNetworkLayerTypeHistogram"] = histogram(layers.map { capitalized($0.kind) })
            object["storagePrecision"] = .string(storagePrecision(summary.weights ?? []))
        }
        if let operations = summary.operations {
            let prefix = summary.functions?.first.map { opsetPrefix($0.opset) } ?? ""
            var counts: [String: JSONValue] = [:]
            for (type, count) in operations { counts[prefix + type] = .int(count) }
            object["mlProgramOperationTypeHistogram"] = .object(counts)
        }
        return .array([.object(object)])
    }

    private static func histogram(_ names: [String]) -> JSONValue {
        var counts: [String: Int] = [:]
        for name in names { counts[name, default: 0] += 1 }
        return .object(counts.mapValues(JSONValue.int))
    }

    private static func capitalized(_ name: String) -> String {
        name.prefix(1).uppercased() + name.dropFirst()
    }

    /// `CoreML5` → `Ios15.`; other opsets keep their name.
    private static func opsetPrefix(_ opset: String) -> String {
        let known = ["CoreML5": "Ios15", "CoreML6": "Ios16", "CoreML7": "Ios17", "CoreML8": "Ios18", "CoreML9": "Ios26"]
        return (known[opset] ?? opset) + "."
    }

    private static func storagePrecision(_ weights: [WeightTensor]) -> String {
        let kinds = Set(weights.map { weight -> String in
            switch weight.storage {
            case .float32: "Float32"
            case .float16: "Float16"
            case .quantized: "Int\(weight.quantizationBits ?? 8)"
            case .int8: "Int8"
            case .mixed: "Mixed"
            }
        }).sorted()
        if kinds.isEmpty { return "Float32" }
        return kinds.count == 1 ? kinds[0] : "Mixed (\(kinds.joined(separator: ", ")))"
    }

    /// The first OS releases that run a specification version.
    static func availability(_ version: Int) -> [String: String] {
        let table: [(macOS: String, iOS: String, watchOS: String, visionOS: String)] = [
            ("10.13", "11.0", "4.0", "1.0"), ("10.13.2", "11.2", "4.2", "1.0"), ("10.14", "12.0", "5.0", "1.0"),
            ("10.15", "13.0", "6.0", "1.0"), ("11.0", "14.0", "7.0", "1.0"), ("12.0", "15.0", "8.0", "1.0"),
            ("13.0", "16.0", "9.0", "1.0"), ("14.0", "17.0", "10.0", "1.0"), ("15.0", "18.0", "11.0", "2.0"),
            ("26.0", "26.0", "26.0", "26.0"),
        ]
        let row = table[min(max(version, 1), table.count) - 1]
        var result = ["macOS": row.macOS, "iOS": row.iOS, "tvOS": row.iOS, "watchOS": row.watchOS, "visionOS": row.visionOS]
        result["macCatalyst"] = version >= 4 ? row.iOS : "13.0"
        return result
    }

    /// A Swift type name from the source file name: `mobilenet-v2.mlmodel` → `mobilenet_v2`.
    static func generatedClassName(_ sourceName: String) -> String {
        let base = sourceName.split(separator: ".").first.map(String.init) ?? sourceName
        var name = String(base.map { $0.isLetter || $0.isNumber || $0 == "_" ? $0 : "_" })
        if name.isEmpty || name.first?.isNumber == true { name = "_" + name }
        return name
    }

    private static func schemaEntry(_ feature: FeatureDescription) -> JSONValue {
        var entry: [String: JSONValue] = [
            "name": .string(feature.name),
            "isOptional": .string(feature.isOptional ? "1" : "0"),
            "shortDescription": .string(feature.shortDescription),
        ]
        var flexible = false
        switch feature.type {
        case .int64:
            entry["type"] = .string("Int64")
            entry["formattedType"] = .string("Int64")
        case .double:
            entry["type"] = .string("Double")
            entry["formattedType"] = .string("Double")
        case .string:
            entry["type"] = .string("String")
            entry["formattedType"] = .string("String")
        case .image(let image):
            let color = image.space.isGrayscale ? "Grayscale" : "Color"
            entry["type"] = .string("Image")
            entry["colorspace"] = .string(image.space.schemaName)
            entry["width"] = .string(String(image.width))
            entry["height"] = .string(String(image.height))
            entry["formattedType"] = .string("Image (\(color) \(image.width) × \(image.height))")
            flexible = image.sizeFlexibility != nil
        case .multiArray(let array), .state(let array):
            let kind = feature.type.schemaName == "stateType" ? "State" : "MultiArray"
            let dataType = arrayTypeName(array.dataType)
            entry["type"] = .string(kind)
            entry["dataType"] = .string(dataType)
            entry["shape"] = .string("[" + array.shape.map(String.init).joined(separator: ", ") + "]")
            entry["formattedType"] = .string("\(kind) (\(dataType) \(array.shape.map(String.init).joined(separator: " × ")))")
            flexible = array.shapeFlexibility != nil
        case .dictionary(let keyType):
            let key = keyType == "int64KeyType" ? "Int64" : "String"
            entry["type"] = .string("Dictionary")
            entry["keyType"] = .string(key)
            entry["formattedType"] = .string("Dictionary (\(key) → Double)")
        case .sequence(let sequence):
            let element = sequence.elementType == "int64Type" ? "Int64" : "String"
            entry["type"] = .string("Sequence")
            entry["formattedType"] = .string("Sequence of \(element)")
        case .unset:
            entry["type"] = .string("Invalid")
            entry["formattedType"] = .string("Invalid")
        }
        entry["hasShapeFlexibility"] = .string(flexible ? "1" : "0")
        return .object(entry)
    }

    private static func arrayTypeName(_ schemaName: String) -> String {
        ["FLOAT32": "Float32", "DOUBLE": "Float64", "FLOAT16": "Float16", "INT32": "Int32", "INT8": "Int8"][schemaName] ?? schemaName
    }
}
