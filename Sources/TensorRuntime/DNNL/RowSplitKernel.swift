import Dispatch
import ModelFeatures
import SystemIO

/// A oneDNN kernel over independent rows (softmax or layer norm along the
/// last axis, an element-wise activation) split between the thread team's threads,
/// as the products split theirs: one single-threaded primitive per block
/// size, each thread running it on its own rows.
struct RowSplitKernel: Sendable {
    private let kernels: [DNNLPrimitive]
    private let rows: Int
    private let block: Int
    private let workers: Int
    private let sourceRow: Int
    private let destinationRow: Int

    /// Kernels for `rows` rows of `sourceRow` / `destinationRow` bytes, split
    /// over at most `threads` threads with at least `minimumRows` rows each;
    /// `make(n)` prepares the primitive for `n` rows.
    init(rows: Int, sourceRow: Int, destinationRow: Int, threads: Int, minimumRows: Int,
         make: (Int) throws(RuntimeError) -> DNNLPrimitive) throws(RuntimeError) {
        let workers = max(1, min(threads, rows / max(minimumRows, 1)))
        let block = (rows + workers - 1) / workers
        let last = rows - block * (workers - 1)
        var kernels = [try make(block)]
        if last != block { kernels.append(try make(last)) }
        self.kernels = kernels
        self.rows = rows
        self.block = block
        self.workers = workers
        self.sourceRow = sourceRow
        self.destinationRow = destinationRow
    }

    /// Runs every row of `source` into `destination` (they may be the same); `false` if oneDNN fails.
    func run(_ source: UnsafeMutableRawPointer, _ destination: UnsafeMutableRawPointer) -> Bool {
        if workers == 1 { return kernels[0].run(source, destination) }
        let pointers = Pointers(source: source, destination: destination)
        let failed = Locked(false)
        ThreadTeam.shared.perform(workers, threads: workers) { worker in
            let kernel = worker == workers - 1 ? kernels[kernels.count - 1] : kernels[0]
            let first = worker * block
            if !kernel.run(pointers.source + first * sourceRow, pointers.destination + first * destinationRow) {
                failed.withLock { $0 = true }
            }
        }
        return !failed.withLock { $0 }
    }

    private struct Pointers: @unchecked Sendable {
        let source: UnsafeMutableRawPointer
        let destination: UnsafeMutableRawPointer
    }
}
