import CoreMLSchema
import FixtureSupport
import Foundation
import Testing
@testable import ModelSpec

@Suite struct ProgramTextTests {
    /// Compares with `Expected/NAME.mil`; on a difference the text printed is
    /// left in the temporary directory for review.
    @Test(arguments: ["MLProgram", "StatefulProgram"])
    func fixtureMatchesExpectedText(name: String) throws {
        let text = try #require(try ModelFile.open(Fixtures.path("Models/\(name).mlpackage")).programText())
        let expectedURL = Fixtures.packageRoot.appendingPathComponent("Tests/ModelSpecTests/Expected/\(name).mil")
        let expected = try String(contentsOf: expectedURL, encoding: .utf8)
        if text != expected {
            let actualURL = FileManager.default.temporaryDirectory.appendingPathComponent("\(name).actual.mil")
            try text.write(to: actualURL, atomically: true, encoding: .utf8)
            Issue.record("\(name): printed text differs from \(expectedURL.path); see \(actualURL.path)")
        }
    }

    @Test(arguments: Fixtures.models.filter { $0.facts["modelType"] as? String == "mlProgram" })
    func printingIsDeterministic(entry: Fixtures.Entry) throws {
        let model = try ModelFile.open(Fixtures.path(entry.file))
        let again = try ModelFile.open(Fixtures.path(entry.file))
        let text = try #require(model.programText())
        #expect(model.programText() == text)
        #expect(again.programText() == text)
    }

    @Test(arguments: Fixtures.models.filter { $0.facts["modelType"] as? String == "mlProgram" })
    func everyBlobWeightAppearsWithItsOffset(entry: Fixtures.Entry) throws {
        let text = try #require(try ModelFile.open(Fixtures.path(entry.file)).programText())
        let weights = try #require(entry.facts["blobWeights"] as? [[String: Any]])
        #expect(!weights.isEmpty)
        let lines = text.split(separator: "\n")
        for weight in weights {
            let name = try #require(weight["name"] as? String)
            let offset = try #require(weight["offset"] as? Int)
            let reference = "BLOBFILE(path = string(\"@model_path/weights/weight.bin\"), offset = uint64(\(offset)))"
            // A const's value ("w"), or an operation's input ("w_quantized.data").
            let parts = name.split(separator: ".", maxSplits: 1).map(String.init)
            if parts.count == 1 {
                let line = lines.first { $0.contains(" \(name) = const()") }
                #expect(line?.contains(reference) == true, "\(name) at \(offset): \(line ?? "no line")")
            } else {
                guard let line = lines.first(where: { $0.contains(" \(parts[0]) = ") && $0.contains(reference) }),
                      let input = line.range(of: "\(parts[1]) = tensor<"), let blob = line.range(of: reference)
                else {
                    Issue.record("\(name) at \(offset): no line names it")
                    continue
                }
                #expect(input.lowerBound < blob.lowerBound, "\(name) at \(offset): \(line)")
            }
        }
    }

    @Test(arguments: Fixtures.models.filter { $0.facts["modelType"] as? String == "mlProgram" })
    func everyOperationAppearsAsOftenAsTheIndexSays(entry: Fixtures.Entry) throws {
        let text = try #require(try ModelFile.open(Fixtures.path(entry.file)).programText())
        let expected = try #require(entry.facts["operations"] as? [String: Int])
        #expect(operationCounts(text) == expected)
    }

    @Test func neuralNetworkHasNoProgramText() throws {
        #expect(try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel")).programText() == nil)
        #expect(try ModelFile.open(Fixtures.path("Models/PipelineClassifier.mlmodel")).programText() == nil)
    }

