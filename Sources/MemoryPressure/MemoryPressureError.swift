/// Why a memory pressure source could not be set up.
public enum MemoryPressureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `MEMORY_PRESSURE_WATCH` is not set: the service manager offers no pressure file.
    case notConfigured
    /// `MEMORY_PRESSURE_WATCH` is `/dev/null`: the service manager asks that
    /// memory pressure not be watched at all.
    case turnedOff
    /// The file cannot be watched: missing (a kernel without PSI), not a PSI
    /// file, or another system error; `reason` says which.
    case unavailable(path: String, reason: String)
    /// Opening or writing the file needs permissions this process lacks.
    case permissionDenied(path: String)
    /// The kernel (or a check made before asking it) refused the trigger `line`.
    case invalidTrigger(path: String, line: String, reason: String)
    /// A systemd environment variable holds something unusable.
    case invalidEnvironment(variable: String, reason: String)

    public var description: String {
        switch self {
        case .notConfigured:
            "MEMORY_PRESSURE_WATCH is not set: no memory pressure file from the service manager"
        case .turnedOff:
            "MEMORY_PRESSURE_WATCH is /dev/null: the service manager turned memory pressure watching off"
        case .unavailable(let path, let reason):
            "\(path): cannot watch for memory pressure: \(reason)"
        case .permissionDenied(let path):
            "\(path): permission denied"
        case .invalidTrigger(let path, let line, let reason):
            "\(path): trigger \"\(line)\" refused: \(reason)"
        case .invalidEnvironment(let variable, let reason):
            "\(variable): \(reason)"
        }
    }
}
