import Glibc
import Testing
@testable import TensorRuntime

/// `ArenaPool`: arenas of dropped plans go to the next plans' states.
@Suite("Arena pool")
struct ArenaPoolTests {
    @Test("a given arena is taken again by a request it fits, with room for one a little larger")
    func reuse() {
        let pool = ArenaPool(limit: 2)
        let first = pool.take(atLeast: 1_000)
        #expect(first.bytes >= 1_125 && first.bytes % 64 == 0)
        pool.give(first)
        #expect(pool.keptBytes == first.bytes)
        let again = pool.take(atLeast: 1_100)
        #expect(again.pointer == first.pointer)
        #expect(pool.keptBytes == 0)
        // Too large for what is kept: a new arena, the kept one stays.
        pool.give(again)
        let larger = pool.take(atLeast: 10_000)
        #expect(larger.pointer != again.pointer && larger.bytes >= 10_000)
        #expect(pool.keptBytes == again.bytes)
        pool.give(larger)
    }

    @Test("a kept arena taken for fewer bytes keeps only their pages resident", arguments: [0, 1, 4_096, 100_000, 1 << 20])
    func releasesWhatTheTakerDoesNotUse(used: Int) throws {
        let pool = ArenaPool(limit: 2)
        // A prompt's arena, every page written, then a decoder step's request that fits in it.
        let large = pool.take(atLeast: 4 << 20)
        large.pointer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: large.bytes)
        pool.give(large)
        let taken = pool.take(atLeast: 2 << 20, using: used)
        defer { pool.give(taken) }
        #expect(taken.pointer == large.pointer)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        // Whole pages past `used` are dropped and read as zero; the bytes the taker uses are untouched.
        let firstReleased = (Int(bitPattern: taken.pointer) + used + page - 1) / page * page - Int(bitPattern: taken.pointer)
        let lastReleased = (Int(bitPattern: taken.pointer) + taken.bytes) / page * page - Int(bitPattern: taken.pointer)
        let bytes = taken.pointer.assumingMemoryBound(to: UInt8.self)
        #expect((0..<min(used, taken.bytes)).allSatisfy { bytes[$0] == 0xA5 })
        #expect(try residentBytes(taken.pointer + firstReleased, lastReleased - firstReleased) == 0)
        #expect(stride(from: firstReleased, to: lastReleased, by: 512).allSatisfy { bytes[$0] == 0 })
    }

    @Test("the largest kept arena that fits is taken, so a prompt's does not wait in the pool with its pages resident")
    func takesTheLargest() throws {
        let pool = ArenaPool(limit: 2)
        let step = pool.take(atLeast: 1 << 20), prompt = pool.take(atLeast: 4 << 20)
        prompt.pointer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: prompt.bytes)
        pool.give(step)
        pool.give(prompt)
        let taken = pool.take(atLeast: 1 << 20, using: 4_096)
        #expect(taken.pointer == prompt.pointer)
        #expect(pool.keptBytes == step.bytes)
        // Its pages past the first used ones are not resident.
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let tail = try #require(UnsafeMutableRawPointer(bitPattern: (Int(bitPattern: taken.pointer) + 4_096 + page - 1) / page * page))
        #expect(try residentBytes(tail, taken.bytes - 2 * page) == 0)
        pool.give(taken)
        // Nothing kept fits: a new arena.
        let larger = pool.take(atLeast: 8 << 20)
        #expect(larger.pointer != step.pointer && larger.pointer != prompt.pointer)
        pool.give(larger)
    }

    @Test("an arena taken without a used size is kept as it is")
    func keepsAllWithoutUsedSize() throws {
        let pool = ArenaPool(limit: 2)
        let arena = pool.take(atLeast: 1 << 20)
        arena.pointer.initializeMemory(as: UInt8.self, repeating: 0x5A, count: arena.bytes)
        pool.give(arena)
        let taken = pool.take(atLeast: 1_000)
        defer { pool.give(taken) }
        #expect(taken.pointer == arena.pointer)
        let bytes = taken.pointer.assumingMemoryBound(to: UInt8.self)
        #expect(stride(from: 0, to: taken.bytes, by: 512).allSatisfy { bytes[$0] == 0x5A })
    }

    /// Bytes of the whole pages in `count` bytes from `pointer` that are resident (`mincore`).
    private func residentBytes(_ pointer: UnsafeMutableRawPointer, _ count: Int) throws -> Int {
        guard count > 0 else { return 0 }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var pages = [UInt8](repeating: 0, count: count / page)
        let result = pages.withUnsafeMutableBufferPointer { mincore(pointer, count / page * page, $0.baseAddress) }
        try #require(result == 0)
        return pages.reduce(0) { $0 + Int($1 & 1) } * page
    }

    @Test("past its limit the pool frees the smallest arena", arguments: [1, 2, 3])
    func limit(limit: Int) {
        let pool = ArenaPool(limit: limit)
        let arenas = [4_000, 1_000, 9_000, 2_000].map { pool.take(atLeast: $0) }
        for arena in arenas { pool.give(arena) }
        let kept = arenas.map(\.bytes).sorted(by: >).prefix(limit)
        #expect(pool.keptBytes == kept.reduce(0, +))
    }
}
