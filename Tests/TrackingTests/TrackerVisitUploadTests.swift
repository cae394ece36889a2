import Foundation
import Formats
import GPSInput
import Geo
import KeepTrackTesting
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import Tracking
import Upload

/// Issue 27, items 3 and 4 end to end: the night log replayed with visits on and uploaded; the
/// endpoint stores the device's visits and trips, and its own stops and trips, computed from the
/// stored points, agree with them.
@Suite("Tracker: visits and trips uploaded, and the endpoint's stops", .serialized)
struct TrackerVisitUploadTests {
    @Test(arguments: StoreKind.allCases) func theEndpointsStopsAndTripsAgreeWithTheDevicesVisits(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let source = NMEALogSource(options: .init(path: fixturePath("visits-night.nmea.gz")))
        var c = Tracker.Configuration()
        c.visits = VisitDetector.Configuration()
        c.launchAtFirstFix = true
        c.deadlineTimer = false
        var u = Uploader.Configuration(url: endpoint.url())
        u.token = "secret"
        c.upload = .init(outboxPath: dir + "/outbox.sqlite", uploader: u)
        let sink = Collected()
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: source.logClock)
        try await runGroup(tracker)
        #expect(try tracker.outbox!.stats().pending == 0)

        var visits: [Visit] = []
        var trips: [Trip] = []
        for event in sink.locations {
            if case .visit(let v, _) = event { visits.append(v) }
            if case .trip(let t, _) = event { trips.append(t) }
        }
        // The night: restaurant, home, bar, home (still there at the end of the log).
        let departed = visits.filter { $0.departure != nil }
        let open = visits.filter { $0.departure == nil }.last!
        #expect(departed.count == 3 && trips.count == 3)

        // Stored as sent: each visit and trip event is a record with its span, in order.
        let device = tracker.outbox!.device
        let stored = try await endpoint.server.store.trail(device: device).filter { $0.kind.isVisitOrTrip }
        #expect(stored.count == visits.count + trips.count)
        let storedVisits: [TrailRecord] = stored.filter { $0.kind == TrailRecord.Kind.visit }
        let storedTrips: [TrailRecord] = stored.filter { $0.kind == TrailRecord.Kind.trip }
        let storedDepartures: [Double?] = storedVisits.map { $0.span?.end }
        #expect(storedDepartures == visits.map(\.departure))
        for (record, trip) in zip(storedTrips, trips) {
            #expect(record.time == trip.start && record.span?.end == trip.end)
            #expect(abs((record.span?.distance ?? 0) - trip.distance) < 0.1)
            #expect(record.span?.maximumSpeed.map { abs($0 - trip.maximumSpeed) < 0.001 } == true)
        }

        // The endpoint's own, from the stored points: the same visits and trips.
        let report = try await endpoint.server.store.stops(device: device)
        #expect(report.stops.count == departed.count + 1)
        for (stop, visit) in zip(report.stops, departed + [open]) {
            #expect(stop.arrival == visit.arrival)
            #expect(stop.departure == visit.departure)
            // The open visit's centre as the device reported it at arrival, from its first 3 minutes; the
            // endpoint's from all its fixes to the end of the log.
            #expect(Geodesy.distance(stop.coordinate, visit.coordinate) < (visit.departure == nil ? 20 : 0.5))
        }
        #expect(report.trips.count == trips.count)
        for (mine, theirs) in zip(report.trips, trips) {
            #expect(mine.start == theirs.start && mine.end == theirs.end)
            #expect(abs(mine.distance - theirs.distance) < 1)
        }
        await endpoint.stop()
    }
}
