import ModelFeatures
@testable import ModelSpec
import Testing

/// Descriptions as a model declares them.
enum Declared {
    static func feature(_ name: String, _ type: FeatureType, optional: Bool = false) -> FeatureDescription {
        FeatureDescription(name: name, shortDescription: "", isOptional: optional, type: type)
    }

    static func array(_ shape: [Int64], _ flexibility: MultiArrayType.ShapeFlexibility? = nil, dataType: String = "DOUBLE") -> FeatureType {
        .multiArray(MultiArrayType(dataType: dataType, shape: shape, shapeFlexibility: flexibility))
    }

    static func image(_ width: Int64, _ height: Int64, _ flexibility: ImageType.SizeFlexibility? = nil) -> FeatureType {
        .image(ImageType(width: width, height: height, colorSpace: "RGB", sizeFlexibility: flexibility))
    }

    static func range(_ lower: UInt64, _ upper: Int64) -> SizeRange {
        SizeRange(lowerBound: lower, upperBound: upper)
    }

    static func pixels(_ width: Int, _ height: Int) -> FeatureValue {
        .image(PixelBuffer(width: width, height: height, pixelFormat: .rgb, bytes: [UInt8](repeating: 7, count: width * height * 3))!)
    }

    static func array(shape: [Int]) -> FeatureValue {
        .multiArray(MultiArray([Double](repeating: 1, count: shape.reduce(1, *)), shape: shape))
    }
}

