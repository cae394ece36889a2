import Geo
import PostgresNIO
import Synchronization
import Testing
@testable import TrackStorePostgres

/// The store's close ends: postgres-nio's pool runs no keep-alive, whose statement, lost on a
/// connection that had just closed, held the pool's `run()` for ever (docs/endpoint.md); and the close
/// waits for the pool at most `closeLimit`, with `waitForEnd(of:atMost:clock:)`, on the store's clock,
/// in case anything else holds it. A pool that hangs cannot be made on purpose here (a bare client
/// with a keep-alive every millisecond hung at 7 of 600 closes), so a task that ignores cancellation
/// stands for it.
@Suite("PostgreSQL: the store's close ends")
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

    @Test func thePoolRunsNoKeepAlive() throws {
        let url = try PostgresURL(parsing: "postgres://keeptrack@127.0.0.1:5432/keeptrack")
        let configuration = try PostgresTrackStore.poolConfiguration(url, maxConnections: 10, name: "keeptrack 1")
        #expect(configuration.options.keepAliveBehavior == nil)
        #expect(configuration.options.maximumConnections == 10 && configuration.options.minimumConnections == 0)
        #expect(configuration.options.additionalStartupParameters.map(\.1) == ["keeptrack 1"])
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
