import NameMatching

/// Parses one command's arguments against its `CommandSpec`.
///
/// Accepts `--name value`, `--name=value`, `-x value`, bundled short flags
/// (`-qj`), and `--` to end options (everything after it is positional).
/// A lone `-` is positional (conventionally standard input).
public enum ArgumentParser {
    public static func parse(_ arguments: [String], for command: CommandSpec) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var positionals: [String] = []
        var index = 0
        var optionsEnded = false

        func record(_ option: OptionSpec, value: String?) throws(UsageError) {
            if let value {
                if parsed.values[option.name] != nil && !option.repeatable {
                    throw .repeatedOption(option.name)
                }
                parsed.values[option.name, default: []].append(value)
            } else {
                parsed.flags.insert(option.name)
            }
        }

        func takeValue(for option: OptionSpec, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else {
                throw .missingValue(option: option.name, valueName: option.valueName ?? "VALUE")
            }
            return arguments[index]
        }

        while index < arguments.count {
            let argument = arguments[index]
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
            } else if argument == "--" {
                optionsEnded = true
            } else if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                let name: String
                let inline: String?
                if let equals = body.firstIndex(of: "=") {
                    name = String(body[..<equals])
                    inline = String(body[body.index(after: equals)...])
                } else {
                    name = String(body)
                    inline = nil
                }
                guard let option = command.option(named: name) else {
                    throw .unknownOption("--" + name, command: command.name,
                                         suggestion: closestMatch(to: name, among: command.options.map(\.name)))
                }
                if option.takesValue {
                    try record(option, value: try takeValue(for: option, inline: inline))
                } else {
                    guard inline == nil else { throw .unexpectedValue(option: name) }
                    try record(option, value: nil)
                }
            } else {
                // One or more short options: -q, -qj, -o PATH, -oPATH.
                var letters = Substring(argument.dropFirst())
                while let letter = letters.first {
                    letters = letters.dropFirst()
                    guard let option = command.option(short: letter) else {
                        throw .unknownOption("-" + String(letter), command: command.name, suggestion: nil)
                    }
                    if option.takesValue {
                        let value = try takeValue(for: option, inline: letters.isEmpty ? nil : String(letters))
                        try record(option, value: value)
                        break
                    }
                    try record(option, value: nil)
                }
            }
            index += 1
        }

        if parsed.has("help") { return parsed }
        for (position, spec) in command.arguments.enumerated() {
            if position < positionals.count {
                parsed.positionals[spec.name] = positionals[position]
                if spec.isRepeated { parsed.repeatedPositionals = Array(positionals[position...]) }
            } else if !spec.isOptional {
                throw .missingArgument(name: spec.name, command: command.name)
            }
        }
        if command.arguments.last?.isRepeated != true, positionals.count > command.arguments.count {
            throw .extraArgument(positionals[command.arguments.count], command: command.name)
        }
        return parsed
    }
}