@Suite("Input checks")
struct InputCheckerTests {
    @Test func missingRequiredInputIsNamedAndOptionalOnesMayBeLeftOut() throws {
        let descriptions = [Declared.feature("x", .double), Declared.feature("k", .int64, optional: true)]
        #expect(throws: RuntimeError.missingInput(feature: "x", expected: "a double")) {
            try InputChecker.check(["k": .int64(1)], against: descriptions)
        }
        #expect(try InputChecker.check(["x": .double(2)], against: descriptions) == ["x": .double(2)])
        #expect(RuntimeError.missingInput(feature: "x", expected: "a double").description == "input \"x\" is missing (expected a double)")
    }

    @Test func undeclaredInputsPassThrough() throws {
        let checked = try InputChecker.check(["x": .double(1), "extra": .string("s")], against: [Declared.feature("x", .double)])
        #expect(checked == ["x": .double(1), "extra": .string("s")])
    }

    /// An int64 is always a double; a double is an int64 only when integral and in range.
    @Test func numberConversions() throws {
        let double = Declared.feature("d", .double)
        let int64 = Declared.feature("i", .int64)
        #expect(try InputChecker.conform(.int64(-3), to: double) == .double(-3))
        #expect(try InputChecker.conform(.double(4), to: int64) == .int64(4))
        #expect(try InputChecker.conform(.double(-0.0), to: int64) == .int64(0))
        for bad in [2.5, .nan, .infinity, 1e19] {
            #expect(throws: RuntimeError.wrongType(feature: "i", expected: "an int64", got: "a double")) {
                try InputChecker.conform(.double(bad), to: int64)
            }
        }
        #expect(throws: RuntimeError.wrongType(feature: "d", expected: "a double", got: "a string")) {
            try InputChecker.conform(.string("1"), to: double)
        }
        #expect(throws: RuntimeError.wrongType(feature: "s", expected: "a string", got: "an int64")) {
            try InputChecker.conform(.int64(1), to: Declared.feature("s", .string))
        }
    }

    @Test func fixedShapesAcceptLeadingAndTrailingOnes() throws {
        let feature = Declared.feature("x", Declared.array([4]))
        for shape in [[4], [1, 4], [4, 1], [1, 1, 4]] {
            #expect(throws: Never.self) { try InputChecker.conform(Declared.array(shape: shape), to: feature) }
        }
        for shape in [[3], [2, 2], [4, 2], [], [0]] {
            #expect(throws: RuntimeError.wrongShape(feature: "x", expected: "4", got: shape)) {
                try InputChecker.conform(Declared.array(shape: shape), to: feature)
            }
        }
        // No declared shape: any.
        #expect(throws: Never.self) { try InputChecker.conform(Declared.array(shape: [2, 3]), to: Declared.feature("y", Declared.array([]))) }
    }

    @Test func aNumberStandsForAOneElementArray() throws {
        let one = Declared.feature("x", Declared.array([1]))
        #expect(try InputChecker.conform(.double(2.5), to: one) == .multiArray(MultiArray([2.5], shape: [1])))
        #expect(try InputChecker.conform(.int64(3), to: one) == .multiArray(MultiArray([3.0], shape: [1])))
        #expect(throws: RuntimeError.wrongType(feature: "x", expected: "a multi-array of shape 4", got: "a double")) {
            try InputChecker.conform(.double(1), to: Declared.feature("x", Declared.array([4])))
        }
    }

    @Test(arguments: [([1, 3], true), ([2, 3], true), ([1, 2, 3], true), ([3, 1], false), ([2], false), ([1, 3, 1], false)])
    func enumeratedShapes(shape: [Int], accepted: Bool) throws {
        let type = Declared.array([1, 3], .enumerated([[2, 3], [1, 2, 3]]))
        let feature = Declared.feature("x", type)
        if accepted {
            #expect(throws: Never.self) { try InputChecker.conform(Declared.array(shape: shape), to: feature) }
        } else {
            #expect(throws: RuntimeError.wrongShape(feature: "x", expected: "one of 2 × 3, 1 × 2 × 3", got: shape)) {
                try InputChecker.conform(Declared.array(shape: shape), to: feature)
            }
        }
    }

    @Test(arguments: [([1, 2], true), ([1, 100], true), ([3, 5], true), ([4, 5], false), ([1, 1], false), ([0, 2], false), ([2], false)])
    func rangedShapes(shape: [Int], accepted: Bool) throws {
        let type = Declared.array([1, 2], .ranges([Declared.range(1, 3), Declared.range(2, -1)]))
        let feature = Declared.feature("x", type)
        if accepted {
            #expect(throws: Never.self) { try InputChecker.conform(Declared.array(shape: shape), to: feature) }
        } else {
            #expect(throws: RuntimeError.wrongShape(feature: "x", expected: "1...3 × 2...", got: shape)) {
                try InputChecker.conform(Declared.array(shape: shape), to: feature)
            }
        }
    }

    @Test func imageSizes() throws {
        let fixed = Declared.feature("image", Declared.image(16, 8))
        #expect(throws: Never.self) { try InputChecker.conform(Declared.pixels(16, 8), to: fixed) }
        #expect(throws: RuntimeError.wrongImageSize(feature: "image", expected: "16×8", width: 8, height: 16)) {
            try InputChecker.conform(Declared.pixels(8, 16), to: fixed)
        }
        let enumerated = Declared.feature("image", Declared.image(16, 16, .enumerated([ImageSize(width: 32, height: 32), ImageSize(width: 64, height: 48)])))
        for (width, height) in [(16, 16), (32, 32), (64, 48)] {
            #expect(throws: Never.self) { try InputChecker.conform(Declared.pixels(width, height), to: enumerated) }
        }
        #expect(throws: RuntimeError.wrongImageSize(feature: "image", expected: "one of 32×32, 64×48", width: 48, height: 64)) {
            try InputChecker.conform(Declared.pixels(48, 64), to: enumerated)
        }
        let ranged = Declared.feature("image", Declared.image(16, 16, .ranges(width: Declared.range(8, 32), height: Declared.range(8, -1))))
        for (width, height) in [(8, 8), (32, 1000), (20, 9)] {
            #expect(throws: Never.self) { try InputChecker.conform(Declared.pixels(width, height), to: ranged) }
        }
        for (width, height) in [(7, 8), (33, 8), (8, 7)] {
            #expect(throws: RuntimeError.wrongImageSize(feature: "image", expected: "width 8...32, height 8...", width: width, height: height)) {
                try InputChecker.conform(Declared.pixels(width, height), to: ranged)
            }
        }
        #expect(throws: RuntimeError.wrongType(feature: "image", expected: "a RGB image of 16×8", got: "a 1 × 4 DOUBLE multi-array")) {
            try InputChecker.conform(Declared.array(shape: [1, 4]), to: fixed)
        }
    }

    @Test func dictionariesNeedTheirKeyKind() throws {
        let strings = Declared.feature("d", .dictionary(keyType: "stringKeyType"))
        let int64s = Declared.feature("d", .dictionary(keyType: "int64KeyType"))
        #expect(throws: Never.self) { try InputChecker.conform(.dictionary(.strings(["a": 1])), to: strings) }
        #expect(throws: Never.self) { try InputChecker.conform(.dictionary(.int64s([1: 1])), to: int64s) }
        #expect(throws: RuntimeError.wrongType(feature: "d", expected: "a dictionary with int64 keys", got: "a dictionary with string keys")) {
            try InputChecker.conform(.dictionary(.strings(["a": 1])), to: int64s)
        }
        #expect(throws: RuntimeError.wrongType(feature: "d", expected: "a dictionary with string keys", got: "a dictionary with int64 keys")) {
            try InputChecker.conform(.dictionary(.int64s([1: 1])), to: strings)
        }
    }

    @Test func sequencesNeedTheirElementTypeAndSize() throws {
        let feature = Declared.feature("s", .sequence(SequenceType(elementType: "int64Type", sizeRange: Declared.range(1, 3))))
        #expect(throws: Never.self) { try InputChecker.conform(.sequence(.int64s([1, 2])), to: feature) }
        #expect(throws: RuntimeError.wrongType(feature: "s", expected: "a sequence of int64s", got: "a sequence of strings")) {
            try InputChecker.conform(.sequence(.strings(["a"])), to: feature)
        }
        #expect(throws: RuntimeError.invalidValue(feature: "s", detail: "a sequence of 4 elements, expected 1...3 elements")) {
            try InputChecker.conform(.sequence(.int64s([1, 2, 3, 4])), to: feature)
        }
        #expect(throws: RuntimeError.invalidValue(feature: "s", detail: "a sequence of 0 elements, expected 1...3 elements")) {
            try InputChecker.conform(.sequence(.int64s([])), to: feature)
        }
    }

    /// coremltools' converter tests (issue 37): an optional tensor input left out is its
    /// declared shape filled with the model's default value (zeros without one), as Core ML gives it.
    @Test func optionalArrayLeftOutTakesTheDefaultValue() throws {
        var withDefault = MultiArrayType(dataType: "FLOAT32", shape: [1, 2], shapeFlexibility: nil)
        withDefault.defaultValue = 3
        let descriptions = [Declared.feature("x", .double), Declared.feature("bias", .multiArray(withDefault), optional: true),
                            Declared.feature("mask", Declared.array([3], dataType: "INT32"), optional: true)]
        let checked = try InputChecker.check(["x": .double(1)], against: descriptions)
        #expect(checked["bias"] == .multiArray(MultiArray([3, 3], shape: [1, 2], dataType: .float32)))
        #expect(checked["mask"] == .multiArray(MultiArray([0, 0, 0], shape: [3], dataType: .int32)))
        let given = Declared.array(shape: [1, 2])
        #expect(try InputChecker.check(["x": .double(1), "bias": given], against: descriptions)["bias"] == given)
    }

    /// A one-element multi-array given for a double or int64 feature is that number
    /// (scikit-learn converters' tests give NumPy rows of one column).
    @Test func oneElementArrayStandsForANumber() throws {
        #expect(try InputChecker.conform(.multiArray(MultiArray([2.5], shape: [1])), to: Declared.feature("d", .double)) == .double(2.5))
        #expect(try InputChecker.conform(.multiArray(MultiArray([4], shape: [1, 1])), to: Declared.feature("i", .int64)) == .int64(4))
        #expect(throws: RuntimeError.wrongType(feature: "i", expected: "an int64", got: "a 1 DOUBLE multi-array")) {
            try InputChecker.conform(.multiArray(MultiArray([4.5], shape: [1])), to: Declared.feature("i", .int64))
        }
        #expect(throws: RuntimeError.self) { try InputChecker.conform(Declared.array(shape: [2]), to: Declared.feature("d", .double)) }
    }

    /// A GRAYSCALE_FLOAT16 image takes float pixels as an [H, W] array (leading ones allowed), made
    /// the [1, 1, H, W] tensor the program reads; its size is checked as an image's.
    @Test func halfFloatGrayscaleImageTakesAnArrayOfPixels() throws {
        let feature = Declared.feature("g", .image(ImageType(width: 3, height: 2, colorSpace: "GRAYSCALE_FLOAT16", sizeFlexibility: nil)))
        let pixels = MultiArray([0.25, 0.5, 0.75, 1, 1.25, 1.5], shape: [2, 3], dataType: .float32)
        #expect(try InputChecker.conform(.multiArray(pixels), to: feature) == .multiArray(pixels.reshaped([1, 1, 2, 3])!))
        #expect(throws: RuntimeError.wrongImageSize(feature: "g", expected: "3×2", width: 2, height: 3)) {
            try InputChecker.conform(.multiArray(pixels.reshaped([3, 2])!), to: feature)
        }
        #expect(throws: RuntimeError.self) { try InputChecker.conform(.multiArray(pixels.reshaped([2, 1, 3])!), to: feature) }
        let rgb = Declared.feature("c", Declared.image(3, 2))
        #expect(throws: RuntimeError.self) { try InputChecker.conform(.multiArray(pixels), to: rgb) }
    }

    @Test func messagesAreOneLine() {
        let errors: [RuntimeError] = [
            .missingInput(feature: "x", expected: "a double"),
            .wrongType(feature: "x", expected: "a double", got: "a string"),
            .wrongShape(feature: "x", expected: "4", got: [2, 2]),
            .wrongImageSize(feature: "x", expected: "16×16", width: 1, height: 2),
            .invalidValue(feature: "x", detail: "NaN"),
            .unsupportedModel(kind: "k", reason: "r"),
        ]
        for error in errors { #expect(!error.description.contains("\n")) }
        #expect(RuntimeError.wrongShape(feature: "x", expected: "4", got: [2, 2]).description == "input \"x\" has shape 2 × 2, expected 4")
        #expect(RuntimeError.wrongShape(feature: "x", expected: "4", got: []).description == "input \"x\" has shape scalar, expected 4")
    }
}
