import Foundation
import Synchronization
import Formats
import GPSInput
import Geo
import KeepTrackTesting
import LocationService
import Testing
import TrackServerTesting

@testable import Tracking

@Suite("Tracker: stored regions at scale")
struct TrackerRegionStateTests {
    /// The walk's 3 regions and 5,000 far away, stored; the walk replayed through a tracker on log time.
    @Test func farRegionsSettleSilentlyAnswerWhenAskedAndTheStatesAreSaved() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = RegionStore(directory: dir)
        var regions = try RegionDefinition.parseGeoJSON(fixtureBytes("walk-15min.regions.geojson")).map {
            try Region($0)
        }
        for i in 0..<5_000 {
            regions.append(
                try Region(
                    id: "far\(i)",
                    center: Coordinate(
                        latitude: -50 + Double(i % 100),
                        longitude: -170 + Double(i / 100) * 3),
                    radius: 300))
        }
        try store.saveRegions(regions)
        var c = Tracker.Configuration()
        c.regionStore = store
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        let clock = source.logClock
        let sink = Collected()
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        #expect(tracker.state(ofRegion: "far7") == .unknown)
        try await runGroup(tracker)

        let states = sink.locations.compactMap { e -> String? in
            if case .region(.state(let id, _), _) = e { id } else { nil }
        }
        // The first states of the regions near the walk; none of the 5,000 far away.
        #expect(states == ["marienplatz", "odeonsplatz", "hofgarten"])
        #expect(tracker.state(ofRegion: "far7") == .outside)
        #expect(tracker.state(ofRegion: "hofgarten") == .outside)
        #expect(tracker.state(ofRegion: "nowhere") == nil)
        // The control socket answers the same.
        let socket = try ControlSocket(path: dir + "/control.sock", tracker: tracker)
        #expect(socket.answer("state far7") == #"{"region":"far7","state":"outside"}"#)
        #expect(socket.answer("state nowhere").contains("no monitored region with id nowhere"))
        // The states on disk are the last ones (the walk ends outside every region).
        #expect(try store.savedState(of: "marienplatz") == .outside)
        #expect(try store.loadMonitor().insideRegions.isEmpty)
    }

    /// A thousand regions the walk starts inside (and leaves the smaller), 5,000 far away: one
    /// `state` event per region inside and none for the others, and `region-states.json` written
    /// once for the first fix's thousand first states (it was written once per event), at most
    /// once a second after that, never more than the inside set. The file's writes are counted as
    /// the sink sees it between events: each write replaces it (a new inode and change time).
    @Test func theStatesAreWrittenOncePerBurstAndAtMostOnceASecond() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = RegionStore(directory: dir)
        let start = Coordinate(latitude: 48.137366333, longitude: 11.575408667)
        var regions: [Region] = []
        for i in 0..<1_000 { regions.append(try Region(id: "home\(i)", center: start, radius: 150 + Double(i))) }
        for i in 0..<5_000 {
            regions.append(
                try Region(
                    id: "far\(i)",
                    center: Coordinate(
                        latitude: -50 + Double(i % 100),
                        longitude: -170 + Double(i / 100) * 3),
                    radius: 300))
        }
        try store.saveRegions(regions)
        var c = Tracker.Configuration()
        c.regionStore = store
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        let clock = source.logClock
        let sink = StatesFileWatch(path: dir + "/region-states.json", now: { clock.now.secondsSince1970 })
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        try await runGroup(tracker)

        let seen = sink.seen.withLock { $0 }
        let states = seen.filter(\.isState)
        // One state event per region inside at the first fix, none for the far ones.
        #expect(states.count == 1_000)
        #expect(Set(states.map(\.time)).count == 1)
        // The thousand first states: the file changed at most once while they were reported.
        #expect(Set(states.map(\.file)).count <= 2)
        // At most once a second on the log's clock (and once at the end).
        let writes = Set(seen.compactMap(\.file)).count
        let seconds = (seen.last?.time ?? 0) - (seen.first?.time ?? 0)
        #expect(writes >= 2)
        #expect(Double(writes) <= seconds + 2)
        // The walk leaves the smaller ones: what is on disk at the end is the tracker's inside set.
        let insideAtEnd = (0..<1_000).map { "home\($0)" }.filter { tracker.state(ofRegion: $0) == .inside }
        #expect(tracker.state(ofRegion: "home0") == .outside)
        #expect(!insideAtEnd.isEmpty && insideAtEnd.count < 1_000)
        #expect(try store.loadMonitor().insideRegions.map(\.id).sorted() == insideAtEnd.sorted())
    }
}

/// Notes, at each event, the identity of the states file (inode and change time; `nil` while it
/// does not exist) and the log time.
final class StatesFileWatch: TrackerEventSink {
    struct Seen: Sendable {
        var isState: Bool
        var time: Double
        var file: [Int]?
    }
    let path: String
    let now: @Sendable () -> Double
    let seen = Mutex<[Seen]>([])

    init(path: String, now: @escaping @Sendable () -> Double) {
        self.path = path
        self.now = now
    }

    func receive(_ event: TrackerEvent) throws {
        var info = stat()
        let file =
            stat(path, &info) == 0
            ? [Int(info.st_ino), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)] : nil
        let isState: Bool
        if case .location(.region(.state, _)) = event { isState = true } else { isState = false }
        let time = now()
        seen.withLock { $0.append(Seen(isState: isState, time: time, file: file)) }
    }
}
