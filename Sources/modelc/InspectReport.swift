import ModelSpec

/// The human form of `modelc inspect`: sections of aligned label/value rows.
struct InspectReport {
    private(set) var text = ""

    init(_ summary: ModelSummary, path: String) {
        line(path)
        model(summary, indent: "  ")
    }

    private mutating func line(_ value: String) {
        text += value + "\n"
    }

    private mutating func row(_ indent: String, _ label: String, _ value: String) {
        let width = 24
        let padded = label.count < width ? label + String(repeating: " ", count: width - label.count) : label + "  "
        line(indent + padded + value)
    }

    private mutating func model(_ summary: ModelSummary, indent: String) {
        row(indent, "type", summary.modelType ?? "(not set)")
        if let format = summary.format {
            row(indent, "format", "\(format.rawValue), Core ML specification \(summary.specificationVersion)")
        } else {
            row(indent, "specification", "\(summary.specificationVersion)")
        }
        row(indent, "updatable", summary.isUpdatable ? "yes" : "no")
        if let metadata = summary.metadata {
            if !metadata.shortDescription.isEmpty { row(indent, "description", metadata.shortDescription) }
            if !metadata.author.isEmpty { row(indent, "author", metadata.author) }
            if !metadata.license.isEmpty { row(indent, "license", metadata.license) }
            if !metadata.versionString.isEmpty { row(indent, "version", metadata.versionString) }
            for key in metadata.userDefined.keys.sorted() {
                row(indent, "metadata \(key)", metadata.userDefined[key] ?? "")
            }
        }
        features("inputs", summary.inputs, indent: indent)
        features("outputs", summary.outputs, indent: indent)
        if !summary.states.isEmpty { features("states", summary.states, indent: indent) }
        if !summary.trainingInputs.isEmpty { features("training inputs", summary.trainingInputs, indent: indent) }
        if let name = summary.predictedFeatureName { row(indent, "predicted feature", name) }
        if let name = summary.predictedProbabilitiesName { row(indent, "probabilities", name) }
        if let labels = summary.classLabels {
            row(indent, "class labels", "\(labels.count) (\(labels.kind)): \(preview(labels))")
        }
        if let layers = summary.layers { network(layers, summary.weights ?? [], indent: indent) }
        if let stages = summary.pipeline {
            line("\(indent)pipeline (\(stages.count) \(stages.count == 1 ? "model" : "models"))")
            for (index, stage) in stages.enumerated() {
                line("\(indent)  model \(index)")
                model(stage, indent: indent + "    ")
            }
        }
        if let functions = summary.functions { program(summary, functions, indent: indent) }
    }

    private mutating func features(_ title: String, _ list: [FeatureDescription], indent: String) {
        line("\(indent)\(title)")
        if list.isEmpty { line("\(indent)  (none)") }
        for feature in list {
            var value = describe(feature.type)
            if feature.isOptional { value += " (optional)" }
            if !feature.shortDescription.isEmpty { value += "  — \(feature.shortDescription)" }
            row(indent + "  ", feature.name, value)
        }
    }

