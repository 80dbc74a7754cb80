import SystemIO

/// What planning each operation of a function added to the plan, kept from
/// the last plan of that function, so that the next plan takes it again
/// where the operation sees the same inputs: a decoder plans every step
/// anew (the cache's length changes), and in a step after the first only
/// its attention, cache and position operations differ — its products,
/// norms and activations are taken as they were planned (their kernels read
/// values by number, and the numbers are the same).
///
/// An operation's record is taken only when it is found at the same value
/// number, with inputs of the same types, shapes and constants (the same
/// objects, or equal values; any constant of that type and shape where the
/// operation reads it only at run time, `OperationDefinition.readAtRunTime`)
/// and the same matrix stacks, on as many threads. Operations with effects
/// (states, random numbers) and nested blocks are always planned, but for
/// those whose plan is a function of their inputs alone
/// (`OperationDefinition.replayable`: a view of a state, a cache write whose
/// offset is read at run time).
final class PlanMemo: Sendable {
    /// One operation's part of a plan (shared by reference: a decoder's
    /// step takes most of its records from the step before).
    final class Record: Sendable {
        let type: String
        let threads: Int
        let firstValue: Int
        let inputs: [Input]
        let values: [PlanValue]
        let steps: [PlanStep]
        let outputs: [Int]
        /// Aliases among the values: root, the value each was made from, elements into the root.
        let aliases: [(id: Int, root: Int, parent: Int, offset: Int?)]
        /// Views among the values: elements into their source, their first step counted from the operation's.
        let views: [(id: Int, offset: Int, from: Int)]
        let stacks: [(id: Int, stack: MatrixStack, from: Int)]

        init(type: String, threads: Int, firstValue: Int, inputs: [Input], values: [PlanValue], steps: [PlanStep], outputs: [Int],
             aliases: [(id: Int, root: Int, parent: Int, offset: Int?)], views: [(id: Int, offset: Int, from: Int)],
             stacks: [(id: Int, stack: MatrixStack, from: Int)]) {
            self.type = type
            self.threads = threads
            self.firstValue = firstValue
            self.inputs = inputs
            self.values = values
            self.steps = steps
            self.outputs = outputs
            self.aliases = aliases
            self.views = views
            self.stacks = stacks
        }
    }

    /// What an operation reads, as far as its planning depends on it: one
    /// argument's value (`id` -1 for a constant given in place, `missing`
    /// for a name nothing computed).
    struct Input: Equatable, Sendable {
        var id: Int
        var type: ElementType
        var storage: ElementStorage
        var shape: [Int]
        var constant: Tensor?
        var stack: MatrixStack?
        /// A constant the operation reads only at run time (`OperationDefinition.readAtRunTime`): any constant of
        /// this type and shape will do.
        var anyConstant = false

        static let missing = Input(id: Int.min, type: .float32, storage: .float32, shape: [], constant: nil, stack: nil)
    }

    /// What a function's plan starts with after its inputs (ids from
    /// `firstID`): its block's constants as values, and every name so far.
    struct Start: Sendable {
        let firstID: Int
        let values: [PlanValue]
        let names: [String: Int]
    }

    /// Where planning an operation left the numbering of values: how many
    /// there were after it, and the ids its outputs' names were bound to. While
    /// every operation so far left the same as at the last plan, each name
    /// stands for the same id as it did then, and a record's inputs are
    /// compared by id without looking their names up.
    struct Binding: Equatable, Sendable {
        var end: Int
        var outputs: [Int]
    }

    /// A function's last plan, by the operations' places in its block.
    struct Last: Sendable {
        var records: [Record?]
        var bindings: [Binding?]
    }

    private let records = Locked<[String: Last]>([:])
    private let starts = Locked<[String: Start]>([:])

    /// The start of `function`'s plans, once one was made.
    func start(of function: String) -> Start? { starts.withLock { $0[function] } }

    /// Keeps `start` as `function`'s.
    func keep(_ start: Start, of function: String) { starts.withLock { $0[function] = start } }

