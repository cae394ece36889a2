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
    static let record = TrailRecord(
        device: "d", sequence: 0, kind: .location, region: nil, time: 0, latitude: 48,
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
        _ c: (maxRecords: Int, maxDelay: Double, times: [Double], due: [Bool])
    ) {
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
    /// and reads the outbox's last sequence number at every location and transition the sink
    /// receives: the number of distinct values is the number of commits seen. `commitWithin` nil
    /// keeps the default.
    static func replay(commitWithin: Double?) async throws
        -> (commits: Int, lagging: Int, durable: Int, delivered: Int, stored: Int)
    {
        let endpoint = try await Endpoint.start()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var (source, c) = try walkWithUploads(to: endpoint, outboxIn: dir)
        if let commitWithin { c.upload!.commitWithin = commitWithin }
        let within = c.upload!.commitWithin
        let clock = source.logClock
        let outbox = Mutex<Outbox?>(nil)
        // (log time, records delivered so far, last sequence committed) at each record's event.
        let seen = Mutex<[(time: Double, delivered: Int, committed: Int64)]>([])
        let sink = ClosureSink { event in
            guard case .location(let e) = event, let box = outbox.withLock({ $0 }) else { return }
            let time: Double
            switch e {
            case .location(let l): time = l.timestamp
            case .region(.enter, let l), .region(.exit, let l), .region(.dwell, let l): time = l.timestamp
            default: return
            }
            let last = try box.stats().lastSequence
            seen.withLock { $0.append((time, $0.count + 1, last)) }
        }
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        outbox.withLock { $0 = tracker.outbox }
        try await runGroup(tracker)
        let samples = seen.withLock { $0 }
        // Records delivered more than `commitWithin` (+ one fix) before an event, not committed at it.
        var lagging = 0
        for s in samples {
            let due = samples.filter { $0.time < s.time - within - 1 }.last?.delivered ?? 0
            if s.committed < Int64(due) { lagging += 1 }
        }
        let stored = try await endpoint.server.store.trail(device: tracker.outbox!.device).count
        await endpoint.stop()
        // Durable when delivered: every record delivered so far, this one included, was committed.
        let durable = samples.filter { $0.committed >= Int64($0.delivered) }.count
        return (Set(samples.map(\.committed)).count, lagging, durable, samples.count, stored)
    }

    @Test func byDefaultEachFixsRecordsAreCommittedTogetherBeforeAnyIsDelivered() async throws {
        let run = try await Self.replay(commitWithin: nil)
        #expect(run.delivered == 900)
        // Every location and transition was in the outbox when the sink got it (a kill -9 at any
        // moment loses nothing that was printed)...
        #expect(run.durable == 900)
        // ... one commit a fix: each of the 5 transitions shares its fix's commit with the location.
        #expect(run.commits == 895)
        #expect(run.stored == 900)
    }

    @Test func groupedCommitsWithinTenSecondsDeliverFirstAndLoseNothingAtTheEnd() async throws {
        let run = try await Self.replay(commitWithin: 10)
        // 900 records decided one a second: about one commit in ten seconds, never later.
        #expect(run.commits < 100)
        #expect(run.commits > 50)
        #expect(run.lagging == 0)
        // The opt-in's window: most records are delivered before they are committed.
        #expect(run.durable < 200)
        #expect(run.stored == 900)
    }

    @Test func commitWithinZeroIsTheDefault() {
        let settings = Tracker.UploadSettings(
            outboxPath: "/nonexistent/outbox.sqlite",
            uploader: .init(url: "http://127.0.0.1:1/v1/locations"))
        #expect(settings.commitWithin == 0)
        #expect(UploadOptionValues().commitWithin == 0)
    }
}
