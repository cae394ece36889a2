import Foundation
import GPSInput
import Geo
import KeepTrackTesting
import Testing

@testable import LocationService

/// The visit detector on `fixtures/visits-night.nmea.gz` (6 hours at 1 Hz across UTC midnight: drift,
/// multipath bursts, traffic lights, a tunnel, a 2-minute stop, a 30-minute hole indoors, a walker's
/// wait at a crossing, a visit still open at the end) against its truth sidecar.
@Suite("Visits against fixture truth")
struct VisitFixtureTests {
    struct Truth: Decodable {
        struct TruthVisit: Decodable {
            var name: String
            var arrival: String
            var departure: String?
            var duration_s: Double
            var lat: Double
            var lon: Double
        }
        struct TruthTrip: Decodable {
            var start: String
            var end: String
            var distance_m: Double
            var max_speed_mps: Double
        }
        struct ShortStop: Decodable {
            var name: String
            var start: String
            var duration_s: Double
        }
        var visits: [TruthVisit]
        var trips: [TruthTrip]
        var short_stops: [ShortStop]
        var end_utc: String
    }

    /// What the detector found over the whole log: the visits that ended, then the open one.
    struct Found {
        var visits: [Visit] = []
        var trips: [Trip] = []
        var arrivals: [Visit] = []
    }

    static let file = "visits-night.nmea.gz"

    static func truth() throws -> Truth {
        try JSONDecoder().decode(
            Truth.self,
            from: Data(
                contentsOf: URL(
                    fileURLWithPath:
                        fixturePath("visits-night.truth.json"))))
    }

    static func samples() async -> [VisitDetector.Sample] {
        var out: [VisitDetector.Sample] = []
        for await element in NMEALogSource(options: .init(path: fixturePath(file))) {
            if let fix = element.fix, let location = Location(fix) { out.append(.init(location)) }
        }
        return out
    }

    static func detect(_ samples: [VisitDetector.Sample], end: Double) -> Found {
        var detector = VisitDetector()
        var found = Found()
        for sample in samples {
            for decision in detector.process(sample) {
                switch decision {
                case .arrival(let v): found.arrivals.append(v)
                case .departure(let v): found.visits.append(v)
                case .trip(let t): found.trips.append(t)
                }
            }
        }
        if let departure = detector.finish(at: end).departure { found.visits.append(departure) }
        if let open = detector.currentVisit { found.visits.append(open) }
        return found
    }

    static func seconds(_ iso: String) -> Double { TruthTests.seconds(iso) }

    @Test func everyStayOfTwentyMinutesOrMoreIsFoundAsOneVisitWithinTwoMinutesAndSixtyMetres() async throws {
        let truth = try Self.truth()
        let found = Self.detect(await Self.samples(), end: Self.seconds(truth.end_utc))
        let long = truth.visits.filter { $0.duration_s >= 1200 }
        #expect(long.count == 4)
        for stay in long {
            let (arrival, departure) = (Self.seconds(stay.arrival), stay.departure.map(Self.seconds))
            let overlapping = found.visits.filter { v in
                v.arrival < (departure ?? .infinity) && (v.departure ?? .infinity) > arrival
            }
            try #require(overlapping.count == 1, "\(stay.name): \(overlapping.count) visits")
            let visit = overlapping[0]
            let centre = Geodesy.distance(visit.coordinate, Coordinate(latitude: stay.lat, longitude: stay.lon))
            print(
                "visits-night \(stay.name): arrival \(visit.arrival - arrival) s, departure "
                    + "\(departure.map { "\(visit.departure! - $0) s" } ?? "open"), centre \(centre) m, "
                    + "hAcc \(visit.horizontalAccuracy) m, fixes \(visit.fixCount)")
            #expect(abs(visit.arrival - arrival) <= 120, "\(stay.name)")
            if let departure {
                #expect(visit.departure.map { abs($0 - departure) <= 120 } == true, "\(stay.name)")
            } else {
                #expect(visit.departure == nil, "\(stay.name) is still open at the end")
            }
            #expect(centre <= 60, "\(stay.name)")
        }
    }

    @Test func noStopShorterThanTheMinimumIsReportedAsAVisit() async throws {
        let truth = try Self.truth()
        let found = Self.detect(await Self.samples(), end: Self.seconds(truth.end_utc))
        #expect(found.visits.count == truth.visits.count)
        #expect(found.arrivals.count == truth.visits.count)
        for stop in truth.short_stops {
            let start = Self.seconds(stop.start)
            let end = start + stop.duration_s
            #expect(
                !found.visits.contains { $0.arrival < end && ($0.departure ?? .infinity) > start },
                "\(stop.name) at \(stop.start), \(stop.duration_s) s")
        }
    }

    @Test func theTripsRunBetweenTheVisitsAndMeasureTheWayWithinFifteenPercent() async throws {
        let truth = try Self.truth()
        let found = Self.detect(await Self.samples(), end: Self.seconds(truth.end_utc))
        try #require(found.trips.count == truth.trips.count)
        for (trip, expected) in zip(found.trips, truth.trips) {
            let (start, end) = (Self.seconds(expected.start), Self.seconds(expected.end))
            print(
                "visits-night trip: start \(trip.start - start) s, end \(trip.end - end) s, distance "
                    + "\(trip.distance) m of \(expected.distance_m), max speed \(trip.maximumSpeed) of "
                    + "\(expected.max_speed_mps)")
            #expect(abs(trip.start - start) <= 120)
            #expect(abs(trip.end - end) <= 120)
            #expect(abs(trip.distance - expected.distance_m) <= 0.15 * expected.distance_m)
            #expect(abs(trip.maximumSpeed - expected.max_speed_mps) <= 1)
        }
        // Each trip starts where a visit ended and ends where the next began.
        for (i, trip) in found.trips.enumerated() {
            #expect(trip.start == found.visits[i].departure)
            #expect(trip.end == found.visits[i + 1].arrival)
        }
    }
}
