import BundleFormat
import ExitCodes
import ImageDecoding
import ModelCompiler
import ModelFeatures
import ModelFetch
import ModelRuntime
import ModelSpec
#if canImport(Glibc)
import Glibc
#endif

/// The status codes of the C interface: 0 for success, otherwise the class
/// of failure numbered as the CLI's exit codes (docs/cli.md, "Exit codes"), so a
/// caller maps errors the same way whichever door it came through. `usage`
/// (64) also covers a bad argument: a NULL pointer, an unknown data type or
/// pixel format, a negative dimension; `internalError` (1) a handle that is
/// not one.
typealias Status = ExitCode

/// A failure crossing the C interface: its status and one-line message.
struct Failure: Error {
    let status: Status
    let message: String

    init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    init(_ error: RuntimeError) { self.init(Status(error), error.description) }
    init(_ error: ModelError) { self.init(Status(error), error.description) }
}

/// The calling thread's last error, read with `modelc_last_error`.
enum LastError {
    /// One thread's status and message (a C string it owns).
    private final class Slot {
        var status: Int32 = 0
        var message: UnsafeMutablePointer<CChar>? = strdup("")

        func replace(status: Int32, message text: String) {
            free(message)
            self.status = status
            message = strdup(text)
        }

        deinit { free(message) }
    }

    /// The thread-specific key, made once; a thread's slot is released when the thread ends.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
        }
        return key
    }()

    private static var slot: Slot {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<Slot>.fromOpaque(pointer).takeUnretainedValue()
        }
        let slot = Slot()
        pthread_setspecific(key, Unmanaged.passRetained(slot).toOpaque())
        return slot
    }

    /// Records `failure` for this thread and returns its status.
    static func set(_ failure: Failure) -> Int32 {
        slot.replace(status: failure.status.rawValue, message: failure.message)
        return failure.status.rawValue
    }

    static func clear() {
        let slot = slot
        if slot.status != 0 { slot.replace(status: 0, message: "") }
    }

    static var status: Int32 { slot.status }

    /// The message, valid until the thread's next failing call into the interface.
    static var message: UnsafePointer<CChar>? { UnsafePointer(slot.message) }
}

/// Runs `body`, turning a thrown `Failure` into a status and the thread's last error.
func guarded(_ body: () throws(Failure) -> Void) -> Int32 {
    do {
        try body()
        LastError.clear()
        return 0
    } catch {
        return LastError.set(error)
    }
}
