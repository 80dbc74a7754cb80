/// Describes one subcommand: its name, what it does, and what it accepts.
///
/// The parser reads arguments against it; `HelpFormatter` renders it as help.
public struct CommandSpec: Sendable {
    public var name: String
    /// One line: what the command does.
    public var abstract: String
    /// Paragraphs shown after the usage line in `modelc help NAME`.
    public var discussion: String
    public var arguments: [PositionalSpec]
    public var options: [OptionSpec]

    public init(name: String, abstract: String, discussion: String = "",
                arguments: [PositionalSpec] = [], options: [OptionSpec] = []) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.arguments = arguments
        self.options = options + [OptionSpec(name: "help", short: "h", help: "Show this help.")]
    }

    /// The option called `--name` (or `-short`), if the command has one.
    public func option(named name: String) -> OptionSpec? {
        options.first { $0.name == name }
    }

    public func option(short: Character) -> OptionSpec? {
        options.first { $0.short == short }
    }
}

/// A `--name` flag, or a `--name VALUE` option when `valueName` is set.
public struct OptionSpec: Sendable {
    public var name: String
    public var short: Character?
    /// The placeholder shown in help (`PATH`, `HEX`); `nil` for a flag.
    public var valueName: String?
    public var help: String
    /// Whether the option may be given more than once (values accumulate).
    public var repeatable: Bool

    public init(name: String, short: Character? = nil, valueName: String? = nil, help: String, repeatable: Bool = false) {
        self.name = name
        self.short = short
        self.valueName = valueName
        self.help = help
        self.repeatable = repeatable
    }

    public var takesValue: Bool { valueName != nil }
}

/// A positional argument.
public struct PositionalSpec: Sendable {
    public var name: String
    public var help: String
    public var isOptional: Bool
    /// Whether the argument takes every remaining positional (one at least
    /// unless optional); only the last argument may.
    public var isRepeated: Bool

    public init(name: String, help: String, isOptional: Bool = false, isRepeated: Bool = false) {
        self.name = name
        self.help = help
        self.isOptional = isOptional
        self.isRepeated = isRepeated
    }
}
