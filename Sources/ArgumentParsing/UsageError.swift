import NameMatching

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
