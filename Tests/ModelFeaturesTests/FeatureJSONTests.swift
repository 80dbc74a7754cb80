import Foundation
import ModelFeatures
@testable import ModelSpec
import Testing

@Suite("Feature values as JSON")
struct FeatureJSONTests {
    func parse(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)
    }

    func read(_ text: String, as type: FeatureType) throws -> FeatureValue {
        try FeatureJSON.value(from: try parse(text), as: type, feature: "f")
    }

    /// Writing then reading gives the value back.
    func roundTrip(_ value: FeatureValue, as type: FeatureType) throws {
        let text = FeatureJSON.text(value)
        #expect(try read(text, as: type) == value, "\(text)")
    }

    @Test(arguments: [[3], [2, 3], [2, 1, 2], [1, 1, 1, 4], [0]])
    func nestedArraysKeepTheirShape(shape: [Int]) throws {
        let count = shape.reduce(1, *)
        let array = MultiArray((0..<count).map { Double($0) * 0.5 - 1 }, shape: shape)
        try roundTrip(.multiArray(array), as: Declared.array([]))
    }

    @Test func arraysInTheirDeclaredDataType() throws {
        let value = try read("[[1, 2.5], [-3, 4]]", as: Declared.array([2, 2], dataType: "FLOAT32"))
        #expect(value == .multiArray(MultiArray([1, 2.5, -3, 4], shape: [2, 2], dataType: .float32)))
        #expect(FeatureJSON.text(value) == "[[1.0, 2.5], [-3.0, 4.0]]")
        let int32 = MultiArray([1, -2, 3], shape: [3], dataType: .int32)
        #expect(FeatureJSON.text(.multiArray(int32)) == "[1, -2, 3]")
        try roundTrip(.multiArray(int32), as: Declared.array([3], dataType: "INT32"))
    }

    @Test func raggedArraysAndNonNumbersAreRefused() throws {
        #expect(throws: RuntimeError.invalidValue(feature: "f", detail: "a ragged array: every row at depth 2 must hold 2 elements")) {
            try read("[[1, 2], [3]]", as: Declared.array([]))
        }
        #expect(throws: RuntimeError.invalidValue(feature: "f", detail: "a string inside a numeric array")) {
            try read("[1, \"2\"]", as: Declared.array([]))
        }
    }

    /// null is NaN (a missing value) in arrays and doubles, and NaN or an
    /// infinity is written as null.
    @Test func nanIsNull() throws {
        let value = try read("[1, null, 3]", as: Declared.array([3]))
        let array = try #require(value.multiArrayValue)
        #expect(array[0] == 1 && array[1].isNaN && array[2] == 3)
        #expect(FeatureJSON.text(value) == "[1, null, 3]")
        #expect(try read("null", as: .double).doubleValue?.isNaN == true)
        #expect(FeatureJSON.text(.double(.nan)) == "null")
        #expect(FeatureJSON.text(.double(-.infinity)) == "null")
        #expect(FeatureJSON.text(.multiArray(MultiArray([Float.nan, 1], shape: [2]))) == "[null, 1.0]")
        #expect(throws: RuntimeError.self) { try read("null", as: .int64) }
    }

    @Test func booleansAreRefusedEverywhere() throws {
        for (text, type) in [("true", FeatureType.double), ("false", .int64), ("[true, 1]", Declared.array([2])),
                             ("{\"a\": true}", .dictionary(keyType: "stringKeyType")), ("[1, false]", .sequence(SequenceType(elementType: "int64Type")))] {
            #expect(throws: RuntimeError.self, "\(text)") { try read(text, as: type) }
        }
        #expect(throws: RuntimeError.wrongType(feature: "f", expected: "a double", got: "a boolean")) { try read("true", as: .double) }
        // 0 and 1 are numbers, not booleans.
        #expect(try read("1", as: .int64) == .int64(1))
        #expect(try read("0", as: .double) == .double(0))
        #expect(try read("[0, 1]", as: Declared.array([2])) == .multiArray(MultiArray([0.0, 1], shape: [2])))
    }

    @Test func numbers() throws {
        #expect(try read("3", as: .int64) == .int64(3))
        #expect(try read("3.0", as: .int64) == .int64(3))
        #expect(throws: RuntimeError.wrongType(feature: "f", expected: "an int64", got: "a number")) { try read("3.5", as: .int64) }
        for number in [0.1, -2.5e-300, 1e300, 123456789012.25, -7] {
            try roundTrip(.double(number), as: .double)
        }
        try roundTrip(.int64(Int64.max), as: .int64)
        try roundTrip(.int64(-42), as: .int64)
        #expect(FeatureJSON.numberText(2) == "2")
        #expect(FeatureJSON.numberText(1e20) == "1e+20")
    }

    @Test func stringsAreQuotedAndEscaped() throws {
        let text = "a \"quoted\" \\ line\nand\ttab \u{1} é"
        #expect(FeatureJSON.text(.string(text)) == "\"a \\\"quoted\\\" \\\\ line\\nand\\ttab \\u0001 é\"")
        try roundTrip(.string(text), as: .string)
    }

    @Test func int64KeyedDictionaries() throws {
        let value = try read("{\"10\": 0.5, \"-2\": 1, \"3\": 2}", as: .dictionary(keyType: "int64KeyType"))
        #expect(value == .dictionary(.int64s([10: 0.5, -2: 1, 3: 2])))
        // Without an order, numeric keys sort as numbers.
        #expect(FeatureJSON.text(value) == "{\"-2\": 1, \"3\": 2, \"10\": 0.5}")
        try roundTrip(value, as: .dictionary(keyType: "int64KeyType"))
        #expect(throws: RuntimeError.invalidValue(feature: "f", detail: "key \"x\" is not an integer")) {
            try read("{\"x\": 1}", as: .dictionary(keyType: "int64KeyType"))
        }
        #expect(throws: RuntimeError.invalidValue(feature: "f", detail: "the value of key \"a\" is a string, expected a number")) {
            try read("{\"a\": \"1\"}", as: .dictionary(keyType: "stringKeyType"))
        }
    }

    /// A classifier's probabilities are written in its label order; keys it
    /// does not list follow, sorted.
    @Test func keyOrderFollowsTheLabelList() throws {
        let value = FeatureValue.dictionary(.strings(["cat": 0.2, "dog": 0.5, "bird": 0.3, "ant": 0]))
        #expect(FeatureJSON.text(value, keyOrder: ["dog", "cat", "bird"]) == "{\"dog\": 0.5, \"cat\": 0.2, \"bird\": 0.3, \"ant\": 0}")
        #expect(FeatureJSON.text(value) == "{\"ant\": 0, \"bird\": 0.3, \"cat\": 0.2, \"dog\": 0.5}")
        let int64s = FeatureValue.dictionary(.int64s([3: 0.1, 7: 0.2, 11: 0.7]))
        #expect(FeatureJSON.text(int64s, keyOrder: ["11", "3", "7"]) == "{\"11\": 0.7, \"3\": 0.1, \"7\": 0.2}")
        #expect(FeatureJSON.text(["label": .string("dog"), "probs": value], keyOrder: ["dog", "cat", "bird", "ant"])
                == "{\"label\": \"dog\", \"probs\": {\"dog\": 0.5, \"cat\": 0.2, \"bird\": 0.3, \"ant\": 0}}")
    }

    @Test func sequences() throws {
        try roundTrip(.sequence(.strings(["a", "b c"])), as: .sequence(SequenceType(elementType: "stringType")))
        try roundTrip(.sequence(.int64s([3, -1])), as: .sequence(SequenceType(elementType: "int64Type")))
        try roundTrip(.sequence(.int64s([])), as: .sequence(SequenceType(elementType: "int64Type")))
        #expect(throws: RuntimeError.self) { try read("[1.5]", as: .sequence(SequenceType(elementType: "int64Type"))) }
        #expect(throws: RuntimeError.self) { try read("[1]", as: .sequence(SequenceType(elementType: "stringType"))) }
    }

    /// Images are objects of their pixels; rows are written without padding.
    @Test func imagesRoundTrip() throws {
        let image = try #require(PixelBuffer(width: 2, height: 2, pixelFormat: .rgb, bytesPerRow: 8,
                                             bytes: [1, 2, 3, 4, 5, 6, 99, 99, 7, 8, 9, 10, 11, 12]))
        let text = FeatureJSON.text(.image(image))
        #expect(text == "{\"width\": 2, \"height\": 2, \"pixelFormat\": \"rgb\", \"pixels\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}")
        let back = try read(text, as: Declared.image(2, 2))
        let unpadded = try #require(PixelBuffer(width: 2, height: 2, pixelFormat: .rgb, bytes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]))
        #expect(back == .image(unpadded))
        #expect(throws: RuntimeError.self) {
            try read("{\"width\": 2, \"height\": 2, \"pixelFormat\": \"rgb\", \"pixels\": [1, 2, 3]}", as: Declared.image(2, 2))
        }
        #expect(throws: RuntimeError.self) {
            try read("{\"width\": 1, \"height\": 1, \"pixelFormat\": \"cmyk\", \"pixels\": [1, 2, 3, 4]}", as: Declared.image(1, 1))
        }
    }

    @Test func undeclaredTypesAreInferred() throws {
        #expect(try FeatureJSON.inferredValue(from: try parse("2"), feature: "f") == .double(2))
        #expect(try FeatureJSON.inferredValue(from: try parse("\"s\""), feature: "f") == .string("s"))
        #expect(try FeatureJSON.inferredValue(from: try parse("[1, 2]"), feature: "f") == .multiArray(MultiArray([1.0, 2], shape: [2])))
        #expect(try FeatureJSON.inferredValue(from: try parse("{\"a\": 1}"), feature: "f") == .dictionary(.strings(["a": 1])))
        #expect(throws: RuntimeError.invalidValue(feature: "f", detail: "null is not a feature value")) {
            try FeatureJSON.inferredValue(from: try parse("null"), feature: "f")
        }
    }
}

