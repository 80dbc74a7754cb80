import CoreMLSchema
import FixtureSupport
import Foundation
import Testing
import ModelPictures
import ModelSpec

/// Every operation of an ML program is drawn: the operations are read from the
/// program's specification (not from `ModelGraph`), and each must be a node of
/// the DOT text — its kind and first output in the label, as `type · name`, and
/// in the tooltip, as `type name` — with no operation node left over.
/// Constants (`const`, `constexpr_…`) are folded into their users by design and
/// are not nodes.
@Suite struct ProgramOperationsDrawnTests {
    /// The zoo's ML programs (its `_nn` models are neural networks).
    static let zooPrograms: [String] = {
        let directory = Fixtures.path("Parity/Zoo")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".mlpackage") }.sorted().map { "Parity/Zoo/\($0)" }
    }()

    /// ML programs ended by the `classify` operation coremltools adds for
    /// `ct.convert(..., classifier_config=...)`: through the unified converter
    /// (Fixtures/generate.py, fp32 and fp16, and Fixtures/network_parity.py) and
    /// on a program (Fixtures/tensor_op_cases.py).
    static let classifierPrograms = ["Models/ImageFeatureBaseProgram.mlpackage", "Models/ImageFeatureBaseProgramFP16.mlpackage",
                                     "Parity/Networks/program_image_classifier.mlpackage", "Parity/TensorOps/op_classify.mlpackage"]

    @Test func theZooHasPrograms() {
        #expect(Self.zooPrograms.count >= 60, "\(Self.zooPrograms.count) zoo programs found")
    }

    @Test(arguments: zooPrograms + classifierPrograms)
    func everyOperationIsANodeOfTheDOT(model: String) throws {
        let file = try ModelFile.open(Fixtures.path(model))
        let operations = try #require(ProgramOperation.all(in: file), "\(model) is not an ML program")
        #expect(!operations.isEmpty)
        let dot = GraphRenderer.render(ModelGraph(file), format: .dot, title: model).text
        var unmatched = DOTNode.all(in: dot).filter(\.isOperation)
        #expect(unmatched.count == operations.count,
                "\(model): \(unmatched.count) operation nodes drawn for \(operations.count) operations")
        var missing: [String] = []
        for operation in operations {
            // Names repeat across functions (and a nameless operation has none): match one node each.
            if let index = unmatched.firstIndex(where: { operation.isDrawn(label: $0.label, tooltip: $0.tooltip) }) {
                unmatched.remove(at: index)
            } else {
                missing.append(operation.tooltipHead)
            }
        }
        #expect(missing.isEmpty, "\(model): \(missing.count) operations not drawn: \(missing.prefix(10))")
    }

    @Test(arguments: classifierPrograms)
    func theClassifierEndsWithClassify(model: String) throws {
        let operations = try #require(ProgramOperation.all(in: try ModelFile.open(Fixtures.path(model))))
        #expect(operations.last?.type == "classify")
        #expect(operations.filter { $0.type == "classify" }.count == 1)
    }

    /// The laid-out forms too: each operation's label heads a box of the SVG
    /// (Graphviz's, read back as XML) and of the HTML page's inline SVG, and its
    /// tooltip is the box's.
    @Test(arguments: classifierPrograms, [GraphFormat.svg, .html])
    func everyOperationOfAClassifierIsDrawn(model: String, format: GraphFormat) throws {
        let file = try ModelFile.open(Fixtures.path(model))
        let operations = try #require(ProgramOperation.all(in: file))
        let picture = GraphRenderer.render(ModelGraph(file), format: format, title: model)
        #expect(picture.notes.isEmpty, "\(picture.notes)")
        let svg = try #require(format == .html ? PictureChecks.inlineSVG(picture.text) : picture.text)
        let drawing = try PictureChecks.drawing(svg)
        for operation in operations {
            #expect(drawing.texts.contains { operation.isLabel($0) }, "\(model): no box labelled \(operation.labelHead)")
            #expect(drawing.tooltips.contains { operation.isTooltip($0) }, "\(model): no tooltip \(operation.tooltipHead)")
        }
    }
}

/// One operation of an ML program as its specification holds it.
private struct ProgramOperation {
    var type: String
    /// The name of its first output; empty when it has none.
    var name: String

    /// The operations that are not constants, in program order, nested blocks
    /// after the operation that holds them, of every function's block for its
    /// opset; nil when `file` is not an ML program.
    static func all(in file: ModelFile) -> [ProgramOperation]? {
        withExtendedLifetime(file.specification) {
            let model = file.specification.root.pointee
            guard model.type_case == CORE_ML__SPECIFICATION__MODEL__TYPE_ML_PROGRAM, let program = model.mlprogram else { return nil }
            var found: [ProgramOperation] = []
            for entry in elements(program.pointee.functions, program.pointee.n_functions) {
                guard let function = entry.pointee.value else { continue }
                let opset = text(function.pointee.opset)
                let specializations = elements(function.pointee.block_specializations, function.pointee.n_block_specializations)
                guard let block = specializations.first(where: { text($0.pointee.key) == opset })?.pointee.value else { continue }
                collect(block, into: &found)
            }
            return found
        }
    }

