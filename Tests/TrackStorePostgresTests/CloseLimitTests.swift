import Geo
import Synchronization
import Testing
@testable import TrackStorePostgres

/// The store's close waits for postgres-nio's pool to end, but not forever: a pool that never ends
/// (seen in a full test run, 2026-11-30) would otherwise hold the process's exit. The wait is
/// `waitForEnd(of:atMost:clock:)`, on the store's clock; a pool that hangs cannot be made on
/// purpose, so a task that ignores cancellation stands for it.
@Suite("PostgreSQL: the close's limit")
struct CloseLimitTests {
    /// What a task waits on until `release` is called, whatever cancels it.
    final class Gate: Sendable {
        private let state = Mutex<(waiting: CheckedContinuation<Void, Never>?, released: Bool)>((nil, false))

        func wait() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let released = state.withLock { s -> Bool in
                    if !s.released { s.waiting = continuation }
                    return s.released
                }
                if released { continuation.resume() }
            }
        }

        func release() {
            let waiting = state.withLock { s -> CheckedContinuation<Void, Never>? in
                s.released = true
                defer { s.waiting = nil }
                return s.waiting
            }
            waiting?.resume()
        }
    }

    @Test func aTaskThatEndsIsWaitedForWithoutTheClockMoving() async {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 0))
        let gate = Gate()
        let task = Task { await gate.wait() }
        async let ended = waitForEnd(of: task, atMost: .seconds(30), clock: clock)
        await clock.sleepers(atLeast: 1)
        gate.release()
        #expect(await ended)
        #expect(clock.now == EpochInstant(secondsSince1970: 0))
    }

    @Test func aTaskThatIgnoresCancellationIsNoLongerWaitedForAtTheLimit() async {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 0))
        let gate = Gate()
        let task = Task { await gate.wait() }
        task.cancel()
        async let ended = waitForEnd(of: task, atMost: .seconds(30), clock: clock)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(29))
        #expect(clock.sleeperCount == 1)  // not yet: still waiting
        clock.advance(by: .seconds(1))
        #expect(await ended == false)
        gate.release()
        await task.value
    }

    @Test func aTaskAlreadyEndedIsSeenAtOnce() async {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 0))
        let task = Task<Void, Never> {}
        await task.value
        #expect(await waitForEnd(of: task, atMost: .seconds(30), clock: clock))
    }
}
