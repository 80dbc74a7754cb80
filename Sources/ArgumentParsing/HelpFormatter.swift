/// Renders help text for a tool and its commands, aligned in two columns.
public enum HelpFormatter {
    /// Help for one command: usage line, abstract, discussion, arguments, options.
    public static func help(for command: CommandSpec, tool: String) -> String {
        var lines = ["USAGE: \(usage(for: command, tool: tool))", "", command.abstract]
        if !command.discussion.isEmpty {
            lines += ["", command.discussion]
        }
        if !command.arguments.isEmpty {
            lines += ["", "ARGUMENTS:"]
            lines += table(command.arguments.map { ($0.name, $0.help) })
        }
        lines += ["", "OPTIONS:"]
        lines += table(command.options.map { option in
            var label = option.short.map { "-\($0), " } ?? ""
            label += "--\(option.name)"
            if let value = option.valueName { label += " \(value)" }
            return (label, option.help)
        })
        return lines.joined(separator: "\n") + "\n"
    }

    /// The one-line usage of `command`.
    public static func usage(for command: CommandSpec, tool: String) -> String {
        var parts = [tool, command.name]
        if command.options.count > 1 { parts.append("[options]") }
        for argument in command.arguments {
            let name = argument.isRepeated ? argument.name + "..." : argument.name
            parts.append(argument.isOptional ? "[\(name)]" : name)
        }
        return parts.joined(separator: " ")
    }

    /// Help for the whole tool: overview and one line per command.
    public static func overview(tool: String, abstract: String, commands: [CommandSpec], footer: String) -> String {
        var lines = ["\(tool): \(abstract)", "", "USAGE: \(tool) COMMAND [options]", "", "COMMANDS:"]
        lines += table(commands.map { ($0.name, $0.abstract) })
        lines += ["", footer]
        return lines.joined(separator: "\n") + "\n"
    }

    static func table(_ rows: [(String, String)]) -> [String] {
        let width = min(28, (rows.map(\.0.count).max() ?? 0) + 2)
        return rows.map { label, text in
            let padding = label.count < width ? String(repeating: " ", count: width - label.count) : "  "
            return "  " + label + padding + text
        }
    }
}
