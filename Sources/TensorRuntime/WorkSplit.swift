/// How many threads one operation's work is split between, decided at plan
/// time: never more than there are items to hand out, and never so many that
/// a thread gets less than `minimumPerThread` multiply-adds. Handing a block
/// to a Dispatch worker and joining it costs microseconds (more when the cores
/// are shared), which is more than a tiny operation's whole run: a 16-channel
/// 4×4 convolution or a one-token decoder step's attention runs on the
/// calling thread.
enum WorkSplit {
    /// Multiply-adds (or comparable element operations) below which a second
    /// thread costs more than it saves: about 10 µs of work at one core's speed.
    /// Task-local so that tests can split tiny operations to check the split.
    @TaskLocal static var minimumPerThread = 1 << 17

    /// Threads for `work` multiply-adds in `items` independent pieces, at most `threads`.
    static func workers(threads: Int, work: Int, items: Int) -> Int {
        max(1, min(threads, items, work / max(minimumPerThread, 1)))
    }
}
