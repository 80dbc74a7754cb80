import FixtureSupport
import Foundation
import ModelFeatures
import ModelSpec
import Testing
@testable import TensorRuntime

/// An operation's output facts (element type, rank, dimensions fixed at
/// load), computed without planning, against what others computed: the
/// types coremltools' converter declares for every value of the committed ML
/// programs, and the shapes the planner gives for concrete inputs.
@Suite("Operations' facts agree with the declared types and with the plan")
struct OperationFactsTests {
    /// The ML programs of the per-operation fixtures and the model zoo, read by the graph reader.
    static func programs() throws -> [(name: String, graph: ProgramGraph)] {
        var result: [(name: String, graph: ProgramGraph)] = []
        for folder in ["Parity/TensorOps", "Parity/Zoo"] {
            let path = Fixtures.path(folder)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
            for name in names {
                let data = try Data(contentsOf: URL(fileURLWithPath: path + "/" + name))
                let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                guard document["kind"] as? String == "mlProgram", let model = document["model"] as? String,
                      FileManager.default.fileExists(atPath: path + "/" + model) else { continue }
                let file = try ModelFile.open(path + "/" + model)
                let graph = try withExtendedLifetime(file) { () throws -> ProgramGraph in
                    let program = try #require(file.specification.root.pointee.mlprogram)
                    return try GraphReader(modelDirectory: file.modelDirectory).read(program, defaultFunction: nil)
                }
                result.append((name: "\(folder)/\(model)", graph: graph))
            }
        }
        return result
    }

    /// Whether `facts` may describe a value declared `declared`: the same
    /// element type, and rank and dimensions equal wherever both know them.
    static func agree(_ facts: ValueType, _ declared: ValueType) -> Bool {
        guard facts.element == declared.element else { return false }
        guard let known = facts.shape, let given = declared.shape else { return true }
        guard known.count == given.count else { return false }
        return zip(known, given).allSatisfy { a, b in a == nil || b == nil || a == b }
    }