@Suite("Outputs in their declared types")
struct OutputConformerTests {
    @Test func oneElementArraysAndNumbers() {
        let double = Declared.feature("y", .double)
        #expect(OutputConformer.conform(.multiArray(MultiArray([2.5], shape: [1])), to: double) == .double(2.5))
        #expect(OutputConformer.conform(.multiArray(MultiArray([2.5], shape: [1, 1])), to: double) == .double(2.5))
        #expect(OutputConformer.conform(.int64(3), to: double) == .double(3))
        let twoElements = FeatureValue.multiArray(MultiArray([1.0, 2], shape: [2]))
        #expect(OutputConformer.conform(twoElements, to: double) == twoElements)

        let int64 = Declared.feature("y", .int64)
        #expect(OutputConformer.conform(.double(4), to: int64) == .int64(4))
        #expect(OutputConformer.conform(.double(4.5), to: int64) == .double(4.5))

        #expect(OutputConformer.conform(.double(1.5), to: Declared.feature("y", Declared.array([1, 1], dataType: "FLOAT32")))
                == .multiArray(MultiArray([1.5], shape: [1, 1], dataType: .float32)))
        #expect(OutputConformer.conform(.double(1.5), to: Declared.feature("y", Declared.array([])))
                == .multiArray(MultiArray([1.5], shape: [1])))
    }

    @Test func arraysTakeTheDeclaredTypeAndShape() {
        let declared = Declared.feature("y", Declared.array([2, 2], dataType: "FLOAT32"))
        let value = FeatureValue.multiArray(MultiArray([1.0, 2, 3, 4], shape: [4]))
        #expect(OutputConformer.conform(value, to: declared) == .multiArray(MultiArray([1, 2, 3, 4], shape: [2, 2], dataType: .float32)))
        // A flexible shape, or another element count, is left as computed.
        let flexible = Declared.feature("y", Declared.array([2, 2], .ranges([Declared.range(0, -1), Declared.range(2, 2)])))
        let rows = FeatureValue.multiArray(MultiArray([1.0, 2, 3, 4, 5, 6], shape: [3, 2]))
        #expect(OutputConformer.conform(rows, to: flexible) == rows)
        let three = FeatureValue.multiArray(MultiArray([1.0, 2, 3], shape: [3]))
        #expect(OutputConformer.conform(three, to: Declared.feature("y", Declared.array([4]))) == three)
    }

    @Test func denseVectorAsSparseDictionary() {
        let declared = Declared.feature("y", .dictionary(keyType: "int64KeyType"))
        let value = FeatureValue.multiArray(MultiArray([0, 1, 0, 2.5], shape: [4]))
        #expect(OutputConformer.conform(value, to: declared) == .dictionary(.int64s([1: 1, 3: 2.5])))
    }

    /// An 8-bit gray image output is rounded and clamped; a GRAYSCALE_FLOAT16 one keeps the float
    /// values the engine computed (Core ML gives half-float pixels, PIL mode F in its binding).
    @Test func grayscaleImageOutputs() throws {
        let values = FeatureValue.multiArray(MultiArray([-3, 0.4, 127.6, 300], shape: [1, 1, 2, 2], dataType: .float16))
        let gray = Declared.feature("y", .image(ImageType(width: 2, height: 2, colorSpace: "GRAYSCALE", sizeFlexibility: nil)))
        guard case .image(let pixels) = OutputConformer.conform(values, to: gray) else {
            Issue.record("a GRAYSCALE output is not an image")
            return
        }
        #expect(pixels.pixelFormat == .gray && pixels.bytes == [0, 0, 128, 255])
        let half = Declared.feature("y", .image(ImageType(width: 2, height: 2, colorSpace: "GRAYSCALE_FLOAT16", sizeFlexibility: nil)))
        #expect(OutputConformer.conform(values, to: half) == values)
    }

    @Test func onlyDeclaredOutputsAreKept() {
        let outputs: [String: FeatureValue] = ["y": .double(1), "scratch": .double(2)]
        #expect(OutputConformer.conform(outputs, to: [Declared.feature("y", .int64)]) == ["y": .int64(1)])
    }
}
