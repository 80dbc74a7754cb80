import Testing
@testable import MemoryPressure

@Suite struct TriggerTests {
    typealias Trigger = PSIPressureSource.Trigger

    @Test func defaultLinesAreMicroseconds() {
        #expect(Trigger.warning.line == "some 150000 1000000")
        #expect(Trigger.critical.line == "full 100000 1000000")
        #expect(Trigger(kind: .some, stall: .microseconds(1500), window: .milliseconds(500)).line == "some 1500 500000")
        #expect(Trigger(kind: .full, stall: .nanoseconds(1999), window: .seconds(10)).line == "full 1 10000000")
    }

    @Test func summariesUseTheLargestExactUnit() {
        #expect(Trigger.warning.summary == "some 150ms/1s")
        #expect(Trigger.critical.summary == "full 100ms/1s")
        #expect(Trigger(kind: .some, stall: .microseconds(1500), window: .milliseconds(2500)).summary == "some 1500µs/2500ms")
    }

    @Test(arguments: [
        (Trigger.warning, Trigger(kind: .some, stall: .milliseconds(300), window: .seconds(2))),
        (Trigger.critical, Trigger(kind: .full, stall: .milliseconds(200), window: .seconds(2))),
        (Trigger(kind: .some, stall: .milliseconds(200), window: .seconds(2)),
         Trigger(kind: .some, stall: .milliseconds(200), window: .seconds(2))),
        (Trigger(kind: .some, stall: .milliseconds(300), window: .seconds(3)),
         Trigger(kind: .some, stall: .milliseconds(400), window: .seconds(4))),
        (Trigger(kind: .full, stall: .milliseconds(50), window: .milliseconds(500)),
         Trigger(kind: .full, stall: .milliseconds(200), window: .seconds(2))),
    ])
    func unprivilegedWindowsAreMultiplesOfTwoSeconds(trigger: Trigger, expected: Trigger) {
        #expect(trigger.unprivileged == expected)
        #expect(trigger.unprivileged.window.microseconds % 2_000_000 == 0)
        #expect(trigger.unprivileged.problem == nil)
    }

    @Test(arguments: [
        (Trigger(kind: .some, stall: .zero, window: .seconds(1)), "the stall time must be positive"),
        (Trigger(kind: .some, stall: .milliseconds(10), window: .milliseconds(100)), "the window must be 500ms to 10s"),
        (Trigger(kind: .some, stall: .milliseconds(10), window: .seconds(11)), "the window must be 500ms to 10s"),
        (Trigger(kind: .full, stall: .seconds(2), window: .seconds(1)), "the stall time must not exceed the window"),
    ])
    func impossibleTriggersAreRefusedBeforeAskingTheKernel(trigger: Trigger, reason: String) throws {
        #expect(trigger.problem == reason)
        let error = #expect(throws: MemoryPressureError.self) {
            try PSIPressureSource(path: "/proc/pressure/memory", warning: trigger)
        }
        #expect(error == .invalidTrigger(path: "/proc/pressure/memory", line: trigger.line, reason: reason))
    }

    @Test func defaultsNeedNoChecks() {
        #expect(Trigger.warning.problem == nil)
        #expect(Trigger.critical.problem == nil)
    }
}
