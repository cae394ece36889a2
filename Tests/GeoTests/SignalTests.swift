import Testing

import Geo

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
