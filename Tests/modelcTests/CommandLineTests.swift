import Foundation
import Testing

/// The command line itself: help, version, and usage errors.
@Suite struct CommandLineTests {
    @Test func version() throws {
        let result = try ModelcProcess.run(["--version"])
        #expect(result.status == 0)
        #expect(result.standardOutput.wholeMatch(of: /modelc \d+\.\d+\.\d+\n/) != nil)
    }

    @Test(arguments: [["--help"], ["-h"], ["help"]])
    func overview(arguments: [String]) throws {
        let result = try ModelcProcess.run(arguments)
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("modelc: "))
        #expect(result.standardOutput.contains("\n  inspect "))
    }

    @Test(arguments: [["help", "inspect"], ["inspect", "--help"], ["inspect", "-h"]])
    func commandHelp(arguments: [String]) throws {
        let result = try ModelcProcess.run(arguments)
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("USAGE: modelc inspect [options] FILE\n"))
        #expect(result.standardOutput.contains("  --json "))
    }

    @Test func noArgumentsPrintsOverviewOnStderr() throws {
        let result = try ModelcProcess.run([])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("USAGE: modelc COMMAND"))
    }

    @Test(arguments: [
        (["inspekt", "x"], "modelc: error: unknown command 'inspekt'; did you mean 'inspect'?"),
        (["frobnicate"], "modelc: error: unknown command 'frobnicate'"),
        (["--verison"], "modelc: error: unknown option '--verison' for 'modelc'; did you mean '--version'?"),
        (["inspect", "--jsn", "a"], "modelc: error: unknown option '--jsn' for 'inspect'; did you mean '--json'?"),
        (["inspect"], "modelc: error: 'inspect' needs FILE"),
        (["inspect", "a", "b"], "modelc: error: unexpected argument 'b' for 'inspect'"),
        (["inspect", "--json=yes", "a"], "modelc: error: option '--json' is a flag and takes no value"),
        (["help", "inspekt"], "modelc: error: unknown command 'inspekt'; did you mean 'inspect'?"),
    ])
    func usageErrors(arguments: [String], message: String) throws {
        let result = try ModelcProcess.run(arguments)
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        let lines = result.standardError.split(separator: "\n").map(String.init)
        #expect(lines.first == message)
        #expect(lines.count == 2)
        #expect(lines.last?.hasPrefix("USAGE: modelc") == true)
    }

    @Test func doubleDashAllowsFileNamesStartingWithDash() throws {
        let result = try ModelcProcess.run(["inspect", "--", "-missing.mlmodel"])
        #expect(result.status == 66)
        #expect(result.standardError == "modelc: error: -missing.mlmodel: cannot read: No such file or directory\n")
    }
}
