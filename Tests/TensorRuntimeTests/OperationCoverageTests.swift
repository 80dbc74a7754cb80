import FixtureSupport
import Foundation
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// Every MIL operation of coremltools 9.0's ML-program opsets is either run by
/// the tensor engine — every parameter of its definitions known, and each of
/// its definitions (a later opset may redefine it) exercised by a per-operation
/// fixture of an opset that definition is in force for — or named in
/// docs/runtime.md with the reason it is not run.
///
/// The list (Fixtures/mil_operations.json) is written by
/// Fixtures/mil_operations.py from coremltools' operation registry
/// (`SSAOpRegistry.core_ops`, opsets iOS15–iOS18). Only names in that list are
/// checked: operations the engine registers under other names (`write_state`,
/// the form `coreml_update_state` takes in a file; internal operations a plan
/// fuses; `classify`'s helpers) are outside both rules. The operations a
/// fixture exercises are read from the committed per-operation programs
/// (Fixtures/Parity/TensorOps, each checked against NumPy float64 by
/// `TensorOpsParityTests`) through the engine's own graph reader, nested
/// blocks included; `const` is read by the graph reader itself.
@Suite("Every MIL operation is run and tested, or documented as not run")
struct OperationCoverageTests {
    /// Operations of the list the graph reader consumes itself instead of planning them.
    static let readByGraphReader: Set<String> = ["const"]

    static func coremltoolsOperations() throws -> [String] {
        try coremltoolsParameters().map(\.name)
    }

    struct Listed {
        let name: String
        /// Every parameter its definitions for iOS15–iOS18 take.
        let parameters: [String]
        /// The opsets where its definition was (re)defined, oldest first (`iOS13`, `iOS17`).
        let versions: [String]
    }

