import Foundation
import GPSInput
import Geo
import Lifecycle
import LocationService
import Testing
import Tracking

/// As iOS wakes an app for `didVisit`: a tracker that monitors visits alone, suspended, keeps sampling
/// at its low rate and is woken by each visit's arrival and departure.
@Suite("Tracker: visits wake a suspended app")
struct TrackerVisitTests {
    /// The commute log replayed on its own clock by an app launched in the background with no
    /// background mode and only visit monitoring, sampled once a minute while suspended.
    func trackVisitsInTheBackground(_ log: String, sink: some TrackerEventSink) async throws {
        let source = NMEALogSource(options: .init(path: log))
        var c = Tracker.Configuration()
        c.standardUpdates = nil
        c.visits = VisitDetector.Configuration()
        c.modes = []
        c.startInBackground = true
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: source.logClock)
        try await tracker.run()
    }

    @Test func visitsAloneWakeASuspendedTrackerAtEachArrivalAndDeparture() async throws {
        let (dir, log) = try commuteLog()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sink = Collected()
        try await trackVisitsInTheBackground(log, sink: sink)

        // The commute: 10 minutes still, 5 minutes moving, four times in the hour.
        var visits: [(visit: Visit, at: Double)] = []
        var trips = 0
        for event in sink.locations {
            if case .visit(let v, let at) = event { visits.append((v, at.timestamp)) }
            if case .trip = event { trips += 1 }
        }
        #expect(visits.filter { $0.visit.departure == nil }.count == 4)
        #expect(visits.filter { $0.visit.departure != nil }.count == 4)
        #expect(trips == 3)

        // Suspended in between, woken by each visit event and by nothing else.
        let transitions = sink.transitions
        let wakes = transitions.filter { if case .woken = $0.reason { true } else { false } }
        #expect(wakes.allSatisfy { $0.reason == .woken(.visit) && $0.from == .suspended })
        #expect(wakes.map(\.time) == visits.map(\.at))
        #expect(transitions.filter { $0.to == .suspended }.count == wakes.count + 1)
        #expect(transitions.last?.to == .suspended)
    }

    @Test(arguments: [("visit", AppLifecycle.State.background), ("trip", .suspended)])
    func keepAliveWakesASuspendedAppForAVisitNotForATrip(event: String, to: AppLifecycle.State) {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let app = Application(policy: .ios7, modes: [], clock: clock)
        app.launch()
        app.enterBackground()
        clock.advance(to: .init(secondsSince1970: 1100))
        app.advance()
        #expect(app.state == .suspended)
        let here = Coordinate(latitude: 1, longitude: 1)
        let l = Location(coordinate: here, horizontalAccuracy: 5, timestamp: 1100)
        let e: LocationEvent =
            switch event {
            case "visit":
                .visit(
                    Visit(coordinate: here, horizontalAccuracy: 3, arrival: 900, departure: nil, fixCount: 200), at: l)
            default:
                .trip(
                    Trip(
                        start: 500, end: 900, startCoordinate: here, endCoordinate: here, distance: 0, maximumSpeed: 0),
                    at: l)
            }
        KeepAlive.apply(e, to: app)
        #expect(app.state == to)
    }
}
