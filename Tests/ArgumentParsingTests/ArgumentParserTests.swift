import Testing
@testable import ArgumentParsing

@Suite struct ArgumentParserTests {
    let command = CommandSpec(
        name: "fetch", abstract: "Download.",
        arguments: [PositionalSpec(name: "URL", help: "where"),
                    PositionalSpec(name: "EXTRA", help: "more", isOptional: true)],
        options: [OptionSpec(name: "output", short: "o", valueName: "PATH", help: "where to"),
                  OptionSpec(name: "header", valueName: "K: V", help: "header", repeatable: true),
                  OptionSpec(name: "quiet", short: "q", help: "hush"),
                  OptionSpec(name: "json", short: "j", help: "json")])

    @Test(arguments: [
        ["--output", "a.bin", "u"], ["--output=a.bin", "u"], ["-o", "a.bin", "u"], ["-oa.bin", "u"], ["u", "--output", "a.bin"],
    ])
    func optionValueSpellings(arguments: [String]) throws {
        let parsed = try ArgumentParser.parse(arguments, for: command)
        #expect(parsed.value("output") == "a.bin")
        #expect(parsed[positional: "URL"] == "u")
    }

    @Test func bundledShortFlags() throws {
        let parsed = try ArgumentParser.parse(["-qj", "u"], for: command)
        #expect(parsed.flags == ["quiet", "json"])
    }

    @Test func doubleDashEndsOptions() throws {
        let parsed = try ArgumentParser.parse(["--", "--quiet", "-o"], for: command)
        #expect(parsed[positional: "URL"] == "--quiet")
        #expect(parsed[positional: "EXTRA"] == "-o")
        #expect(parsed.flags.isEmpty)
    }

    @Test func emptyInlineValueIsAValue() throws {
        let parsed = try ArgumentParser.parse(["--output=", "u"], for: command)
        #expect(parsed.value("output") == "")
    }

    @Test func repeatableOptionAccumulates() throws {
        let parsed = try ArgumentParser.parse(["--header", "A: 1", "--header=B: 2", "u"], for: command)
        #expect(parsed.values["header"] == ["A: 1", "B: 2"])
    }

    @Test func errors() {
        #expect(throws: UsageError.unknownOption("--outptu", command: "fetch", suggestion: "output")) {
            try ArgumentParser.parse(["--outptu", "x", "u"], for: command)
        }
        #expect(throws: UsageError.unknownOption("--zebra", command: "fetch", suggestion: nil)) {
            try ArgumentParser.parse(["--zebra", "u"], for: command)
        }
        #expect(throws: UsageError.unknownOption("-x", command: "fetch", suggestion: nil)) {
            try ArgumentParser.parse(["-x", "u"], for: command)
        }
        #expect(throws: UsageError.missingValue(option: "output", valueName: "PATH")) {
            try ArgumentParser.parse(["u", "--output"], for: command)
        }
        #expect(throws: UsageError.unexpectedValue(option: "quiet")) {
            try ArgumentParser.parse(["--quiet=yes", "u"], for: command)
        }
        #expect(throws: UsageError.missingArgument(name: "URL", command: "fetch")) {
            try ArgumentParser.parse(["--quiet"], for: command)
        }
        #expect(throws: UsageError.extraArgument("c", command: "fetch")) {
            try ArgumentParser.parse(["a", "b", "c"], for: command)
        }
        #expect(throws: UsageError.repeatedOption("output")) {
            try ArgumentParser.parse(["-o", "a", "-o", "b", "u"], for: command)
        }
    }

    @Test func repeatedLastArgumentTakesTheRest() throws {
        let classify = CommandSpec(
            name: "classify", abstract: "Classify.",
            arguments: [PositionalSpec(name: "MODEL", help: "model"),
                        PositionalSpec(name: "IMAGE", help: "images", isRepeated: true)],
            options: [OptionSpec(name: "top", valueName: "K", help: "how many")])
        let parsed = try ArgumentParser.parse(["m", "a.jpg", "--top", "3", "b.png", "--", "-c.jpg"], for: classify)
        #expect(parsed[positional: "MODEL"] == "m")
        #expect(parsed.repeatedPositionals == ["a.jpg", "b.png", "-c.jpg"])
        #expect(parsed.value("top") == "3")
        #expect(throws: UsageError.missingArgument(name: "IMAGE", command: "classify")) {
            try ArgumentParser.parse(["m"], for: classify)
        }
        #expect(HelpFormatter.usage(for: classify, tool: "modelc").contains("MODEL IMAGE..."))
    }

    @Test func helpSkipsRequiredArguments() throws {
        let parsed = try ArgumentParser.parse(["--help"], for: command)
        #expect(parsed.has("help"))
    }

    @Test func errorMessagesReadAsOneLine() {
        let message = UsageError.unknownOption("--outptu", command: "fetch", suggestion: "output").description
        #expect(message == "unknown option '--outptu' for 'fetch'; did you mean '--output'?")
        #expect(!message.contains("\n"))
    }

    @Test func helpIsAligned() {
        let help = HelpFormatter.help(for: command, tool: "modelc")
        #expect(help.hasPrefix("USAGE: modelc fetch [options] URL [EXTRA]\n"))
        #expect(help.contains("  -o, --output PATH"))
        let lines = help.split(separator: "\n").map(String.init)
        let columns = command.options.compactMap { option -> Int? in
            guard let line = lines.first(where: { $0.hasSuffix(option.help) && $0.contains("--\(option.name)") }) else { return nil }
            return line.count - option.help.count
        }
        #expect(columns.count == command.options.count)
        #expect(Set(columns).count == 1)
    }
}
