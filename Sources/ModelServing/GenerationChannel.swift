import Dispatch
import Foundation

/// The tokens of one generation on their way from the worker computing them to the connection
/// answering: the worker pushes tokens and ends it; the connection waits for them. Whichever
/// side ends it first decides how it ended (the other side sees that and stops).
///
/// Thread-safe.
final class GenerationChannel: @unchecked Sendable {
    /// How a generation ended.
    enum End: Sendable, Equatable {
        /// Every token asked for was generated.
        case completed
        /// It stopped on this error (its tokens so far were sent, when streaming).
        case failed(RequestError)
        /// The client went away: nobody reads the rest.
        case abandoned
    }

    /// What a streaming reader gets next.
    enum Next: Sendable, Equatable {
        /// Tokens not read yet, the first of them at `index`.
        case tokens(index: Int, [Int])
        /// The generation failed after the tokens read (given once).
        case failed(RequestError)
        /// Nothing more.
        case end
        /// Nothing yet.
        case pending
    }

    private let condition = NSCondition()
    private var tokens: [Int] = []
    private var ending: End?
    /// Reader side: tokens read, and whether the failure was read.
    private var read = 0
    private var failureRead = false

    /// Whether it has not ended: the worker goes on while it is.
    var isOpen: Bool {
        condition.lock()
        defer { condition.unlock() }
        return ending == nil
    }

    /// The tokens so far and how it ended, if it did.
    var snapshot: ([Int], End?) {
        condition.lock()
        defer { condition.unlock() }
        return (tokens, ending)
    }

    /// Adds the next token (dropped once ended).
    func push(_ token: Int) {
        condition.lock()
        defer { condition.unlock() }
        guard ending == nil else { return }
        tokens.append(token)
        condition.broadcast()
    }

    /// Ends it, unless it ended already; then runs `settle` (under the lock: before any waiter
    /// sees the end, so what it records is there once the answer is).
    func close(_ end: End, settle: () -> Void = {}) {
        condition.lock()
        defer { condition.unlock() }
        guard ending == nil else { return }
        ending = end
        settle()
        condition.broadcast()
    }

    /// Waits until a token came or it ended; false when `deadline` passed first.
    func waitForStart(until deadline: DispatchTime) -> Bool {
        wait(until: deadline) { !$0.tokens.isEmpty || $0.ending != nil }
    }

    /// Waits until it ended; false when `deadline` passed first.
    func waitForEnd(until deadline: DispatchTime) -> Bool {
        wait(until: deadline) { $0.ending != nil }
    }

    /// The reader's next step, waiting up to `seconds` for one: the tokens not read yet, `limit` at
    /// most (the rest at the next call), or how it ended once every token was read.
    func next(waitingUpTo seconds: Double, atMost limit: Int = .max) -> Next {
        condition.lock()
        defer { condition.unlock() }
        let until = Date().addingTimeInterval(seconds)
        while read == tokens.count, ending == nil, Date() < until { _ = condition.wait(until: until) }
        if read < tokens.count {
            let index = read
            read = index + min(tokens.count - index, max(1, limit))
            return .tokens(index: index, Array(tokens[index..<read]))
        }
        switch ending {
        case .failed(let error)? where !failureRead:
            failureRead = true
            return .failed(error)
        case nil: return .pending
        default: return .end
        }
    }

    private func wait(until deadline: DispatchTime, _ done: (GenerationChannel) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !done(self) {
            let left = Double(deadline.uptimeNanoseconds) - Double(DispatchTime.now().uptimeNanoseconds)
            if left <= 0 { return false }
            _ = condition.wait(until: Date().addingTimeInterval(min(left / 1e9, 3600)))
        }
        return true
    }
}
