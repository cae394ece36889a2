import GPSInput
import Geo
import KeepTrackTesting
import LocationService
import Synchronization
import Testing
import Tracking

/// Collects a tracker's events and calls the tracker from inside its loop, between two fixes, as
/// a control command may.
final class CallingSink: TrackerEventSink {
    let collected = Collected()
    let tracker = Mutex<Tracker?>(nil)
    let react: @Sendable (TrackerEvent, Tracker) -> Void

    init(react: @escaping @Sendable (TrackerEvent, Tracker) -> Void) { self.react = react }

    func receive(_ event: TrackerEvent) throws {
        try collected.receive(event)
        if let tracker = tracker.withLock({ $0 }) { react(event, tracker) }
    }
}

@Suite("Tracker: the location manager gated by calls")
struct TrackerGatingTests {
    @Test func standardUpdatesStartAndStopByCallsWhileRegionsGoOn() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        var c = Tracker.Configuration()
        try c.addRegions(geoJSON: fixtureBytes("walk-15min.regions.geojson"))
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        c.updatesLocationAtStart = false
        // Updates start when the walk leaves Marienplatz and stop when it enters Odeonsplatz.
        let sink = CallingSink { event, tracker in
            guard case .location(.region(let e, _)) = event else { return }
            switch e {
            case .exit("marienplatz", _): tracker.startUpdatingLocation()
            case .enter("odeonsplatz", _): tracker.stopUpdatingLocation()
            default: break
            }
        }
        let clock = source.logClock
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        sink.tracker.withLock { $0 = tracker }
        try await runGroup(tracker)

        let events = sink.collected.locations
        let delivered = events.compactMap { if case .location(let l) = $0 { l.timestamp } else { nil } }
        // The fixes that decided the two transitions.
        let decided = { (wanted: String) in
            events.first { if case .region(let r, _) = $0 { "\(r)".hasPrefix(wanted) } else { false } }
                .flatMap { if case .region(_, let at) = $0 { at.timestamp } else { nil } }
        }
        let leaves = try #require(decided(#"exit("marienplatz""#))
        let enters = try #require(decided(#"enter("odeonsplatz""#))
        // From the fix after the one that left (the call came with its region event), to the one
        // that entered (its location is decided before its region event).
        #expect(delivered.first.map { $0 > leaves } == true)
        #expect(delivered.last == enters)
        #expect(delivered.count > 100)
        // Regions went on throughout: every transition of the walk.
        let transitions = events.compactMap { e -> String? in
            guard case .region(let r, _) = e else { return nil }
            if case .state = r { return nil }
            return "\(r)"
        }
        #expect(
            transitions == [
                #"exit("marienplatz", time: 1715679045.0)"#, #"enter("odeonsplatz", time: 1715679376.0)"#,
                #"exit("odeonsplatz", time: 1715679545.0)"#, #"enter("hofgarten", time: 1715679632.0)"#,
                #"exit("hofgarten", time: 1715679742.0)"#,
            ])
    }
}
