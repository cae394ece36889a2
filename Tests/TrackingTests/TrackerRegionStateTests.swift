import Foundation
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
        var regions = try RegionDefinition.parseGeoJSON(fixtureBytes("walk-15min.regions.geojson")).map { try Region($0) }
        for i in 0..<5_000 {
            regions.append(try Region(id: "far\(i)", center: Coordinate(latitude: -50 + Double(i % 100),
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
        let tracker = try Tracker(source: source, configuration: c, sink: sink, now: { clock.now.secondsSince1970 })
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
}
