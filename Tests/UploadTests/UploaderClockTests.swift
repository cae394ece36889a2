import Foundation
import Geo
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
@testable import Upload

/// Batching and backoff wait on the uploader's clock: on a manual clock, minutes of retries take no
/// time, and each wait is the one the policy chose (a seeded jitter), against a real endpoint.
@Suite("Uploader on a manual clock", .serialized)
struct UploaderClockTests {
    static let t0 = 1_800_000_000.0

    /// The deadline the uploader sleeps until, in seconds from now, once it sleeps.
    static func nextWait(_ clock: ManualClock) async throws -> Double {
        await clock.sleepers()
        let deadline = try #require(clock.nextDeadline)
        return deadline.secondsSince1970 - clock.now.secondsSince1970
    }

    @Test func backoffsWaitOnTheInjectedClockWithTheSeededJitter() async throws {
        var faults = Faults()
        faults.failNext = 3
        faults.failStatus = 503
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(20)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: Self.t0))
        var c = Uploader.Configuration(url: endpoint.url())
        (c.token, c.maxWait, c.initialBackoff, c.maxBackoff) = ("secret", 0, 100, 1000)
        let u = try Uploader(outbox: outbox, configuration: c, clock: clock, random: SeededRandom(seed: 26))
        var random = SeededRandom(seed: 26)
        let expected = (1...3).map { Backoff(initial: 100, maximum: 1000).delay(failures: $0, using: &random) }
        let waited = try await withTimeout(60, "three backoffs and a drain") {
            async let drained: Void = u.run(drain: true)
            var waited: [Double] = []
            for _ in expected {
                waited.append(try await Self.nextWait(clock))
                clock.advance(to: clock.nextDeadline!)
            }
            await drained
            return waited
        }
        // 50-100 s, 100-200 s, 200-400 s of the clock's time: the policy's waits, none real.
        #expect(zip(waited, expected).allSatisfy { abs($0 - $1) < 1e-6 }, "\(waited) against \(expected)")
        #expect(waited[0] >= 50 && waited[0] <= 100 && waited[1] >= 100 && waited[1] <= 200)
        #expect(waited[2] >= 200 && waited[2] <= 400)
        #expect(abs(clock.now.secondsSince1970 - Self.t0 - expected.reduce(0, +)) < 1e-6)
        #expect(u.stats.retries == 3)
        #expect(u.stats.lastRetryWait == expected[2])
        #expect(try await endpoint.server.store.count() == 20)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test func retryAfterIsWaitedOnTheInjectedClock() async throws {
        var faults = Faults()
        faults.failNext = 1
        faults.failStatus = 429
        faults.retryAfter = 120
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: Self.t0))
        var c = Uploader.Configuration(url: endpoint.url())
        // The longest backoff above the server's wait: it is honoured whole (past it, it is cut to it).
        (c.token, c.maxWait, c.initialBackoff, c.maxBackoff) = ("secret", 0, 1, 300)
        let u = try Uploader(outbox: outbox, configuration: c, clock: clock)
        let wait = try await withTimeout(60, "a Retry-After and a drain") {
            async let drained: Void = u.run(drain: true)
            let wait = try await Self.nextWait(clock)
            clock.advance(to: clock.nextDeadline!)
            await drained
            return wait
        }
        // The server's two minutes, not the first backoff's second.
        #expect(wait == 120)
        #expect(u.stats.lastRetryWait == 120)
        #expect(try await endpoint.server.store.count() == 10)
        await u.shutdown()
        await endpoint.stop()
    }

    /// A batch that is not full waits until its oldest record waited `maxWait` on the clock, or
    /// until the records appended meanwhile fill it: the commit that fills it wakes the uploader,
    /// and the full batch goes before the deadline, the clock standing still.
    @Test func aBatchFillsOnTheInjectedClockAndAFullOneGoesAtOnce() async throws {
        let endpoint = try await Endpoint.start()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: Self.t0))
        var oc = Outbox.Configuration()
        oc.device = "van-1"
        let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: oc, clock: clock)
        let records = walk(7)
        try outbox.append(Array(records[..<3]))
        var c = Uploader.Configuration(url: endpoint.url())
        (c.token, c.maxWait, c.maxBatchCount) = ("secret", 5, 4)
        let u = try Uploader(outbox: outbox, configuration: c, clock: clock)
        let running = Task { await u.run() }
        try await withTimeout(60, "the uploader to fill its batches") {
            // Three records, appended at t0: they wait for five seconds of the clock.
            #expect(try await Self.nextWait(clock) == 5)
            #expect(try await endpoint.server.store.count() == 0)
            clock.advance(by: .seconds(4))
            #expect(clock.sleeperCount == 1, "a second early, the batch still waits")
            // The fourth record fills the batch: its commit wakes the uploader (no notify), and
            // the four go a second before the deadline, which the clock never reaches.
            try outbox.append([records[3]])
            while u.stats.uploaded < 4 { await Task.yield() }
            #expect(clock.now.secondsSince1970 == Self.t0 + 4)
            #expect(try await endpoint.server.store.count() == 4)
            #expect(u.stats.requests == 1)
            // One record short of a batch waits its five seconds again, as the tracker's
            // notification wakes the uploader to look.
            try outbox.append([records[4]])
            u.notify()
            #expect(try await Self.nextWait(clock) == 5)
            try outbox.append(Array(records[5...6]))
            #expect(clock.sleeperCount == 1, "three of four: the batch still waits")
            clock.advance(by: .seconds(5))
            while u.stats.uploaded < 7 { await Task.yield() }
            #expect(u.stats.requests == 2)
        }
        running.cancel()
        await running.value
        #expect(try await endpoint.server.store.trail(device: "van-1").map(\.sequence) == Array(1...7))
        #expect(clock.now.secondsSince1970 == Self.t0 + 9)
        await u.shutdown()
        await endpoint.stop()
    }
}
