import Foundation
import Formats
import GPSInput
import Geo
import KeepTrackTesting
import LocationService
import Synchronization
import Testing
import TrackServerTesting
import Upload

@testable import Tracking

@Suite("Outbox group commits")
struct OutboxGroupCommitTests {
    static let record = TrailRecord(device: "d", sequence: 0, kind: .location, region: nil, time: 0, latitude: 48,
                                    longitude: 11, altitude: nil, horizontalAccuracy: 5, verticalAccuracy: nil,
                                    speed: nil, course: nil)

    /// (records added at these times, with these settings) -> whether each add made the group due.
    @Test(arguments: [
        (maxRecords: 100, maxDelay: 10.0, times: [0.0, 1, 5, 9.9, 10], due: [false, false, false, false, true]),
        (maxRecords: 3, maxDelay: 10.0, times: [0.0, 1, 2], due: [false, false, true]),
        (maxRecords: 100, maxDelay: 0.0, times: [0.0], due: [true]),
        (maxRecords: 1, maxDelay: 10.0, times: [0.0], due: [true]),
        // A clock that went back (a replay restarted): due at once.
        (maxRecords: 100, maxDelay: 10.0, times: [50.0, 40], due: [false, true]),
    ])
    func aGroupIsDueAtItsSizeOrItsOldestRecordsAge(
        _ c: (maxRecords: Int, maxDelay: Double, times: [Double], due: [Bool])) {
        var group = OutboxGroupCommit(maxRecords: c.maxRecords, maxDelay: c.maxDelay)
        #expect(c.times.map { group.add(Self.record, at: $0) } == c.due)
    }

    @Test func takingEmptiesTheGroupAndTheFallbackIsTwiceTheDelayAfterTheOldest() {
        var group = OutboxGroupCommit(maxRecords: 100, maxDelay: 10)
        #expect(group.fallbackDeadline == nil)
        _ = group.add(Self.record, at: 100)
        _ = group.add(Self.record, at: 104)
        #expect(group.fallbackDeadline == 120)
        #expect(!group.isDue(at: 109))
        #expect(group.isDue(at: 110))
        #expect(group.take().count == 2)
        #expect(group.isEmpty && group.fallbackDeadline == nil && !group.isDue(at: 1000))
    }

    /// Replays the walk (895 locations, 5 transitions; one fix a second of log time) with uploads,
    /// and reads the outbox's last sequence number at every location the sink receives: the
    /// number of distinct values is the number of commits seen.
    static func replay(commitWithin: Double) async throws -> (commits: Int, lagging: Int, inStep: Int, stored: Int) {
        let endpoint = try await Endpoint.start()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var (source, c) = try walkWithUploads(to: endpoint, outboxIn: dir)
        c.upload!.commitWithin = commitWithin
        let clock = source.logClock
        let outbox = Mutex<Outbox?>(nil)
        // (log time, records decided so far, last sequence committed) at each location.
        let seen = Mutex<[(time: Double, decided: Int, committed: Int64)]>([])
        let decided = Mutex(0)
        let sink = ClosureSink { event in
            guard case .location(let e) = event else { return }
            switch e {
            case .location, .region(.enter, _), .region(.exit, _), .region(.dwell, _): decided.withLock { $0 += 1 }
            default: return
            }
            guard case .location(let l) = e, let box = outbox.withLock({ $0 }) else { return }
            let last = try box.stats().lastSequence
            seen.withLock { $0.append((l.timestamp, decided.withLock { $0 }, last)) }
        }
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        outbox.withLock { $0 = tracker.outbox }
        try await runGroup(tracker)
        let samples = seen.withLock { $0 }
        // Records decided more than `commitWithin` (+ one fix) before a location, not committed at it.
        var lagging = 0
        for s in samples {
            let due = samples.filter { $0.time < s.time - commitWithin - 1 }.last?.decided ?? 0
            if s.committed < Int64(due) { lagging += 1 }
        }
        let stored = try await endpoint.server.store.trail(device: tracker.outbox!.device).count
        await endpoint.stop()
        let inStep = samples.filter { $0.committed == Int64($0.decided) }.count
        return (Set(samples.map(\.committed)).count, lagging, inStep, stored)
    }

    @Test func aReplayCommitsInGroupsOfTenSecondsAndLosesNothing() async throws {
        let run = try await Self.replay(commitWithin: 10)
        // 900 records decided one a second: about one commit in ten seconds, never later.
        #expect(run.commits < 100)
        #expect(run.commits > 50)
        #expect(run.lagging == 0)
        #expect(run.stored == 900)
    }

    @Test func commitWithinZeroCommitsEveryRecordBeforeItIsReported() async throws {
        let run = try await Self.replay(commitWithin: 0)
        #expect(run.commits >= 895)
        // Every record committed by the time its location is reported.
        #expect(run.inStep == 895)
        #expect(run.lagging == 0)
        #expect(run.stored == 900)
    }
}
