import Foundation

/// Where the CLI writes: results to standard output, diagnostics to standard error.
enum Output {
    static func print(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
