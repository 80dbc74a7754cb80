import FixtureSupport
import Foundation

/// Runs the built `modelc` binary and captures what it prints.
struct ModelcProcess {
    struct Result {
        let status: Int32
        let standardOutput: String
        let standardError: String
    }

    /// The `modelc` built beside this test bundle.
    static let executable: URL = {
        let bundle = Bundle.main.bundleURL
        let candidates = [
            bundle.appendingPathComponent("modelc"),
            bundle.deletingLastPathComponent().appendingPathComponent("modelc"),
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("modelc"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) } ?? candidates[1]
    }()

    /// A `modelc arguments…` process set up to run in the package root, with
    /// `environment` added to this process's environment.
    static func prepare(_ arguments: [String], environment: [String: String] = [:]) -> Process {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = Fixtures.packageRoot
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, added in added }
        return process
    }

    /// Runs `modelc arguments…` in the package root, bounded by `timeout` seconds,
    /// with `input` (or nothing) on its standard input.
    static func run(_ arguments: [String], environment: [String: String] = [:], input: Data? = nil,
                    timeout: TimeInterval = 60) throws -> Result {
        let process = prepare(arguments, environment: environment)
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        let inputPipe = input.map { _ in Pipe() }
        process.standardInput = inputPipe ?? FileHandle.nullDevice
        try process.run()
        if let inputPipe, let input {
            DispatchQueue.global().async {
                inputPipe.fileHandleForWriting.write(input)
                try? inputPipe.fileHandleForWriting.close()
            }
        }
        // Read both pipes while the process runs, so a large output cannot block it.
        let group = DispatchGroup()
        nonisolated(unsafe) var outputData = Data()
        nonisolated(unsafe) var errorData = Data()
        DispatchQueue.global().async(group: group) { outputData = output.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { errorData = error.fileHandleForReading.readDataToEndOfFile() }
        if group.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            throw TimedOut(arguments: arguments)
        }
        process.waitUntilExit()
        return Result(status: process.terminationStatus,
                      standardOutput: String(decoding: outputData, as: UTF8.self),
                      standardError: String(decoding: errorData, as: UTF8.self))
    }

    struct TimedOut: Error, CustomStringConvertible {
        let arguments: [String]
        var description: String { "modelc \(arguments.joined(separator: " ")) did not finish in time" }
    }
}
