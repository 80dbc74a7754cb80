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

    @Test("past its limit the pool frees the smallest arena", arguments: [1, 2, 3])
    func limit(limit: Int) {
        let pool = ArenaPool(limit: limit)
        let arenas = [4_000, 1_000, 9_000, 2_000].map { pool.take(atLeast: $0) }
        for arena in arenas { pool.give(arena) }
        let kept = arenas.map(\.bytes).sorted(by: >).prefix(limit)
        #expect(pool.keptBytes == kept.reduce(0, +))
    }
}