    /// The records and bindings of `function`'s last plan, by the operations'
    /// places in its block (`count` of them).
    func last(of function: String, count: Int) -> Last {
        records.withLock { $0[function].flatMap { $0.records.count == count ? $0 : nil } }
            ?? Last(records: Array(repeating: nil, count: count), bindings: Array(repeating: nil, count: count))
    }

    /// Keeps `made` as `function`'s last plan.
    func keep(_ made: Last, of function: String) {
        guard made.records.contains(where: { $0 != nil }) else { return }
        records.withLock { $0[function] = made }
    }
}

extension Planner {
    /// What `op` reads, for `PlanMemo`: each argument's value as it is now;
    /// a constant the operation reads at run time only (`readAtRunTime`) to be matched by its type and shape.
    func memoInputs(of op: GraphOperation, readAtRunTime: Set<String>) -> [PlanMemo.Input] {
        // The same operation's arguments are in the same order at every plan.
        var inputs: [PlanMemo.Input] = []
        inputs.reserveCapacity(op.arguments.count)
        for (parameter, arguments) in op.arguments {
            for argument in arguments {
                var input = memoInput(argument)
                input.anyConstant = input.id >= 0 && input.constant != nil && !readAtRunTime.isEmpty && readAtRunTime.contains(parameter)
                inputs.append(input)
            }
        }
        return inputs
    }

    /// Whether what `op` reads is `recorded` (what `memoInputs(of:)` gave
    /// when it was planned), compared argument by argument and field by
    /// field where the values lie: most of a decoder's step is taken from its
    /// last plan, so its inputs are not gathered to be compared.
    func memoInputs(of op: GraphOperation, match recorded: [PlanMemo.Input], numberingKept: Bool) -> Bool {
        // Read in place, each record's input and each value once: copying them cost reference counting, and each
        // access to the planner's values an exclusivity check.
        recorded.withUnsafeBufferPointer { recorded in
            values.withUnsafeBufferPointer { values in
                var position = 0
                for arguments in op.arguments.values {
                    for argument in arguments {
                        guard position < recorded.count, matches(argument, recorded.baseAddress! + position, values, numberingKept: numberingKept)
                        else { return false }
                        position += 1
                    }
                }
                return position == recorded.count
            }
        }
    }

    /// `numberingKept`: every name stands for the id it did at the last plan (`PlanMemo.Binding`), so the recorded id is the name's.
    private func matches(_ argument: GraphArgument, _ recorded: UnsafePointer<PlanMemo.Input>, _ values: UnsafeBufferPointer<PlanValue>,
                         numberingKept: Bool) -> Bool {
        switch argument {
        case .constant(let tensor):
            return recorded.pointee.id == -1 && recorded.pointee.constant == tensor
        case .value(let name):
            let id: Int
            if numberingKept {
                guard recorded.pointee.id >= 0 else { return recorded.pointee.id == Int.min }
                id = recorded.pointee.id
            } else {
                guard let named = self.id(named: name) else { return recorded.pointee.id == Int.min }
                guard recorded.pointee.id == named else { return false }
                id = named
            }
            let value = values.baseAddress! + id
            guard recorded.pointee.type == value.pointee.type, recorded.pointee.storage == value.pointee.storage,
                  recorded.pointee.shape == value.pointee.shape,
                  recorded.pointee.anyConstant ? value.pointee.constant != nil : recorded.pointee.constant == value.pointee.constant
            else { return false }
            guard value.pointee.constant == nil, recordedStacks[id] != nil || recorded.pointee.stack != nil else {
                return recorded.pointee.stack == nil
            }
            return recorded.pointee.stack == recordedStack(of: value.pointee)
        }
    }

    /// What one argument reads, as far as planning depends on it.
    private func memoInput(_ argument: GraphArgument) -> PlanMemo.Input {
        switch argument {
        case .constant(let tensor):
            return PlanMemo.Input(id: -1, type: tensor.type, storage: tensor.type.computedStorage, shape: tensor.shape, constant: tensor, stack: nil)
        case .value(let name):
            guard let value = value(named: name) else { return .missing }
            return PlanMemo.Input(id: value.id, type: value.type, storage: value.storage, shape: value.shape, constant: value.constant,
                                  stack: value.constant == nil ? recordedStack(of: value) : nil)
        }
    }
}
