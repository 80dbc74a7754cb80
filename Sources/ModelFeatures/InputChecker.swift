import ModelSpec

/// Checks a prediction's inputs against a model's input descriptions before
/// anything runs, as Core ML does.
public enum InputChecker {
    /// The inputs, checked: every required input present, each of its
    /// declared type, multi-arrays of an allowed shape, images of an allowed
    /// size. Numbers are converted where the conversion loses nothing (an
    /// int64 given for a double, an integral double for an int64); inputs the
    /// model does not declare are passed through. An optional multi-array left
    /// out is given as Core ML gives it: its declared (default) shape filled
    /// with the model's default value, or zeros.
    ///
    /// - Throws: `RuntimeError` naming the first feature at fault.
    ///
    /// - Parameter sequences: the model is a rank-5 neural network, whose
    ///   multi-array inputs may also be `[Seq, 1, C, H, W]` arrays of any
    ///   sequence length around the declared `[C, H, W]` (as Core ML takes them).
    public static func check(
        _ inputs: [String: FeatureValue], against descriptions: [FeatureDescription], sequences: Bool = false
    ) throws(RuntimeError) -> [String: FeatureValue] {
        var checked = inputs
        for description in descriptions {
            guard let value = inputs[description.name] else {
                guard description.isOptional else {
                    throw .missingInput(feature: description.name, expected: description.type.expectation)
                }
                if case .multiArray(let array) = description.type { checked[description.name] = defaultValue(of: array) }
                continue
            }
            if sequences, case .multiArray(let array) = description.type, case .multiArray(let given) = value,
               given.shape.count == 5, given.shape[1] == 1, array.accepts(shape: Array(given.shape[2...])) {
                continue
            }
            checked[description.name] = try conform(value, to: description)
        }
        return checked
    }

    /// An optional multi-array's value when a prediction leaves it out.
    static func defaultValue(of array: MultiArrayType) -> FeatureValue? {
        let shape = array.shape.map { Int(max($0, 1)) }
        guard !shape.isEmpty else { return nil }
        let dataType = MultiArray.DataType(schemaName: array.dataType) ?? .float32
        return .multiArray(MultiArray([Double](repeating: array.defaultValue ?? 0, count: shape.reduce(1, *)), shape: shape, dataType: dataType))
    }

    /// `value` as the feature `description` declares it.
    public static func conform(_ value: FeatureValue, to description: FeatureDescription) throws(RuntimeError) -> FeatureValue {
        let name = description.name
        let type = description.type
        func mismatch() -> RuntimeError {
            .wrongType(feature: name, expected: type.expectation, got: value.kindText)
        }
        switch (type, value) {
        case (.double, .double), (.string, .string), (.int64, .int64):
            return value
        case (.double, .int64(let number)):
            return .double(Double(number))
        case (.int64, .double(let number)):
            guard let exact = Int64(exactly: number) else { throw mismatch() }
            return .int64(exact)
        case (.double, .multiArray(let given)) where given.count == 1:
            // A one-element array stands for a number, as Core ML reads it (NumPy rows of one column).
            return .double(given[0])
        case (.int64, .multiArray(let given)) where given.count == 1:
            guard let exact = Int64(exactly: given[0]) else { throw mismatch() }
            return .int64(exact)
        case (.multiArray(let array), .multiArray(let given)):
            guard array.accepts(shape: given.shape) else {
                throw .wrongShape(feature: name, expected: array.shapeExpectation, got: given.shape)
            }
            return value
        case (.multiArray(let array), .double), (.multiArray(let array), .int64):
            // A single number stands for a one-element array.
            guard array.accepts(shape: [1]), let number = value.doubleValue else { throw mismatch() }
            return .multiArray(MultiArray([number], shape: [1]))
        case (.image(let image), .multiArray(let given)) where image.space == .grayscaleFloat16:
            // Float pixels (Core ML's one-component half-float buffer) come as an array of
            // [H, W] values, ones before them allowed: the [1, 1, H, W] tensor the program reads.
            let shape = given.shape
            guard shape.count >= 2, shape.dropLast(2).allSatisfy({ $0 == 1 }) else { throw mismatch() }
            let height = shape[shape.count - 2], width = shape[shape.count - 1]
            guard image.accepts(width: width, height: height) else {
                throw .wrongImageSize(feature: name, expected: image.sizeExpectation, width: width, height: height)
            }
            return .multiArray(given.reshaped([1, 1, height, width]) ?? given)
        case (.image(let image), .image(let given)):
            guard image.accepts(width: given.width, height: given.height) else {
                throw .wrongImageSize(feature: name, expected: image.sizeExpectation, width: given.width, height: given.height)
            }
            return value
        case (.dictionary(let keyType), .dictionary(let given)):
            guard keyType.hasPrefix(given.keyKind) || keyType == "unset" else { throw mismatch() }
            return value
        case (.sequence(let sequence), .sequence(let given)):
            switch (sequence.elementType, given) {
            case ("int64Type", .int64s), ("stringType", .strings), ("unset", _): break
            default: throw mismatch()
            }
            if let range = sequence.sizeRange, !range.contains(given.count) {
                throw .invalidValue(feature: name, detail: "a sequence of \(given.count) elements, expected \(range.text) elements")
            }
            return value
        default:
            throw mismatch()
        }
    }
}

