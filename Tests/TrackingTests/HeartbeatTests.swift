import Foundation
import Formats
import GPSInput
import Geo
import Lifecycle
import LocationService
import Testing
import Tracking
import Upload

/// Issue 29, item 4: a stationary device's latest location recorded again every interval.
@Suite("Heartbeat while stationary")
struct HeartbeatTests {
    static let parked = Location(
        coordinate: Coordinate(latitude: 48.1351, longitude: 11.5820), horizontalAccuracy: 5,
        timestamp: 1000)

    /// A heartbeat of one minute, fed on a manual clock: `steps` say what happens at each second.
    static func run(_ steps: [(at: Double, event: (Double) -> Heartbeat.Event)]) -> [(Double, Heartbeat.Action)] {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        var heartbeat = Heartbeat(interval: 60)
        var out: [(Double, Heartbeat.Action)] = []
        for step in steps {
            clock.advance(to: .init(secondsSince1970: step.at))
            let now = clock.now.secondsSince1970
            let action = heartbeat.event(step.event(now))
            if action != .none { out.append((now, action)) }
        }
        return out
    }

    /// A fix held back every second from `from` through `to`.
    static func held(_ from: Int, _ to: Int, updating: Bool = true) -> [(
        at: Double, event: (Double) -> Heartbeat.Event
    )] {
        (from...to).map { t in (Double(t), { .heldBack(now: $0, updating: updating) }) }
    }

    static func delivered(_ at: Double, _ l: Location = parked) -> (at: Double, event: (Double) -> Heartbeat.Event) {
        (at, { .delivered(l, now: $0) })
    }

    @Test func aStationaryDeviceBeatsEveryIntervalOnTheClock() {
        let beats = Self.run([Self.delivered(1000)] + Self.held(1001, 1200))
        #expect(beats.map(\.0) == [1060, 1120, 1180])
        #expect(beats.allSatisfy { $0.1 == .beat(Self.parked) })
    }

    @Test func nothingBeatsBeforeAFirstLocation() {
        #expect(Self.run(Self.held(1000, 1300)).isEmpty)
    }

    @Test func aDeliveredLocationRestartsTheInterval() {
        var moved = Self.parked
        moved.coordinate.latitude += 0.001
        moved.timestamp = 1050
        let beats = Self.run(
            [Self.delivered(1000)] + Self.held(1001, 1049) + [Self.delivered(1050, moved)]
                + Self.held(1051, 1115))
        #expect(beats.map(\.0) == [1110])
        #expect(beats.first?.1 == .beat(moved))
    }

    @Test func nothingBeatsWhileUpdatesDoNotRunAndTheFirstHeldFixAfterBeatsWhenDue() {
        let beats = Self.run([Self.delivered(1000)] + Self.held(1001, 1300, updating: false) + Self.held(1301, 1302))
        #expect(beats.map(\.0) == [1301])
    }

    @Test func aHoleInTheFixesGivesOneBeatNotABurst() {
        let beats = Self.run([Self.delivered(1000)] + Self.held(1001, 1002) + Self.held(1500, 1560))
        #expect(beats.map(\.0) == [1500, 1560])
    }

    @Test func aPauseMakesItsLocationTheOneRepeatedWithoutMovingTheDueTime() {
        var there = Self.parked
        there.coordinate.longitude += 0.0001
        there.timestamp = 1030
        let beats = Self.run([Self.delivered(1000), (1030, { _ in .paused(there) })] + Self.held(1031, 1070))
        #expect(beats.map(\.0) == [1060])
        #expect(beats.first?.1 == .beat(there))
    }

    // MARK: In a tracker

    /// The commute log (10 minutes still, 5 moving, four times) replayed on its own clock with a
    /// 50 m distance filter and a one-minute heartbeat, through an outbox in its directory.
    func replayCommute(background: Bool) async throws -> (Collected, [TrailRecord]) {
        let (dir, log) = try commuteLog()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let source = NMEALogSource(options: .init(path: log))
        var c = Tracker.Configuration()
        c.standardUpdates?.distanceFilter = 50
        c.heartbeat = 60
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        if background {
            (c.modes, c.startInBackground) = ([], true)
        }
        // Recorded only: the uploader is not run (the outbox is read at the end).
        let u = Uploader.Configuration(url: "http://127.0.0.1:9/")
        c.upload = Tracker.UploadSettings(outboxPath: dir + "/outbox.sqlite", uploader: u)
        let sink = Collected()
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: source.logClock)
        try await tracker.run()
        let records = try #require(tracker.outbox).nextBatch(maxCount: 10_000, transitionsFirst: false)
        return (sink, records)
    }

    @Test func aReplayedStopBeatsEveryMinuteAtTheLastLocationAndEachBeatIsInTheOutbox() async throws {
        let (sink, records) = try await replayCommute(background: false)
        var last: Location?
        var lastRecorded = -Double.infinity
        var beats: [Location] = []
        for event in sink.all {
            switch event {
            case .location(.location(let l)):
                (last, lastRecorded) = (l, l.timestamp)
            case .heartbeat(let b):
                let l = try #require(last)
                #expect(b.coordinate == l.coordinate && b.horizontalAccuracy == l.horizontalAccuracy)
                // On the log's clock: a minute after the last record, to the fix (one a second).
                #expect(b.timestamp - lastRecorded >= 60 && b.timestamp - lastRecorded < 61)
                lastRecorded = b.timestamp
                beats.append(b)
            default:
                break
            }
        }
        // Four stops of about 10 minutes: about nine beats each.
        #expect(beats.count >= 30 && beats.count <= 40, "\(beats.count) heartbeats")
        let stored = records.filter { $0.kind == .heartbeat }
        #expect(stored.map(\.time) == beats.map(\.timestamp))
        #expect(stored.map(\.latitude) == beats.map(\.coordinate.latitude))
        // In sequence with the locations: a heartbeat is a position, not a transition jumping ahead.
        #expect(records.map(\.sequence) == records.map(\.sequence).sorted())
    }

    @Test func aSuspendedAppDoesNotBeat() async throws {
        let (sink, _) = try await replayCommute(background: true)
        let suspended = try #require(sink.transitions.first { $0.to == .suspended }?.time)
        #expect(!sink.transitions.contains { $0.from == .suspended }, "nothing wakes it")
        let beats = sink.all.compactMap { if case .heartbeat(let l) = $0 { l.timestamp } else { nil } }
        #expect(beats.allSatisfy { $0 < suspended })
        // The same replay in the foreground beats after that time.
        let (foreground, _) = try await replayCommute(background: false)
        #expect(foreground.all.contains { if case .heartbeat(let l) = $0 { l.timestamp > suspended } else { false } })
    }
}
