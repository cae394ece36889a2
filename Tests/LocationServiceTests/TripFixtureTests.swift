import Foundation
import GPSInput
import Geo
import KeepTrackTesting
import Testing

@testable import LocationService

/// Trip distances on the project's day fixtures against their truth (issue 36): every trip within 5 %
/// of the true way, a day's total within 3 %, with the receiver's speeds and with positions only; and a
/// phone's outliers injected into the same fixes change nothing.
@Suite("Trips against fixture truth")
struct TripFixtureTests {
    struct Truth: Decodable {
        struct TruthTrip: Decodable {
            var start: String
            var end: String
            var distance_m: Double
            var avg_speed_mps: Double
            var max_speed_mps: Double
        }
        var trips: [TruthTrip]
        var end_utc: String
    }

    static let fixtures = ["visits-night", "day-24h"]

    static func truth(_ name: String) throws -> Truth {
        try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("\(name).truth.json"))))
    }

    static func samples(_ name: String) async -> [VisitDetector.Sample] {
        var out: [VisitDetector.Sample] = []
        for await element in NMEALogSource(options: .init(path: fixturePath("\(name).nmea.gz"))) {
            if let fix = element.fix, let location = Location(fix) { out.append(.init(location)) }
        }
        return out
    }

    /// Everything the detector decides over `samples` through ``VisitDetector/add(_:_:)``, and the
    /// outliers it marked (a point still pending at the end stays out, as on the device).
    static func run(_ samples: [VisitDetector.Sample]) -> (
        decisions: [VisitDetector.Decision], verdicts: [OutlierFilter.Verdict]
    ) {
        var detector = VisitDetector()
        var decisions: [VisitDetector.Decision] = []
        var verdicts: [OutlierFilter.Verdict] = []
        for s in samples {
            if let v = detector.add(s, { decisions += $0 }) { verdicts.append(v) }
        }
        return (decisions, verdicts)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var fixture: String
        var speeds: Bool
        var testDescription: String { fixture + (speeds ? ", with the receiver's speeds" : ", positions only") }
    }

    @Test(arguments: fixtures.flatMap { f in [true, false].map { Case(fixture: f, speeds: $0) } })
    func everyTripIsWithinFivePercentOfTheTruthAndTheDayWithinThree(_ c: Case) async throws {
        let truth = try Self.truth(c.fixture)
        var samples = await Self.samples(c.fixture)
        if !c.speeds {
            samples = samples.map {
                var s = $0; s.speed = -1; return s
            }
        }
        let trips = Self.run(samples).decisions.trips
        try #require(trips.count == truth.trips.count)
        for (trip, expected) in zip(trips, truth.trips) {
            let error = (trip.distance - expected.distance_m) / expected.distance_m
            print(
                String(
                    format: "%@ trip %@: %.1f m of %.1f (%+.2f %%), start %+.1f s, end %+.1f s, "
                        + "average %.3f m/s of %.3f, maximum %.3f of %.3f", c.testDescription, expected.start,
                    trip.distance, expected.distance_m, 100 * error, trip.start - TruthTests.seconds(expected.start),
                    trip.end - TruthTests.seconds(expected.end), trip.averageSpeed, expected.avg_speed_mps,
                    trip.maximumSpeed, expected.max_speed_mps))
            #expect(abs(error) <= 0.05, "\(expected.start)")
            #expect(trip.averageSpeed <= trip.maximumSpeed)
            #expect(abs(trip.start - TruthTests.seconds(expected.start)) <= 30)
            #expect(abs(trip.end - TruthTests.seconds(expected.end)) <= 30)
        }
        let total = trips.map(\.distance).reduce(0, +)
        let expected = truth.trips.map(\.distance_m).reduce(0, +)
        print(
            String(
                format: "%@: the day's trips %.1f m of %.1f (%+.2f %%)", c.testDescription, total, expected,
                100 * (total - expected) / expected))
        #expect(abs(total - expected) <= 0.03 * expected)
    }

    /// What a phone adds to a trail: points at 0,0, cell-tower fixes of 1,500 m, single points 300 km/h
    /// away and back.
    static func phoneLike(_ samples: [VisitDetector.Sample], seed: UInt64) -> (
        trail: [VisitDetector.Sample], clean: [VisitDetector.Sample], injected: [OutlierFilter.Verdict]
    ) {
        var random = SeededRandom(seed: seed)
        var trail: [VisitDetector.Sample] = []
        var clean: [VisitDetector.Sample] = []
        var injected: [OutlierFilter.Verdict] = []
        for (i, s) in samples.enumerated() {
            let next = i + 1 < samples.count ? samples[i + 1].time : s.time + 1
            switch random.next() % 250 {
            case 0 where next - s.time > 0.5:
                // The fix, then a point with no position half-way to the next.
                trail += [
                    s,
                    VisitDetector.Sample(
                        time: s.time + 0.4, coordinate: .init(latitude: 0, longitude: 0), horizontalAccuracy: 10),
                ]
                clean.append(s)
                injected.append(.init(time: s.time + 0.4, reason: .noPosition))
            case 1 where next - s.time > 0.5:
                // A cell-tower fix 1 to 3 km away.
                let away = Geodesy.destination(
                    from: s.coordinate, bearing: Double(random.next() % 360),
                    distance: 1000 + Double(random.next() % 2000))
                trail += [s, VisitDetector.Sample(time: s.time + 0.6, coordinate: away, horizontalAccuracy: 1500)]
                clean.append(s)
                injected.append(.init(time: s.time + 0.6, reason: .inaccurate))
            case 2
            where i > 0 && i + 1 < samples.count && next - samples[i - 1].time <= 2.5
                && injected.last?.time != samples[i - 1].time:
                // This fix 300 km/h (83.3 m/s) away from the one before, both accuracies granted: it jumped.
                let dt = s.time - samples[i - 1].time
                let metres = 83.3 * dt + s.horizontalAccuracy + samples[i - 1].horizontalAccuracy
                var spike = s
                spike.coordinate = Geodesy.destination(
                    from: samples[i - 1].coordinate, bearing: Double(random.next() % 360), distance: metres)
                trail.append(spike)
                injected.append(.init(time: s.time, reason: .jump))
            default:
                trail.append(s)
                clean.append(s)
            }
        }
        return (trail, clean, injected)
    }

    @Test(arguments: fixtures)
    func aPhonesOutliersAreMarkedAndChangeNoStopTripOrDistance(_ fixture: String) async throws {
        let samples = await Self.samples(fixture)
        let (trail, clean, injected) = Self.phoneLike(samples, seed: 36)
        #expect(injected.filter { $0.reason == .noPosition }.count >= 20)
        #expect(injected.filter { $0.reason == .inaccurate }.count >= 20)
        #expect(injected.filter { $0.reason == .jump }.count >= 20)
        let withOutliers = Self.run(trail)
        let without = Self.run(clean)
        // The genuine trail has no outlier; every injected point is marked, for what it is.
        #expect(without.verdicts.isEmpty)
        #expect(withOutliers.verdicts.sorted { $0.time < $1.time } == injected)
        // And the same visits, trips and distances, to the last bit.
        #expect(withOutliers.decisions == without.decisions)
        #expect(without.decisions.trips.count == (try Self.truth(fixture)).trips.count)
    }
}