extension FeatureValue {
    /// What the value is, for messages: "a double", "a 3 × 4 FLOAT32 multi-array".
    public var kindText: String {
        switch self {
        case .double: "a double"
        case .int64: "an int64"
        case .string: "a string"
        case .multiArray(let array): "a \(shapeText(array.shape)) \(array.dataType.schemaName) multi-array"
        case .image(let image): "a \(image.width)×\(image.height) \(image.pixelFormat.rawValue) image"
        case .dictionary(let dictionary): "a dictionary with \(dictionary.keyKind) keys"
        case .sequence(.strings): "a sequence of strings"
        case .sequence(.int64s): "a sequence of int64s"
        }
    }
}

extension FeatureType {
    /// What a value of this type must be, for messages.
    public var expectation: String {
        switch self {
        case .int64: "an int64"
        case .double: "a double"
        case .string: "a string"
        case .image(let image): "a \(image.space.schemaName) image of \(image.sizeExpectation)"
        case .multiArray(let array), .state(let array): "a multi-array of shape \(array.shapeExpectation)"
        case .dictionary(let keyType): "a dictionary with \(keyType == "int64KeyType" ? "int64" : "string") keys"
        case .sequence(let sequence): sequence.elementType == "int64Type" ? "a sequence of int64s" : "a sequence of strings"
        case .unset: "a value of a type the model does not declare"
        }
    }
}

extension MultiArrayType {
    /// Whether an array of `shape` may be given for this feature.
    public func accepts(shape given: [Int]) -> Bool {
        switch shapeFlexibility {
        case .enumerated(let shapes):
            return shapes.contains { $0.map(Int.init) == given } || self.shape.map(Int.init) == given
        case .ranges(let ranges):
            guard ranges.count == given.count else { return false }
            return zip(ranges, given).allSatisfy { $0.contains($1) }
        case nil:
            // No declared shape: any. Otherwise the declared shape, or the
            // same elements with leading or trailing ones dropped or added
            // (Core ML's classic models read [n] and [1, n] alike).
            if shape.isEmpty { return true }
            let declared = shape.map(Int.init)
            return declared == given || strippingOnes(declared) == strippingOnes(given)
        }
    }

    /// The shapes allowed, for messages.
    public var shapeExpectation: String {
        switch shapeFlexibility {
        case .enumerated(let shapes):
            return "one of " + shapes.map { shapeText($0.map(Int.init)) }.joined(separator: ", ")
        case .ranges(let ranges):
            return ranges.map(\.text).joined(separator: " × ")
        case nil:
            return shape.isEmpty ? "any shape" : shapeText(shape.map(Int.init))
        }
    }

    private func strippingOnes(_ shape: [Int]) -> ArraySlice<Int> {
        var slice = shape[...]
        while slice.first == 1 { slice = slice.dropFirst() }
        while slice.last == 1 { slice = slice.dropLast() }
        return slice
    }
}

extension ImageType {
    /// Whether an image of this size may be given for this feature.
    public func accepts(width: Int, height: Int) -> Bool {
        if Int64(width) == self.width, Int64(height) == self.height { return true }
        switch sizeFlexibility {
        case .enumerated(let sizes):
            return sizes.contains { Int($0.width) == width && Int($0.height) == height }
        case .ranges(let widths, let heights):
            return widths.contains(width) && heights.contains(height)
        case nil:
            return false
        }
    }

    /// The sizes allowed, for messages.
    public var sizeExpectation: String {
        switch sizeFlexibility {
        case .enumerated(let sizes):
            return "one of " + sizes.map { "\($0.width)×\($0.height)" }.joined(separator: ", ")
        case .ranges(let widths, let heights):
            return "width \(widths.text), height \(heights.text)"
        case nil:
            return "\(width)×\(height)"
        }
    }
}

extension SizeRange {
    /// Whether `size` lies in the range (an upper bound of -1 is unbounded).
    public func contains(_ size: Int) -> Bool {
        size >= 0 && UInt64(size) >= lowerBound && (upperBound < 0 || Int64(size) <= upperBound)
    }

    /// `2...8` or `2...` for unbounded.
    public var text: String {
        upperBound < 0 ? "\(lowerBound)..." : (Int64(lowerBound) == upperBound ? "\(lowerBound)" : "\(lowerBound)...\(upperBound)")
    }
}