    private static func collect(_ block: UnsafeMutablePointer<CoreML__Specification__MILSpec__Block>,
                                into found: inout [ProgramOperation]) {
        for operation in elements(block.pointee.operations, block.pointee.n_operations) {
            let type = text(operation.pointee.type)
            guard type != "const", !type.hasPrefix("constexpr_") else { continue }
            let outputs = elements(operation.pointee.outputs, operation.pointee.n_outputs)
            found.append(ProgramOperation(type: type, name: outputs.first.map { text($0.pointee.name) } ?? ""))
            for nested in elements(operation.pointee.blocks, operation.pointee.n_blocks) {
                collect(nested, into: &found)
            }
        }
    }

    /// The first line of its box: `conv · conv1`, or the type alone when the
    /// name is empty or the same.
    var labelHead: String { name.isEmpty || name == type ? type : "\(type) · \(name)" }
    /// The first line of its tooltip: `conv conv1`.
    var tooltipHead: String { name.isEmpty ? type : "\(type) \(name)" }

    /// Whether `line` is its label head, whole or shortened with "…".
    func isLabel(_ line: String) -> Bool {
        line == labelHead || (line.hasSuffix("…") && line.count > 1 && labelHead.hasPrefix(line.dropLast()))
    }

    /// Whether `tooltip` (all its lines) is its tooltip.
    func isTooltip(_ tooltip: String) -> Bool {
        tooltip == tooltipHead || tooltip.hasPrefix(tooltipHead + "\n")
    }

    func isDrawn(label: String, tooltip: String) -> Bool {
        isLabel(label.components(separatedBy: "\n")[0]) && isTooltip(tooltip)
    }
}

/// A node statement of DOT text read back:
/// `"n3" [id="n3", label="conv · conv1\n…\n", tooltip="conv conv1\n…", …];`.
private struct DOTNode {
    var attributes: [String: String]

    var label: String { attributes["label"] ?? "" }
    var tooltip: String { attributes["tooltip"] ?? "" }
    /// Inputs and outputs are drawn bold; operations are not.
    var isOperation: Bool { !(attributes["style"] ?? "").contains("bold") }

    /// The node statements of `dot`: lines `"ID" [ATTRIBUTES];` whose attributes give an `id`.
    static func all(in dot: String) -> [DOTNode] {
        dot.split(separator: "\n").compactMap { line in
            var scanner = QuotedScanner(line.trimmingCharacters(in: .whitespaces))
            guard scanner.quoted() != nil, scanner.skip(" ["), let attributes = scanner.attributes(),
                  attributes["id"] != nil else { return nil }
            return DOTNode(attributes: attributes)
        }
    }
}

/// Reads DOT's quoted strings (`\"`, `\\` and `\n` escaped, `&` written
/// `&amp;`) and `key=value` lists.
private struct QuotedScanner {
    private let characters: [Character]
    private var index = 0

    init(_ text: String) { characters = Array(text) }

    mutating func skip(_ literal: String) -> Bool {
        let expected = Array(literal)
        guard characters.count - index >= expected.count, Array(characters[index..<index + expected.count]) == expected else { return false }
        index += expected.count
        return true
    }

    /// A quoted string at the current position, unescaped.
    mutating func quoted() -> String? {
        guard skip("\"") else { return nil }
        var value = ""
        while index < characters.count {
            let character = characters[index]
            index += 1
            switch character {
            case "\"":
                return value.replacingOccurrences(of: "&amp;", with: "&")
            case "\\" where index < characters.count:
                let escaped = characters[index]
                index += 1
                switch escaped {
                case "n": value.append("\n")
                case "\"", "\\": value.append(escaped)
                default: value += "\\\(escaped)"
                }
            default:
                value.append(character)
            }
        }
        return nil
    }

    /// `key=value, key="value", …]`: values quoted or bare.
    mutating func attributes() -> [String: String]? {
        var attributes: [String: String] = [:]
        while index < characters.count {
            if skip("]") { return attributes }
            _ = skip(", ")
            var key = ""
            while index < characters.count, characters[index] != "=" {
                key.append(characters[index])
                index += 1
            }
            guard skip("=") else { return nil }
            if let value = quoted() {
                attributes[key] = value
            } else {
                var value = ""
                while index < characters.count, characters[index] != ",", characters[index] != "]" {
                    value.append(characters[index])
                    index += 1
                }
                attributes[key] = value
            }
        }
        return nil
    }
}