    private mutating func network(_ layers: [Layer], _ weights: [WeightTensor], indent: String) {
        line("\(indent)layers (\(layers.count))")
        for layer in layers {
            let flow = "\(layer.inputs.joined(separator: ", ")) → \(layer.outputs.joined(separator: ", "))"
            row(indent + "  ", layer.name, "\(pad(layer.kind, 18))\(flow)\(layer.isUpdatable ? "  (updatable)" : "")")
        }
        var kinds: [String: Int] = [:]
        for layer in layers { kinds[layer.kind, default: 0] += 1 }
        row(indent, "layer kinds", kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let values = weights.reduce(0) { $0 + $1.count }
        let bytes = weights.reduce(0) { $0 + $1.bytes }
        line("\(indent)weights (\(weights.count) tensors, \(grouped(values)) values, \(byteCount(bytes)))")
        for weight in weights {
            var storage = weight.storage.rawValue
            if let bits = weight.quantizationBits { storage += " \(bits)-bit" }
            row(indent + "  ", "\(weight.layer).\(weight.role)",
                "\(pad(storage, 18))\(pad(grouped(weight.count) + " values", 18))\(byteCount(weight.bytes))")
        }
    }

    private mutating func program(_ summary: ModelSummary, _ functions: [ProgramFunction], indent: String) {
        line("\(indent)functions (\(functions.count))")
        for function in functions {
            row(indent + "  ", function.name,
                "\(function.opset): (\(function.inputs.joined(separator: ", "))) → (\(function.outputs.joined(separator: ", ")))")
        }
        let operations = summary.operations ?? [:]
        let total = operations.values.reduce(0, +)
        row(indent, "operations (\(total))",
            operations.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let blobs = summary.blobWeights ?? []
        let bytes = blobs.reduce(UInt64(0)) { $0 + ($1.bytes ?? 0) }
        line("\(indent)weight file constants (\(blobs.count), \(byteCount(Int(clamping: bytes))))")
        for blob in blobs {
            let size = blob.problem.map { "error: \($0)" } ?? byteCount(Int(clamping: blob.bytes ?? 0))
            row(indent + "  ", blob.name, "\(pad(blob.dataType, 10))\(pad(grouped(blob.count) + " values", 18))\(size)")
        }
    }

    private func describe(_ type: FeatureType) -> String {
        switch type {
        case .int64: return "int64"
        case .double: return "double"
        case .string: return "string"
        case .unset: return "(type not set)"
        case .dictionary(let key):
            let keyName = key == "int64KeyType" ? "int64" : key == "stringKeyType" ? "string" : key
            return "dictionary<\(keyName), double>"
        case .sequence(let sequence):
            let element = sequence.elementType == "int64Type" ? "int64" : sequence.elementType == "stringType" ? "string" : sequence.elementType
            let range = sequence.sizeRange.map { " length \(describe($0))" } ?? ""
            return "sequence<\(element)>\(range)"
        case .image(let image):
            var text = "image \(image.width)×\(image.height) \(image.space.schemaName)"
            switch image.sizeFlexibility {
            case .enumerated(let sizes): text += ", or sizes " + sizes.map { "\($0.width)×\($0.height)" }.joined(separator: ", ")
            case .ranges(let width, let height): text += ", width \(describe(width)), height \(describe(height))"
            case nil: break
            }
            return text
        case .multiArray(let array), .state(let array):
            var text = (type.schemaName == "stateType" ? "state " : "") + "\(array.dataType) "
                + (array.shape.isEmpty ? "(no shape)" : array.shape.map(String.init).joined(separator: "×"))
            switch array.shapeFlexibility {
            case .enumerated(let shapes): text += ", or " + shapes.map { $0.map(String.init).joined(separator: "×") }.joined(separator: ", ")
            case .ranges(let ranges): text += ", dimensions " + ranges.map(describe).joined(separator: " × ")
            case nil: break
            }
            return text
        }
    }

    private func describe(_ range: SizeRange) -> String {
        range.upperBound < 0 ? "\(range.lowerBound)…∞" : "\(range.lowerBound)…\(range.upperBound)"
    }

    private func preview(_ labels: ClassLabels) -> String {
        let shown: [String] = switch labels {
        case .strings(let values): values.prefix(8).map { "\"\($0)\"" }
        case .int64s(let values): values.prefix(8).map(String.init)
        }
        return shown.joined(separator: ", ") + (labels.count > 8 ? ", …" : "")
    }
}

private func pad(_ text: String, _ width: Int) -> String {
    text.count < width ? text + String(repeating: " ", count: width - text.count) : text + " "
}

/// `1234567` as `1,234,567`.
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var result = ""
    for (index, digit) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { result += "," }
        result.append(digit)
    }
    return (value < 0 ? "-" : "") + result
}

/// A byte count for people: `512 B`, `4.8 KB`, `80.0 MB` (powers of 1024).
func byteCount(_ bytes: Int) -> String {
    if bytes < 1024 { return "\(bytes) B" }
    let units = ["KB", "MB", "GB", "TB"]
    var value = Double(bytes) / 1024
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10) \(units[unit])"
}
