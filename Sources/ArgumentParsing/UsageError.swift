/// A mistake on the command line. Each reads as one line and, where the
/// mistake looks like a typo, suggests what was probably meant.
public enum UsageError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownCommand(String, suggestion: String?)
    case unknownOption(String, command: String, suggestion: String?)
    case missingValue(option: String, valueName: String)
    case unexpectedValue(option: String)
    case missingArgument(name: String, command: String)
    case extraArgument(String, command: String)
    case repeatedOption(String)
    case invalidValue(option: String, value: String, reason: String)
    case invalidArgument(name: String, value: String, reason: String)
    case conflictingOptions(String, String)

    public var description: String {
        switch self {
        case .unknownCommand(let name, let suggestion):
            "unknown command '\(name)'" + didYouMean(suggestion)
        case .unknownOption(let option, let command, let suggestion):
            "unknown option '\(option)' for '\(command)'" + didYouMean(suggestion.map { "--" + $0 })
        case .missingValue(let option, let valueName):
            "option '--\(option)' needs a value (\(valueName))"
        case .unexpectedValue(let option):
            "option '--\(option)' is a flag and takes no value"
        case .missingArgument(let name, let command):
            "'\(command)' needs \(name)"
        case .extraArgument(let argument, let command):
            "unexpected argument '\(argument)' for '\(command)'"
        case .repeatedOption(let option):
            "option '--\(option)' given more than once"
        case .invalidValue(let option, let value, let reason):
            "invalid value '\(value)' for '--\(option)': \(reason)"
        case .invalidArgument(let name, let value, let reason):
            "invalid \(name) '\(value)': \(reason)"
        case .conflictingOptions(let first, let second):
            "options '--\(first)' and '--\(second)' exclude each other"
        }
    }
}

private func didYouMean(_ suggestion: String?) -> String {
    suggestion.map { "; did you mean '\($0)'?" } ?? ""
}

/// The candidate closest to `word` by edit distance, if it is close enough to
/// be a likely typo (at most a third of the word's length, and at least 1).
public func closestMatch(to word: String, among candidates: [String]) -> String? {
    let limit = max(1, word.count / 3)
    let scored = candidates.map { ($0, editDistance(word, $0)) }.filter { $0.1 <= limit }
    return scored.min { $0.1 < $1.1 }?.0
}

/// Levenshtein distance between two strings, by characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
            current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
