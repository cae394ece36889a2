import Testing

@testable import Geo

/// A signal's timeout runs on the clock it is given: a manual clock's time, not the real one.
@Suite struct SignalTests {
    @Test func aWaitEndsAtItsDeadlineOnTheGivenClock() async {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let signal = Signal()
        let waiting = Task { await signal.wait(until: clock.now.advanced(by: .seconds(3600)), on: clock) }
        await clock.sleepers()
        #expect(clock.nextDeadline == .init(secondsSince1970: 4600))
        clock.advance(by: .seconds(3600))
        await waiting.value
        #expect(clock.sleeperCount == 0)
    }

    @Test func aFireEndsTheWaitAndItsSleepOnTheClock() async {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let signal = Signal()
        let waiting = Task { await signal.wait(until: clock.now.advanced(by: .seconds(60)), on: clock) }
        await clock.sleepers()
        signal.fire()
        await waiting.value
        #expect(clock.sleeperCount == 0, "the timeout's sleep is cancelled with the wait")
        #expect(clock.now == .init(secondsSince1970: 1000))
    }

    @Test func aFireWithNobodyWaitingIsKeptForTheNextWait() async {
        let clock = ManualClock()
        let signal = Signal()
        signal.fire()
        await signal.wait(until: clock.now.advanced(by: .seconds(1)), on: clock)
        #expect(clock.sleeperCount == 0)
    }
}

/// Several tasks waiting on one signal: a fire wakes each, and a waiter whose deadline comes leaves
/// the others waiting (a connection's loss watcher and a publisher share one signal).
@Suite struct SignalWaitersTests {
    @Test func aFireWakesEveryWaiter() async {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let signal = Signal()
        let first = Task { await signal.wait(until: clock.now.advanced(by: .seconds(60)), on: clock) }
        let second = Task { await signal.wait(until: clock.now.advanced(by: .seconds(90)), on: clock) }
        await clock.sleepers(atLeast: 2)
        // Both continuations stored, so that the fire finds both waiting (not one pending fire).
        while signal.waiting < 2 { await Task.yield() }
        signal.fire()
        await first.value
        await second.value
        #expect(clock.now == .init(secondsSince1970: 1000), "woken by the fire, not by a deadline")
    }

    @Test func oneWaitersDeadlineLeavesTheOtherWaiting() async {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let signal = Signal()
        let short = Task { await signal.wait(until: clock.now.advanced(by: .seconds(10)), on: clock) }
        let long = Task { await signal.wait(until: clock.now.advanced(by: .seconds(3600)), on: clock) }
        await clock.sleepers(atLeast: 2)
        clock.advance(by: .seconds(10))
        await short.value
        #expect(clock.sleeperCount == 1, "the other waiter still sleeps to its own deadline")
        signal.fire()
        await long.value
        #expect(clock.sleeperCount == 0)
    }
}