    @Test("every operation's facts agree with the types coremltools declares for its outputs")
    func factsAgreeWithDeclaredTypes() throws {
        let programs = try Self.programs()
        #expect(programs.count >= 60)
        var checked: [String: Int] = [:]
        for (name, graph) in programs {
            for function in graph.functions.values {
                var declared: [String: ValueType] = [:], constants: [String: Tensor] = [:]
                for input in function.inputs { declared[input.name] = input.type }
                func visit(_ block: GraphBlock) {
                    for input in block.inputs { declared[input.name] = input.type }
                    constants.merge(block.constants) { $1 }
                    for operation in block.operations {
                        let known = declared, values = constants
                        do {
                            if let facts = try OperationRegistry.outputFacts(of: operation, known: { known[$0] }, constants: { values[$0] }) {
                                #expect(facts.count == operation.outputs.count, "\(name): \(operation.type) \"\(operation.name)\"")
                                for (fact, output) in zip(facts, operation.outputs) where !output.type.isState {
                                    #expect(Self.agree(fact, output.type),
                                            "\(name): \(operation.type) \"\(output.name)\": facts \(fact), declared \(output.type)")
                                }
                                checked[operation.type, default: 0] += 1
                            }
                        } catch {
                            Issue.record("\(name): \(operation.type) \"\(operation.name)\": \(error)")
                        }
                        for output in operation.outputs { declared[output.name] = output.type }
                        operation.blocks.forEach(visit)
                    }
                }
                visit(function.block)
            }
        }
        // Most of the operations with a rule are in the fixtures: the check reaches them.
        #expect(checked.count >= 100, "operation types checked: \(checked.keys.sorted())")
    }

    @Test("the facts of a function's results, from its inputs' shapes alone, are the shapes the plan gives")
    func factsAgreeWithPlans() throws {
        var compared = 0
        for (name, graph) in try Self.programs() where name.hasPrefix("Parity/TensorOps") {
            guard let function = graph.functions["main"] else { continue }
            var shapes: [String: [Int]] = [:]
            var facts: [String: ValueType] = [:], derived: Set<String> = []
            for input in function.inputs {
                guard let shape = input.type.shape, shape.allSatisfy({ $0 != nil }), !input.type.isState else { continue }
                shapes[input.name] = shape.map { $0! }
                facts[input.name] = input.type
            }
            guard shapes.count == function.inputs.count else { continue }
            let constants = function.block.constants
            // Forward from the inputs: an operation without a rule (or inside a block) gives what its file declares.
            for operation in function.block.operations {
                let known = facts
                let results = try? OperationRegistry.outputFacts(of: operation, known: { known[$0] }, constants: { constants[$0] })
                for (index, output) in operation.outputs.enumerated() {
                    if let results, results.indices.contains(index) {
                        facts[output.name] = results[index]
                        derived.insert(output.name)
                    } else {
                        facts[output.name] = output.type
                    }
                }
            }
            guard let plan = try? Planner.plan(function, shapes: shapes) else { continue }
            for (output, id) in plan.outputs {
                guard derived.contains(output), let fact = facts[output] else { continue }
                let planned = ValueType(element: plan.values[id].type, shape: plan.values[id].shape.map { $0 })
                #expect(Self.agree(fact, planned), "\(name): \"\(output)\": facts \(fact), planned \(planned)")
                compared += 1
            }
        }
        #expect(compared >= 100)
    }

    // MARK: Rules on partial knowledge

    static func facts(_ type: String, _ arguments: [String: [GraphArgument]], known: [String: ValueType], outputs: Int = 1) throws -> [ValueType] {
        let operation = GraphOperation(type: type, arguments: arguments,
                                       outputs: (0..<outputs).map { (name: "out\($0)", type: ValueType(element: .float32, shape: nil)) }, blocks: [])
        return try #require(try OperationRegistry.outputFacts(of: operation, known: { known[$0] }))
    }

    static func ints(_ values: [Int]) -> [GraphArgument] { [.constant(Tensor(ints: values.map { Int32($0) }, shape: [values.count]))] }
    static func int(_ value: Int) -> [GraphArgument] { [.constant(Tensor(ints: [Int32(value)], shape: []))] }

    @Test("dimensions unknown at load stay unknown; ranks follow from what is known")
    func partialKnowledge() throws {
        let known: [String: ValueType] = [
            "x": ValueType(.float32, shape: [nil, 3, 1]), "y": ValueType(.float32, shape: [4, 1, 5]),
            "m": ValueType(.float32, shape: [nil, 3, 5]), "v": ValueType(.int32, shape: [nil]), "s": ValueType(.int32, shape: [3]), "open": .unknownRank(.float32),
        ]
        #expect(try Self.facts("add", ["x": [.value("x")], "y": [.value("y")]], known: known) == [ValueType(.float32, shape: [4, 3, 5])])
        #expect(try Self.facts("less", ["x": [.value("x")], "y": [.value("open")]], known: known) == [.unknownRank(.bool)])
        // A reshape to a computed shape vector of 3 elements has rank 3; to one of unknown length, no rank.
        #expect(try Self.facts("reshape", ["x": [.value("y")], "shape": [.value("s")]], known: known) == [ValueType(.float32, rank: 3)])
        #expect(try Self.facts("reshape", ["x": [.value("y")], "shape": [.value("v")]], known: known) == [.unknownRank(.float32)])
        #expect(try Self.facts("reshape", ["x": [.value("y")], "shape": Self.ints([0, -1])], known: known) == [ValueType(.float32, shape: [4, 5])])
        #expect(try Self.facts("reshape", ["x": [.value("x")], "shape": Self.ints([-1, 3])], known: known) == [ValueType(.float32, shape: [nil, 3])])
        // gather_nd's rank needs the index rows' length.
        #expect(try Self.facts("gather_nd", ["x": [.value("y")], "indices": [.value("x")]], known: known) == [ValueType(.float32, shape: [nil, 3, 1, 5])])
        #expect(try Self.facts("gather_nd", ["x": [.value("y")], "indices": [.value("v")]], known: known) == [.unknownRank(.float32)])
        // A vector's length through shape arithmetic: concatenation, slicing, stacking.
        #expect(try Self.facts("concat", ["values": [.value("s"), .value("s")], "axis": Self.int(0)], known: known) == [ValueType(.int32, shape: [6])])
        #expect(try Self.facts("concat", ["values": [.value("s"), .value("v")], "axis": Self.int(0)], known: known) == [ValueType(.int32, shape: [nil])])
        #expect(try Self.facts("slice_by_index", ["x": [.value("s")], "begin": Self.ints([-2]), "end": Self.ints([0]),
                                                  "end_mask": [.constant(Tensor(ints: [1], shape: [1], type: .bool))]], known: known)
                == [ValueType(.int32, shape: [2])])
        #expect(try Self.facts("stack", ["values": [.value("v"), .value("v")], "axis": Self.int(-1)], known: known) == [ValueType(.int32, shape: [nil, 2])])
        // Scalars join as one-element vectors, as the plan reads them; other mixed ranks are left to the plan.
        #expect(try Self.facts("concat", ["values": [.value("s"), .constant(Tensor(ints: [7], shape: []))], "axis": Self.int(0)], known: known)
                == [ValueType(.int32, shape: [4])])
        #expect(try Self.facts("concat", ["values": [.value("s"), .value("x")], "axis": Self.int(0)], known: known) == [ValueType(.int32, rank: 3)])
        #expect(try Self.facts("shape", ["x": [.value("y")]], known: known) == [ValueType(.int32, shape: [3])])
        // squeeze without axes drops every 1: known only where every dimension is.
        #expect(try Self.facts("squeeze", ["x": [.value("y")]], known: known) == [ValueType(.float32, shape: [4, 5])])
        #expect(try Self.facts("squeeze", ["x": [.value("x")]], known: known) == [.unknownRank(.float32)])
        #expect(try Self.facts("matmul", ["x": [.value("y")], "y": [.value("m")], "transpose_y": [.constant(Tensor(ints: [1], shape: [], type: .bool))]],
                               known: known) == [ValueType(.float32, shape: [4, 1, 3])])
        #expect(try Self.facts("add", ["x": [.value("m")], "y": [.value("y")]], known: known) == [ValueType(.float32, shape: [4, 3, 5])])
        #expect(try Self.facts("topk", ["x": [.value("y")], "k": Self.int(2), "axis": Self.int(-1)], known: known, outputs: 2)
                == [ValueType(.float32, shape: [4, 1, 2]), ValueType(.int32, shape: [4, 1, 2])])
        #expect(try Self.facts("reduce_argmax", ["x": [.value("y")], "axis": Self.int(0)], known: known) == [ValueType(.int32, shape: [1, 5])])
    }

    @Test("parameters that contradict the operands are refused naming the operation")
    func contradictionsRefused() throws {
        let known: [String: ValueType] = ["y": ValueType(.float32, shape: [4, 1, 5])]
        #expect(throws: RuntimeError.self) { try Self.facts("transpose", ["x": [.value("y")], "perm": Self.ints([1, 0])], known: known) }
        #expect(throws: RuntimeError.self) { try Self.facts("softmax", ["x": [.value("missing")]], known: known) }
        #expect(throws: RuntimeError.self) { try Self.facts("cast", ["x": [.value("y")], "dtype": [.constant(Tensor(type: .string, shape: [], storage: .strings(["fp8"])))]], known: known) }
    }
}

extension OperationFactsTests {
    /// Operations whose results' facts no rule gives: control flow and lists
    /// (their blocks' values), and `classify`, which the planner reads itself.
    static let withoutFacts: Set<String> = [
        "cond", "while_loop", "make_list", "list_length", "list_read", "list_gather", "list_write", "list_scatter", "classify",
    ]

    @Test("every operation but control flow, lists and classify gives its results' facts")
    func everyOperationHasFacts() {
        let tables = OperationRegistry.tables
        let missing = (Array(tables.fileOperations) + Array(tables.internalOperations))
            .filter { $0.value.outputFacts == nil && !Self.withoutFacts.contains($0.key) }.map(\.key).sorted()
        #expect(missing.isEmpty, "no facts rule: \(missing)")
        let needless = Self.withoutFacts.filter { (tables.fileOperations[$0] ?? tables.internalOperations[$0])?.outputFacts != nil }
        #expect(needless.isEmpty, "listed without facts but has a rule: \(needless.sorted())")
    }
}
