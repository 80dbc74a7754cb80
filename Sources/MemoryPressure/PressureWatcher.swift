import Synchronization
import SystemIO
#if canImport(Glibc)
import Glibc
#endif

/// One file descriptor the watcher polls, and what an event on it means.
struct PressureWatch: Sendable {
    enum Kind: Sendable {
        /// A PSI trigger: `POLLPRI` is an event; `POLLERR` means the trigger is
        /// gone (its cgroup was removed) and ends the stream. Never read.
        case psiTrigger
        /// A FIFO or a socket: `POLLIN` is an event and what arrived is read
        /// and discarded; end of file or a hang-up ends the stream.
        case readable
    }

    let fd: Int32
    let kind: Kind
    let level: MemoryPressureLevel
}

/// The one thread that polls a source's files and feeds its stream.
///
/// The thread is a pthread of its own, not one of the cooperative pool's: it
/// blocks in `poll` with no timeout and is woken by a byte on a self-pipe when
/// `stop()` is called. It owns the watched descriptors and closes them when it
/// ends, either on `stop()` or when a watched file reports that it is gone;
/// the pipe is closed by `stop()`, after the thread has ended.
final class PressureWatcher: Sendable {
    private let channel: LevelChannel
    private let calls: Syscalls
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// The running thread; nil once `stop()` has taken it.
    private let thread: Mutex<pthread_t?>

    /// Starts the thread. Takes ownership of every descriptor in `watches`:
    /// they are closed when the thread ends, or before this throws.
    init(watches: [PressureWatch], channel: LevelChannel, calls: Syscalls) throws(SystemCallError) {
        self.channel = channel
        self.calls = calls
        var pipe: [Int32] = [-1, -1]
        guard pipe.withUnsafeMutableBufferPointer({ ends in
            guard let base = ends.baseAddress else { return false }
            return calls.pipe(base) == 0
        }) else {
            let code = errno
            for watch in watches { _ = calls.close(watch.fd) }
            throw SystemCallError(call: "pipe", path: "memory pressure watcher", code: code)
        }
        wakeRead = pipe[0]
        wakeWrite = pipe[1]
        let loop = PollLoop(watches: watches, wakeRead: pipe[0], continuation: channel.continuation, calls: calls)
        let context = Unmanaged.passRetained(loop).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            Unmanaged<PollLoop>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<PollLoop>.fromOpaque(context).release()
            loop.closeWatched()
            _ = calls.close(pipe[0])
            _ = calls.close(pipe[1])
            throw SystemCallError(call: "pthread_create", path: "memory pressure watcher", code: result)
        }
        thread = Mutex(handle)
    }

    deinit {
        stop()
    }

    /// Wakes the thread, waits for it to end, closes the pipe and finishes
    /// the stream. Idempotent.
    ///
    /// Never runs on the thread itself: the thread only yields into the
    /// stream and finishes it (no termination handler), so no caller code and
    /// no deinit of a source runs there.
    ///
    /// The whole stop happens under the lock, so a caller that comes while
    /// another is stopping returns only once the thread has ended too.
    func stop() {
        thread.withLock { thread in
            guard let handle = thread else { return }
            thread = nil
            // Not through `calls`: a wake-up that a test table swallowed would hang
            // the join. The read end is still open (only this closes it), so no SIGPIPE.
            var byte: UInt8 = 1
            _ = Glibc.write(wakeWrite, &byte, 1)
            _ = pthread_join(handle, nil)
            _ = calls.close(wakeRead)
            _ = calls.close(wakeWrite)
            channel.continuation.finish()
        }
    }
}

/// What runs on the watcher thread.
private final class PollLoop: Sendable {
    let watches: [PressureWatch]
    let wakeRead: Int32
    let continuation: AsyncStream<MemoryPressureLevel>.Continuation
    let calls: Syscalls

    init(watches: [PressureWatch], wakeRead: Int32, continuation: AsyncStream<MemoryPressureLevel>.Continuation, calls: Syscalls) {
        self.watches = watches
        self.wakeRead = wakeRead
        self.continuation = continuation
        self.calls = calls
    }

    /// Polls until woken through the pipe, until a watched file is gone, or
    /// until `poll` fails; then closes the watched files and finishes the stream.
    func run() {
        var polled = watches.map { watch in
            pollfd(fd: watch.fd, events: Int16(watch.kind == .psiTrigger ? POLLPRI : POLLIN), revents: 0)
        }
        polled.append(pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0))
        let wakeIndex = polled.count - 1
        watching: while true {
            let ready = polled.withUnsafeMutableBufferPointer { fds -> Int32 in
                guard let base = fds.baseAddress else { return -1 }
                return calls.poll(base, fds.count, -1)
            }
            if ready < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                break
            }
            if polled[wakeIndex].revents != 0 { break }
            for (index, watch) in watches.enumerated() {
                let events = Int32(polled[index].revents)
                guard events != 0 else { continue }
                switch watch.kind {
                case .psiTrigger:
                    if events & (POLLERR | POLLNVAL) != 0 { break watching }
                    if events & POLLPRI != 0 { continuation.yield(watch.level) }
                case .readable:
                    if events & POLLIN != 0 {
                        let (arrived, open) = discardQueued(watch.fd)
                        if arrived { continuation.yield(watch.level) }
                        guard open else { break watching }
                    } else if events & (POLLHUP | POLLERR | POLLNVAL) != 0 {
                        break watching
                    }
                }
            }
        }
        closeWatched()
        continuation.finish()
    }

    /// Reads and drops what `fd` holds: whether anything arrived, and whether
    /// `fd` is still open for more (not at end of file, no error).
    private func discardQueued(_ fd: Int32) -> (arrived: Bool, open: Bool) {
        var buffer = [UInt8](repeating: 0, count: 256)
        var arrived = false
        while true {
            let count = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return calls.read(fd, base, raw.count)
            }
            if count > 0 {
                arrived = true
                continue
            }
            if count == 0 { return (arrived, false) }
            if errno == EINTR { continue }
            return (arrived, errno == EAGAIN || errno == EWOULDBLOCK)
        }
    }

    /// Closes the watched files; the pipe belongs to the watcher.
    func closeWatched() {
        for watch in watches { _ = calls.close(watch.fd) }
    }
}