    static func coremltoolsParameters() throws -> [Listed] {
        let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("mil_operations.json")))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let operations = try #require(document["operations"] as? [[String: Any]])
        let listed = operations.compactMap { entry -> Listed? in
            guard let name = entry["name"] as? String, let parameters = entry["parameters"] as? [String],
                  let versions = entry["versions"] as? [String] else { return nil }
            return Listed(name: name, parameters: parameters, versions: versions)
        }
        #expect(listed.count == document["count"] as? Int)
        return listed
    }

    /// The ML-program opsets each version of a definition is in force for: from its opset (iOS15
    /// at the earliest) up to the next version's.
    static func opsets(of versions: [String]) -> [(version: String, opsets: Set<String>)] {
        let order = ["iOS13", "iOS14", "iOS15", "iOS16", "iOS17", "iOS18"]
        return versions.enumerated().map { index, version in
            let first = max(order.firstIndex(of: version) ?? 0, 2)
            let end = index + 1 < versions.count ? (order.firstIndex(of: versions[index + 1]) ?? order.count) : order.count
            return (version, Set(order[first..<max(first, end)]))
        }
    }

    /// The "Not run yet by the tensor engine" section of docs/runtime.md:
    /// bullets `- \`op\`, \`op\`: why`, by operation name, each with its reason;
    /// a bullet of another form is recorded as an issue.
    static func documentedAsNotRun() throws -> [String: String] {
        let text = try String(contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/runtime.md"), encoding: .utf8)
        var inSection = false
        var reasons: [String: String] = [:]
        var bullet = ""
        func finish() {
            defer { bullet = "" }
            guard bullet.hasPrefix("- ") else { return }
            guard let colon = bullet.range(of: "`: ") else {
                Issue.record("docs/runtime.md, \"Not run yet\": a bullet not of the form - `op`, `op`: why: \(bullet)")
                return
            }
            let names = bullet[bullet.index(bullet.startIndex, offsetBy: 2)..<colon.lowerBound]
            let reason = bullet[colon.upperBound...].trimmingCharacters(in: .whitespaces)
            for name in names.split(separator: ",") {
                let trimmed = name.trimmingCharacters(in: CharacterSet(charactersIn: " `"))
                reasons[trimmed] = reason
            }
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") || line.hasPrefix("# ") {
                finish()
                inSection = line == "## Not run yet by the tensor engine"
                continue
            }
            guard inSection else { continue }
            if line.hasPrefix("- ") {
                finish()
                bullet = String(line)
            } else if line.hasPrefix("  "), !bullet.isEmpty {
                bullet += " " + line.trimmingCharacters(in: .whitespaces)
            } else {
                finish()
            }
        }
        finish()
        return reasons
    }

    /// The operation types of every per-operation fixture program, read by `GraphReader`, each
    /// with the opsets (`iOS15` … `iOS18`) of the functions that hold it.
    static func exercisedOperations() throws -> [String: Set<String>] {
        let folder = Fixtures.path("Parity/TensorOps")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
        let opsets = ["CoreML5": "iOS15", "CoreML6": "iOS16", "CoreML7": "iOS17", "CoreML8": "iOS18"]
        var exercised: [String: Set<String>] = [:]
        for name in names {
            let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
            let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            guard document["kind"] as? String == "mlProgram", let model = document["model"] as? String else { continue }
            let file = try ModelFile.open(folder + "/" + model)
            let (graph, functionOpsets) = try withExtendedLifetime(file) { () throws -> (ProgramGraph, [String: String]) in
                let program = try #require(file.specification.root.pointee.mlprogram)
                var functionOpsets: [String: String] = [:]
                for entry in elements(program.pointee.functions, program.pointee.n_functions) {
                    let opset = text(entry.pointee.value?.pointee.opset)
                    functionOpsets[text(entry.pointee.key)] = opsets[opset] ?? opset
                }
                return (try GraphReader(modelDirectory: file.modelDirectory).read(program, defaultFunction: nil), functionOpsets)
            }
            for function in graph.functions.values {
                let opset = try #require(functionOpsets[function.name], "\(model): function \(function.name) has no opset")
                func visit(_ block: GraphBlock) {
                    for operation in block.operations {
                        exercised[operation.type, default: []].insert(opset)
                        operation.blocks.forEach(visit)
                    }
                }
                visit(function.block)
            }
        }
        return exercised
    }

    @Test("the list of coremltools' operations is there")
    func listExists() throws {
        let names = try Self.coremltoolsOperations()
        #expect(names.count >= 160)
        #expect(names.contains("scaled_dot_product_attention") && names.contains("conv"))
    }

    @Test("every operation of the list is run or documented as not run, with why")
    func everyOperationRunOrDocumented() throws {
        let registered = Set(OperationRegistry.fileOperations.keys)
        let documented = try Self.documentedAsNotRun()
        let missing = try Self.coremltoolsOperations().filter { name in
            !registered.contains(name) && !Self.readByGraphReader.contains(name) && (documented[name] ?? "").isEmpty
        }
        #expect(missing == [], "neither run by the tensor engine nor listed with a reason under \"Not run yet\" in docs/runtime.md")
    }

    @Test("the documented list names only operations of the list that are not run")
    func documentedListIsExact() throws {
        let registered = Set(OperationRegistry.fileOperations.keys)
        let all = Set(try Self.coremltoolsOperations())
        let documented = try Self.documentedAsNotRun()
        #expect(!documented.isEmpty)
        #expect(documented.keys.filter { !all.contains($0) }.sorted() == [], "not operations of coremltools' list")
        #expect(documented.keys.filter { registered.contains($0) }.sorted() == [], "run by the tensor engine, yet listed as not run")
    }

    /// A parameter the engine does not know refuses a valid program at load (exit 94): every
    /// parameter a definition of iOS15–iOS18 takes must be known for each operation the engine runs.
    @Test("the engine knows every parameter of the operations it runs")
    func everyParameterKnown() throws {
        var unknown: [String] = []
        for listed in try Self.coremltoolsParameters() {
            guard let definition = OperationRegistry.fileOperations[listed.name] else { continue }
            unknown += listed.parameters.filter { !definition.parameters.contains($0) }.map { "\(listed.name).\($0)" }
        }
        #expect(unknown == [], "parameters of coremltools' definitions the tensor engine would refuse")
    }

    @Test("every operation of the list the engine runs is exercised by a fixture program")
    func everyRunOperationTested() throws {
        let exercised = try Self.exercisedOperations()
        let registered = Set(OperationRegistry.fileOperations.keys)
        let untested = try Self.coremltoolsOperations().filter { registered.contains($0) && exercised[$0] == nil }
        #expect(untested == [], "run by the tensor engine but in no program of Fixtures/Parity/TensorOps")
    }

    /// An operation redefined by a later opset (`conv` of iOS13 and of iOS17) is exercised under
    /// each definition: by a fixture function whose opset that definition is in force for.
    @Test("every definition of an operation the engine runs is exercised at an opset it is in force for")
    func everyVersionTested() throws {
        let exercised = try Self.exercisedOperations()
        var untested: [String] = []
        for listed in try Self.coremltoolsParameters() where OperationRegistry.fileOperations[listed.name] != nil {
            for (version, opsets) in Self.opsets(of: listed.versions) where (exercised[listed.name] ?? []).isDisjoint(with: opsets) {
                untested.append("\(listed.name) (\(version), for \(opsets.sorted().joined(separator: "/")))")
            }
        }
        #expect(untested == [], "definitions exercised by no fixture program of an opset they are in force for")
    }

    /// Two families defining one name is a programming error: merging them fails, naming both tables.
    @Test("no operation name is defined twice, and merging two definitions of one name fails naming both")
    func noDuplicateNames() throws {
        let tables = try OperationRegistry.merged(OperationRegistry.families)
        #expect(tables.fileOperations.count == OperationRegistry.fileOperations.count)
        #expect(Set(tables.fileOperations.keys).isDisjoint(with: tables.internalOperations.keys))
        #expect(throws: OperationRegistry.DuplicateOperation(name: "add", first: "ElementwiseOperations.definitions",
                                                             second: "DuplicateFamily.definitions")) {
            try OperationRegistry.merged(OperationRegistry.families + [DuplicateFamily.self])
        }
        #expect(throws: OperationRegistry.DuplicateOperation(name: "fused_linear", first: "LinearAlgebraOperations.internalDefinitions",
                                                             second: "DuplicateInternalFamily.internalDefinitions")) {
            try OperationRegistry.merged(OperationRegistry.families + [DuplicateInternalFamily.self])
        }
        #expect(throws: OperationRegistry.DuplicateOperation(name: "twice", first: "BothTablesFamily.definitions",
                                                             second: "BothTablesFamily.internalDefinitions")) {
            try OperationRegistry.merged([BothTablesFamily.self])
        }
        let message = OperationRegistry.DuplicateOperation(name: "add", first: "A.definitions", second: "B.internalDefinitions").description
        #expect(message == "operation \"add\" is defined twice: in A.definitions and in B.internalDefinitions")
    }

    /// An operand the memo compares by type and shape only (`readAtRunTime`) must be one the operation
    /// takes, and one read at run time: never a parameter of an operation the memo does not take (always
    /// planned). Of the operations with effects, the memo takes only views of a state and writes into one
    /// whose place is read at run time (`replayable`).
    @Test("operands declared read only at run time are parameters of an operation the memo takes; of those with effects it takes state views and slice writes only")
    func runTimeOperandsDeclared() throws {
        let tables = try OperationRegistry.merged(OperationRegistry.families)
        let all = tables.fileOperations.merging(tables.internalOperations, uniquingKeysWith: { first, _ in first })
        var wrong: [String] = []
        for (name, definition) in all {
            let known = definition.parameters.union(definition.internalParameters)
            wrong += definition.readAtRunTime.subtracting(known).sorted().map { "\(name).\($0): not a parameter" }
            if !definition.replayable, !definition.readAtRunTime.isEmpty { wrong.append("\(name): never taken from the memo") }
        }
        #expect(wrong == [])
        #expect(tables.internalOperations["rotary_embedding"]?.readAtRunTime == ["x", "cos", "sin"])
        #expect(all.filter { $0.value.hasEffects && $0.value.replayable }.keys.sorted() == ["read_state_view", "update_state_slice"])
        #expect(tables.internalOperations["update_state_slice"]?.readAtRunTime == ["begin", "end"])
        #expect(all.filter { !$0.value.hasEffects && !$0.value.replayable }.isEmpty)
    }

    /// A family defining `add` again, among its file operations.
    enum DuplicateFamily: OperationFamily {
        static let definitions = ["add": OperationDefinition(["x", "y"]) { _ throws(RuntimeError) in }]
    }

    /// A family defining the internal `fused_linear` again.
    enum DuplicateInternalFamily: OperationFamily {
        static let internalDefinitions = ["fused_linear": OperationDefinition(["x"]) { _ throws(RuntimeError) in }]
    }

    /// A family defining one name as a file operation and as an internal one.
    enum BothTablesFamily: OperationFamily {
        static let definitions = ["twice": OperationDefinition(["x"]) { _ throws(RuntimeError) in }]
        static let internalDefinitions = ["twice": OperationDefinition(["x"]) { _ throws(RuntimeError) in }]
    }

    /// What a file may name beyond coremltools' list is one of the two state operations a file names
    /// (`coreml_update_state`, `write_state`); no internal operation is one of coremltools'.
    @Test("a file may name coremltools' operations and the two state operations; internal ones are none of them")
    func internalOperationsApart() throws {
        let listed = Set(try Self.coremltoolsOperations())
        #expect(Set(OperationRegistry.fileOperations.keys).subtracting(listed) == ["coreml_update_state", "write_state"])
        #expect(Set(OperationRegistry.internalOperations.keys).isDisjoint(with: listed))
        #expect(Set(OperationRegistry.internalOperations.keys) == [
            "at_least_rank1", "channel_affine", "channel_blocks", "channel_mul", "fused_attention", "fused_conv", "fused_linear",
            "layout_transpose", "read_state_view", "repeat_heads", "rms_norm", "rotary_embedding", "silu_mul", "spatial_mean", "update_state_slice",
        ])
        // An internal parameter is one the passes set, never one a file may also give.
        for (name, definition) in OperationRegistry.fileOperations {
            #expect(definition.internalParameters.isDisjoint(with: definition.parameters), "\(name)")
        }
    }

    /// A program file cannot name an operation or a layout parameter only the engine's passes make; each
    /// is refused with one line naming it, as an operation modelc does not run (exit 94).
    @Test("a file naming an internal operation or parameter is refused, naming it", arguments: [
        ("fused_conv", "x", "layer \"y\" (fused_conv): an operation internal to modelc's tensor engine, which a program file cannot name"),
        ("layout_transpose", "x",
         "layer \"y\" (layout_transpose): an operation internal to modelc's tensor engine, which a program file cannot name"),
        ("at_least_rank1", "x", "layer \"y\" (at_least_rank1): an operation internal to modelc's tensor engine, which a program file cannot name"),
        ("max_pool", "channels_last",
         "layer \"y\" (max_pool): parameter \"channels_last\" is internal to modelc's tensor engine; a program file cannot set it"),
        ("avg_pool", "channels_last",
         "layer \"y\" (avg_pool): parameter \"channels_last\" is internal to modelc's tensor engine; a program file cannot set it"),
        ("conv", "channel_blocked", "layer \"y\" (conv): parameter \"channel_blocked\" is not one modelc knows for this operation"),
    ])
    func internalNamesRefused(_ type: String, _ parameter: String, _ message: String) {
        let op = GraphOperation(type: type, arguments: [parameter: [.value("input")]], outputs: [(name: "y", type: ValueType(element: .float32, shape: nil))],
                                blocks: [])
        do {
            try OperationRegistry.check(op)
            Issue.record("\(type) with \(parameter) was accepted")
        } catch {
            #expect(error.description == message)
            guard case .unsupportedLayer = error else { Issue.record("refused as \(error), expected an unsupported operation (exit 94)"); return }
        }
        let plain = GraphOperation(type: "max_pool", arguments: ["x": [.value("input")]], outputs: [(name: "y", type: ValueType(element: .float32, shape: nil))],
                                   blocks: [])
        #expect(throws: Never.self) { try OperationRegistry.check(plain) }
    }
}
