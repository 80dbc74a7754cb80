import Foundation
import Testing
import SystemIO

@Suite struct OrderedParallelWorkTests {
    @Test func deliversEveryResultInOrderWithinTheWindow() {
        let window = 5
        let delivered = Locked(0)
        let aheadOfDelivery = Locked(0)
        var order: [Int] = []
        OrderedParallelWork.run(count: 300, threads: 4, window: window) { index in
            // Later items finish sooner, so results arrive out of order.
            usleep(UInt32((index % 7) * 50))
            let ahead = index - delivered.withLock { $0 }
            aheadOfDelivery.withLock { $0 = max($0, ahead) }
            return index * index
        } deliver: { index, value in
            #expect(value == index * index)
            order.append(index)
            delivered.withLock { $0 = index + 1 }
        }
        #expect(order == Array(0..<300))
        // An item is taken only within `window` of the last one delivered.
        #expect(aheadOfDelivery.withLock { $0 } <= window)
    }

    @Test func nothingToDo() {
        var calls = 0
        OrderedParallelWork.run(count: 0, threads: 2, window: 1) { $0 } deliver: { _, _ in calls += 1 }
        #expect(calls == 0)
        OrderedParallelWork.run(count: 3, threads: 8, window: 1) { $0 } deliver: { _, _ in calls += 1 }
        #expect(calls == 3)
    }
}
