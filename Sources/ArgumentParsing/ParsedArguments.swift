/// The result of parsing a command's arguments.
public struct ParsedArguments: Equatable, Sendable {
    /// Flags given, by option name.
    public var flags: Set<String> = []
    /// Values given, by option name, in order.
    public var values: [String: [String]] = [:]
    /// Positional arguments, by name, in order.
    public var positionals: [String: String] = [:]
    /// Every value of a repeated last argument (`IMAGE...`), in order.
    public var repeatedPositionals: [String] = []

    public init() {}

    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// The last value of option `name`, if given.
    public func value(_ name: String) -> String? { values[name]?.last }

    public subscript(positional name: String) -> String? { positionals[name] }

    /// The value of option `name` as an integer of at least 1; `nil` when not given.
    ///
    /// - Throws: `UsageError.invalidValue` naming the option for anything else.
    public func positiveInteger(_ name: String) throws(UsageError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), number >= 1 else {
            throw .invalidValue(option: name, value: text, reason: "expected a positive integer")
        }
        return number
    }
}