    /// A nested block, a string needing escapes, an unknown dimension, a tuple
    /// argument, inline values and a float16 tensor stored as bytes.
    @Test func handBuiltProgram() throws {
        typealias T = MILWire.DataType
        let x = MILWire.tensorType(T.float32, [nil, 4])
        let flag = MILWire.operation("const", outputs: [MILWire.named("flag", MILWire.tensorType(T.bool, []))],
                                     attributes: [("name", MILWire.stringValue("flag")), ("val", MILWire.boolValue(true))])
        let halfType = MILWire.tensorType(T.float16, [2])
        let half = MILWire.operation("const", outputs: [MILWire.named("half", halfType)], attributes: [
            ("val", MILWire.immediate(halfType, tensor: Wire.field(7, bytes: Wire.field(1, bytes: [0x00, 0x3C, 0x00, 0xC0])))),
            ("name", MILWire.stringValue("half")),
        ])
        let relu = MILWire.operation("relu", inputs: [("x", [.name("x")])], outputs: [MILWire.named("a", x)],
                                     attributes: [("name", MILWire.stringValue("relu \"inner\" \\ 1\n"))])
        let cond = MILWire.operation(
            "cond", inputs: [("pred", [.name("flag")])], outputs: [MILWire.named("out", x)],
            blocks: [MILWire.block(outputs: ["a"], operations: [relu]), MILWire.block(outputs: ["x"], operations: [])],
            attributes: [("name", MILWire.stringValue("out"))])
        let concat = MILWire.operation(
            "concat",
            inputs: [("values", [.name("out"), .name("x")]), ("axis", [.value(MILWire.int32Value(1))]),
                     ("interleave", [.value(MILWire.boolValue(false))])],
            outputs: [MILWire.named("joined", MILWire.tensorType(T.float32, [nil, 8]))],
            attributes: [("name", MILWire.stringValue("joined"))])
        let block = MILWire.block(outputs: ["joined"], operations: [flag, half, cond, concat])
        let bytes = MILWire.model(opset: "CoreML7", inputs: [MILWire.named("x", x)], block: block,
                                  attributes: [("note", MILWire.stringValue("say \"hi\""))])

        let specification = try bytes.withUnsafeBytes { buffer in
            try Specification.unpack(buffer, path: "hand-built.mlmodel")
        }
        let program = try #require(specification.root.pointee.mlprogram)
        let text = ProgramTextPrinter.text(of: program)
        #expect(text == #"""
            program(1.0)
            [note = string("say \"hi\"")]
            {
                func main<ios17>(tensor<fp32, [?, 4]> x) {
                        bool flag = const()[name = string("flag"), val = bool(true)];
                        tensor<fp16, [2]> half = const()[name = string("half"), val = tensor<fp16, [2]>([1.0, -2.0])];
                        tensor<fp32, [?, 4]> out = cond(pred = flag)[name = string("out")]
                            block0() {
                                tensor<fp32, [?, 4]> a = relu(x = x)[name = string("relu \"inner\" \\ 1\n")];
                            } -> (a)
                            block1() {
                            } -> (x);
                        tensor<fp32, [?, 8]> joined = concat(axis = int32(1), interleave = bool(false), values = (out, x))[name = string("joined")];
                    } -> (joined);
            }

            """#)
        #expect(operationCounts(text) == ["const": 2, "cond": 1, "relu": 1, "concat": 1])
    }

    @Test(arguments: [("CoreML5", "ios15"), ("CoreML6", "ios16"), ("CoreML7", "ios17"), ("CoreML8", "ios18"),
                      ("CoreML9", "ios26"), ("MyOpset1", "myopset1")])
    func opsetNames(opset: String, name: String) {
        #expect(ProgramTextPrinter.opsetName(opset) == name)
    }

    @Test func packedAndNarrowElementsDecode() {
        func decode(_ bytes: [UInt8], _ type: MILDataType, count: Int = 0) -> [String] {
            bytes.withUnsafeBufferPointer { TensorBytes.elements($0, dataType: type, declaredCount: count) }
        }
        #expect(decode([0xF1, 0x7F], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT4) == ["1", "-1", "-1", "7"])
        #expect(decode([0b1110_0100], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__UINT2, count: 3) == ["0", "1", "2"])
        #expect(decode([0xFF, 0x80], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT8) == ["-1", "-128"])
        #expect(decode([0x80, 0x3F], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__BFLOAT16) == ["1.0"])
        #expect(decode([0x38, 0xC4, 0x7F], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E4M3FN) == ["1.0", "-3.0", "nan"])
        #expect(decode([0x3C, 0x7C], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__FLOAT8E5M2) == ["1.0", "inf"])
        #expect(decode([0x01, 0x00, 0x00, 0x80, 0x02], CORE_ML__SPECIFICATION__MILSPEC__DATA_TYPE__INT32) == ["-2147483647"])
    }

    /// Damaged programs that still unpack print without crashing.
    @Test func damagedProgramsPrint() throws {
        let model = try ModelFile.open(Fixtures.path("Models/StatefulProgram.mlpackage"))
        let original = try [UInt8](Data(contentsOf: URL(fileURLWithPath: model.specificationPath)))
        var generator = SplitMix(seed: 7)
        var printed = 0
        for _ in 0..<2000 {
            var bytes = original
            for _ in 0..<3 {
                bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
            }
            guard let specification = try? bytes.withUnsafeBytes({ try Specification.unpack($0, path: "damaged.mlmodel") }),
                  let program = specification.root.pointee.mlprogram
            else { continue }
            #expect(ProgramTextPrinter.text(of: program).hasPrefix("program("))
            printed += 1
        }
        #expect(printed > 0)
    }

    @Test func stringsAreEscaped() {
        #expect(MILTextFormat.quoted("a\"b\\c\td\u{1}é") == #""a\"b\\c\td\u{1}é""#)
    }

    /// How many times each operation type is called in MIL text.
    func operationCounts(_ text: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let body = line.drop { $0 == " " }
            // Operations sit inside function bodies; block headers and ends are not calls.
            guard line.count - body.count >= 12, !body.hasPrefix("}"), !body.hasPrefix("block"),
                  let open = body.firstIndex(of: "(")
            else { continue }
            let head = body[..<open]
            let type = head.range(of: " = ", options: .backwards).map { head[$0.upperBound...] } ?? head
            counts[String(type), default: 0] += 1
        }
        return counts
    }
}
