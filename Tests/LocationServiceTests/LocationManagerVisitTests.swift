import Geo
import Testing

@testable import LocationService

/// Visit monitoring in the manager: the detector runs on the fixes significant changes and regions
/// take, with or without standard updates and while suspended, and an open visit stays open at the
/// end of the input.
@Suite("Location manager: visits")
struct LocationManagerVisitTests {
    static let start = 1_767_225_600.0  // 2026-01-01T00:00:00Z
    static let home = Coordinate(latitude: 48.137154, longitude: 11.576124)

    /// 1 Hz: 10 minutes at home, 3 km east at 10 m/s, then 10 minutes there until the input ends.
    static func trail() -> [Fix] {
        var fixes: [Fix] = []
        var t = start
        var travelled = 0.0
        func fix(speed: Double) {
            let c = Geodesy.destination(from: home, bearing: 90, distance: travelled)
            fixes.append(
                Fix(
                    time: GNSSTime(nanosecondsSince1970: Int64(t) * 1_000_000_000, fractionDigits: 0),
                    coordinate: c, speed: speed, course: 90, mode: .threeD, horizontalAccuracy: 5))
            t += 1
        }
        for _ in 0..<600 { fix(speed: 0) }
        for _ in 0..<300 {
            travelled += 10
            fix(speed: 10)
        }
        for _ in 0..<600 { fix(speed: 0) }
        return fixes
    }

    enum Mode: CaseIterable {
        case withStandardUpdates, visitsAlone, suspended
    }

    /// The visit and trip events, in order, with the time of the fix that decided each.
    static func visitEvents(_ mode: Mode, visits: VisitDetector.Configuration? = .init()) async
        -> [(event: LocationEvent, at: Double)]
    {
        var configuration = LocationManagerConfiguration()
        configuration.visits = visits
        if mode == .visitsAlone { configuration.standardUpdates = nil }
        let source = LocationManagerGatingTests.ListSource(fixes: trail())
        let manager = LocationManager(source: source, configuration: configuration, clock: source.clock)
        if mode == .suspended { manager.setSuspended(true) }
        var out: [(LocationEvent, Double)] = []
        for await event in manager.events {
            switch event {
            case .visit(_, let at), .trip(_, let at): out.append((event, at.timestamp))
            default: break
            }
        }
        return out
    }

    @Test(arguments: Mode.allCases)
    func aTrailGivesTheArrivalTheDepartureTheTripAndTheNextArrivalStillOpen(mode: Mode) async throws {
        let events = await Self.visitEvents(mode)
        try #require(events.count == 4)
        guard case .visit(let arrived, _) = events[0].event, case .visit(let left, _) = events[1].event,
            case .trip(let trip, _) = events[2].event, case .visit(let next, _) = events[3].event
        else {
            Issue.record("not arrival, departure, trip, arrival: \(events.map(\.event))")
            return
        }
        let t0 = Self.start
        // Arrival: reported once the stay spans 3 minutes, backdated to its first fix.
        #expect(arrived.arrival == t0 && arrived.departure == nil && events[0].at == t0 + 180)
        #expect(Geodesy.distance(arrived.coordinate, Self.home) < 1)
        // Departure: the last fix at rest, reported after a minute outside the radius (50 m: 5 s on).
        let departure = try #require(left.departure)
        #expect(left.arrival == t0 && departure == t0 + 599)
        #expect(events[1].at >= departure + 60 && events[1].at <= departure + 5 + 62)
        // The trip ends at the next arrival, decided by the same fix.
        #expect(trip.start == departure && trip.end == next.arrival)
        #expect(abs(trip.distance - 3_000) < 120)
        #expect(trip.maximumSpeed == 10)
        // Arrival: the first fix at rest there, reported once the stay spans 3 minutes from its first
        // fix (on the way in, within the radius: 5 s before).
        #expect(abs(next.arrival - (t0 + 900)) <= 1)
        #expect(
            events[2].at == events[3].at && events[3].at >= next.arrival + 180 - 6 && events[3].at <= next.arrival + 180
        )
        // The input ends at the second place: the visit is still open.
        #expect(next.departure == nil)
        #expect(
            Geodesy.distance(next.coordinate, Geodesy.destination(from: Self.home, bearing: 90, distance: 3_000)) < 1)
    }

    @Test func withoutVisitMonitoringThereAreNoVisitsOrTrips() async {
        #expect(await Self.visitEvents(.withStandardUpdates, visits: nil).isEmpty)
    }

    @Test func theConfigurationIsTheDetectors() async {
        var longer = VisitDetector.Configuration()
        longer.minimumDuration = 900  // longer than either stay: no visit at all
        #expect(await Self.visitEvents(.withStandardUpdates, visits: longer).isEmpty)
    }
}
