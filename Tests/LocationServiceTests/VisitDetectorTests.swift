import Foundation
import Geo
import Testing

@testable import LocationService

/// A synthetic 1 Hz trail built segment by segment, with a receiver's wander from a seeded generator.
struct SyntheticTrail {
    static let start = 1_741_993_200.0  // 2025-03-14 23:00:00 UTC
    static let place = Coordinate(latitude: 48.1374, longitude: 11.5755)
    static let metresPerDegree = Geodesy.meanRadius * .pi / 180

    var samples: [VisitDetector.Sample] = []
    var time = start
    /// Where the device truly is.
    var position = place
    /// The receiver's error east and north, in metres: a Gauss-Markov wander (τ about 30 s).
    var error = (x: 0.0, y: 0.0)
    var accuracy = 8.0
    /// How much of the error carries over from one second to the next: 0.967 is a Gauss-Markov wander
    /// with τ about 30 s (a receiver's), 0 white noise.
    var correlation = 0.967
    /// Whether fixes report a speed (a receiver's Doppler speed); without, their speed is -1.
    var reportsSpeed = true
    var random: SeededRandom

    init(seed: UInt64 = 27) { random = SeededRandom(seed: seed) }

    /// SplitMix64, then Box-Muller: a standard normal number.
    mutating func gaussian() -> Double {
        func next() -> Double { Double(random.next() >> 11) / Double(1 << 53) }
        return (-2 * log(max(next(), 1e-300))).squareRoot() * cos(2 * .pi * next())
    }

    static func offset(_ c: Coordinate, east: Double, north: Double) -> Coordinate {
        Coordinate(
            latitude: c.latitude + north / metresPerDegree,
            longitude: c.longitude + east / (metresPerDegree * cos(c.latitude * .pi / 180)))
    }

    /// One fix now at the true position plus the error (and `extra` metres east), then a second passes.
    mutating func fix(speed: Double, extra: Double = 0) {
        let sigma = accuracy / 2.squareRoot()
        let phi = correlation
        let k = (1 - phi * phi).squareRoot()
        error = (phi * error.x + k * sigma * gaussian(), phi * error.y + k * sigma * gaussian())
        samples.append(
            .init(
                time: time, coordinate: Self.offset(position, east: error.x + extra, north: error.y),
                horizontalAccuracy: accuracy, speed: reportsSpeed ? speed : -1))
        time += 1
    }

    /// Stays for `seconds`, wandering, with a standstill's small non-zero speeds.
    mutating func stay(_ seconds: Int) {
        for _ in 0..<seconds { fix(speed: abs(gaussian()) * 0.3) }
    }

    /// Stays for `seconds` as a receiver with static hold reports it: the position frozen where the
    /// stop began, the speed 0.
    mutating func hold(_ seconds: Int) {
        let held = Self.offset(position, east: error.x, north: error.y)
        for _ in 0..<seconds {
            samples.append(
                .init(time: time, coordinate: held, horizontalAccuracy: accuracy, speed: reportsSpeed ? 0 : -1))
            time += 1
        }
    }

    /// A multipath burst: `seconds` of fixes jumped `metres` east.
    mutating func burst(_ seconds: Int, metres: Double) {
        for _ in 0..<seconds { fix(speed: 2.5, extra: metres) }
    }

    /// Moves `metres` on `bearing` at `speed`.
    mutating func move(_ metres: Double, bearing: Double = 90, speed: Double = 12) {
        let from = position
        let steps = Int((metres / speed).rounded(.up))
        for i in 1...steps {
            position = Geodesy.destination(from: from, bearing: bearing, distance: metres * Double(i) / Double(steps))
            fix(speed: speed)
        }
    }

    /// No fixes for `seconds`; the device moves `metres` meanwhile.
    mutating func hole(_ seconds: Double, moving metres: Double = 0, bearing: Double = 90) {
        time += seconds
        if metres > 0 { position = Geodesy.destination(from: position, bearing: bearing, distance: metres) }
    }
}

extension VisitDetector {
    /// Every decision over `samples`, in order.
    mutating func decisions(_ samples: [Sample]) -> [Decision] {
        samples.flatMap { Array(process($0)) }
    }
}

extension Array where Element == VisitDetector.Decision {
    var arrivals: [Visit] { compactMap { if case .arrival(let v) = $0 { v } else { nil } } }
    var departures: [Visit] { compactMap { if case .departure(let v) = $0 { v } else { nil } } }
    var trips: [Trip] { compactMap { if case .trip(let t) = $0 { t } else { nil } } }
}

@Suite("Visit detector")
struct VisitDetectorTests {
    @Test func aStayOfTenMinutesIsOneVisitFromItsFirstFixToItsLastFixInside() {
        var trail = SyntheticTrail()
        trail.stay(600)
        let lastInside = trail.time - 1
        trail.move(2000)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 1)
        #expect(decisions.arrivals.first?.arrival == SyntheticTrail.start)
        #expect(decisions.arrivals.first?.departure == nil)
        #expect(decisions.departures.count == 1)
        #expect(decisions.departures.first?.arrival == SyntheticTrail.start)
        // Leaving at 12 m/s, the first fix is 12 m on: still inside a 50 m circle for a few more.
        let departure = decisions.departures.first?.departure ?? 0
        #expect(departure >= lastInside && departure <= lastInside + 5)
        let visit = decisions.departures.first!
        #expect(Geodesy.distance(visit.coordinate, SyntheticTrail.place) < 10)
        #expect(visit.horizontalAccuracy > 1 && visit.horizontalAccuracy < 15)
        #expect(detector.currentVisit == nil)
    }

    @Test func anArrivalIsReportedOnceTheStayHasLastedTheMinimumDuration() {
        var trail = SyntheticTrail()
        trail.stay(400)
        var detector = VisitDetector()
        let reportedAt = trail.samples.firstIndex { !detector.process($0).isEmpty }
        #expect(reportedAt == 180)
        #expect(detector.currentVisit?.arrival == SyntheticTrail.start)
    }

    @Test(arguments: [20, 60, 99, 150, 165])
    func aStopShorterThanTheMinimumDurationIsNoVisit(seconds: Int) {
        var trail = SyntheticTrail()
        trail.stay(600)
        trail.move(1500)
        trail.stay(seconds)
        trail.move(1500)
        trail.stay(600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 2)
        #expect(decisions.trips.count == 1)
        #expect(decisions.trips.first.map { abs($0.distance - 2900) < 150 } == true)
    }

    @Test(arguments: [30, 60, 99, 120])
    func aWalkersWaitAtACrossingIsNoVisit(seconds: Int) {
        var trail = SyntheticTrail()
        trail.stay(600)
        trail.move(400, speed: 1.4)
        trail.stay(seconds)
        trail.move(400, speed: 1.4)
        trail.stay(600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 2)
        #expect(decisions.trips.count == 1)
    }

    @Test(arguments: [(metres: 20.0, seconds: 3), (40, 5), (60, 8), (60, 30), (120, 45), (500, 59)])
    func aMultipathBurstAtAStandstillNeitherEndsTheVisitNorStartsATrip(metres: Double, seconds: Int) {
        var trail = SyntheticTrail()
        trail.stay(300)
        for _ in 0..<4 {
            trail.burst(seconds, metres: metres)
            trail.stay(300)
        }
        trail.move(1500)
        trail.stay(300)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 2)
        #expect(decisions.departures.count == 1)
        #expect(decisions.departures.first?.arrival == SyntheticTrail.start)
        #expect(decisions.trips.count == 1)
        #expect(decisions.departures.first.map { Geodesy.distance($0.coordinate, SyntheticTrail.place) < 15 } == true)
    }

    @Test(arguments: [5.0, 15.0, 30.0, 65.0])
    func aReceiversWanderAtItsAccuracyStaysOneVisit(accuracy: Double) {
        var trail = SyntheticTrail(seed: 7)
        trail.accuracy = accuracy
        trail.stay(3 * 3600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 1)
        #expect(decisions.departures.isEmpty)
        #expect(detector.currentVisit.map { Geodesy.distance($0.coordinate, SyntheticTrail.place) < accuracy } == true)
    }

    // Fixes a second apart around the hole: 3,599 s without fixes is a gap of 3,600 s, the maximum.
    @Test(arguments: [60.0, 600, 1800, 3599])
    func aHoleInsideAVisitDoesNotSplitItWhenTheNextFixIsAtTheSamePlace(hole: Double) {
        var trail = SyntheticTrail()
        trail.stay(300)
        trail.hole(hole)
        trail.stay(300)
        let lastInside = trail.time - 1
        trail.move(1500)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 1)
        #expect(decisions.departures.count == 1)
        #expect(decisions.departures.first?.arrival == SyntheticTrail.start)
        #expect(decisions.departures.first.map { $0.departure! >= lastInside } == true)
    }

    @Test func aHoleLongerThanTheMaximumGapEndsTheVisitAtItsLastFix() {
        var trail = SyntheticTrail()
        trail.stay(300)
        let lastFix = trail.time - 1
        trail.hole(3700)
        let restart = trail.time
        trail.stay(300)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.map(\.arrival) == [SyntheticTrail.start, restart])
        #expect(decisions.departures.map(\.departure) == [lastFix])
        // Nobody knows how the device moved in the hole: no trip.
        #expect(decisions.trips.isEmpty)
    }

    @Test func aHoleThatEndsAwayFromTheVisitIsADepartureAtTheLastFixBeforeIt() {
        var trail = SyntheticTrail()
        trail.stay(300)
        let lastFix = trail.time - 1
        trail.hole(1200, moving: 5000)
        trail.stay(600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.departures.map(\.departure) == [lastFix])
        #expect(decisions.arrivals.count == 2)
        #expect(decisions.trips.map(\.start) == [lastFix])
        #expect(decisions.trips.first.map { abs($0.distance - 5000) < 50 } == true)
    }

    @Test(arguments: [(hole: 90.0, metres: 1000.0), (300, 1200), (900, 600)])
    func aHoleWhileMovingIsNoVisit(hole: Double, metres: Double) {
        var trail = SyntheticTrail()
        trail.stay(600)
        trail.move(1000)
        trail.hole(hole, moving: metres)
        trail.move(1000)
        trail.stay(600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 2)
        #expect(decisions.trips.count == 1)
    }

    @Test func aTripRunsFromTheDepartureToTheArrivalAlongItsFixes() {
        var trail = SyntheticTrail(seed: 3)
        trail.accuracy = 4
        trail.stay(600)
        trail.move(2000, bearing: 0, speed: 10)
        trail.move(1000, bearing: 90, speed: 20)
        let arrivalAround = trail.time
        trail.stay(600)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        let trip = try! #require(decisions.trips.first)
        let (left, arrived) = (decisions.departures[0], decisions.arrivals[1])
        #expect(trip.start == left.departure)
        #expect(trip.end == arrived.arrival)
        // The stay's first fix may be on the approach: within twice the radius, 5 s at 20 m/s.
        #expect(abs(trip.end - arrivalAround) <= 6)
        // 3,000 m, less what lies inside the circles at both ends, plus noise.
        #expect(trip.distance > 2800 && trip.distance < 3100)
        #expect(trip.duration > 200 && trip.duration < 260)
        #expect(abs(trip.averageSpeed - trip.distance / trip.duration) < 1e-9)
        #expect(trip.maximumSpeed == 20)
        #expect(Geodesy.distance(trip.startCoordinate, SyntheticTrail.place) < 60)
        #expect(Geodesy.distance(trip.endCoordinate, trail.position) < 60)
        // The trip comes with the arrival that ends it, before it.
        var replay = VisitDetector()
        let order = replay.decisions(trail.samples).map { decision -> String in
            switch decision {
            case .arrival: "arrival"
            case .departure: "departure"
            case .trip: "trip"
            }
        }
        #expect(order == ["arrival", "departure", "trip", "arrival"])
    }

    @Test func aDepartureAndTheArrivalItLeadsToComeFromOneFixInOrder() {
        // Departing takes longer than arriving: the fix that confirms the departure from A also makes
        // the stay at B long enough.
        var configuration = VisitDetector.Configuration()
        configuration.departureDuration = 300
        var trail = SyntheticTrail()
        trail.stay(600)
        trail.move(600)
        trail.stay(600)
        var detector = VisitDetector(configuration: configuration)
        let locations = trail.samples.map {
            Location(
                coordinate: $0.coordinate, horizontalAccuracy: $0.horizontalAccuracy, speed: $0.speed,
                timestamp: $0.time)
        }
        let both = locations.map { detector.process($0) }.filter { $0.departure != nil }
        try! #require(both.count == 1)
        #expect(both[0].trip != nil && both[0].arrival != nil)
        let kinds = both[0].map { decision -> String in
            switch decision {
            case .arrival: "arrival"
            case .departure: "departure"
            case .trip: "trip"
            }
        }
        #expect(kinds == ["departure", "trip", "arrival"])
        #expect(both[0].trip?.start == both[0].departure?.departure)
        #expect(both[0].trip?.end == both[0].arrival?.arrival)
    }

    @Test func aVisitAcrossMidnightIsOneVisit() {
        var trail = SyntheticTrail()
        trail.time = 1_742_082_600  // 2025-03-15 23:50 UTC
        trail.stay(1800)
        trail.move(1500)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.departures.count == 1)
        #expect(decisions.departures.first?.arrival == 1_742_082_600)
        #expect(decisions.departures.first.map { $0.duration! >= 1799 } == true)
    }

    @Test func aVisitStillOpenAtTheEndStaysOpenUntilTheMaximumGapHasPassed() {
        var trail = SyntheticTrail()
        trail.move(1000)
        trail.stay(900)
        let lastFix = trail.time - 1
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.arrivals.count == 1)
        #expect(decisions.departures.isEmpty)
        #expect(detector.currentVisit?.departure == nil)
        #expect(detector.currentVisit?.fixCount ?? 0 >= 890)
        #expect(detector.finish(at: lastFix + 600).isEmpty)
        #expect(detector.currentVisit != nil)
        let finished = detector.finish(at: lastFix + 3601)
        #expect(finished.departure?.departure == lastFix)
        #expect(detector.currentVisit == nil)
    }

    @Test func theRadiusAdaptsToTheFixesAccuracy() {
        var detector = VisitDetector()
        var good = SyntheticTrail()
        good.accuracy = 5
        good.stay(10)
        var poor = SyntheticTrail()
        poor.accuracy = 80
        poor.stay(10)
        _ = detector.decisions(good.samples)
        #expect(detector.radius(of: detector.stay!) == 50)
        detector = VisitDetector()
        _ = detector.decisions(poor.samples)
        #expect(detector.radius(of: detector.stay!) == 160)
        var fixed = VisitDetector.Configuration()
        fixed.radius = 30
        detector = VisitDetector(configuration: fixed)
        _ = detector.decisions(poor.samples)
        #expect(detector.radius(of: detector.stay!) == 30)
    }

    @Test(arguments: [
        (name: "worse than the maximum accuracy", accuracy: 250.0, offset: 0.0),
        ("not after the last fix", 5, -10),
        ("at the same time as the last fix", 5, -1),
    ])
    func aFixThatIsUnusableIsIgnored(name: String, accuracy: Double, offset: Double) {
        var trail = SyntheticTrail()
        trail.stay(100)
        var detector = VisitDetector()
        _ = detector.decisions(trail.samples)
        let before = detector.stay
        let far = SyntheticTrail.offset(SyntheticTrail.place, east: 5000, north: 0)
        let decided = detector.process(.init(time: trail.time + offset, coordinate: far, horizontalAccuracy: accuracy))
        #expect(decided.isEmpty)
        #expect(detector.stay == before)
        #expect(detector.outsideSince == nil)
    }

    @Test func aPointWithoutAccuracyCountsAsTheUnknownAccuracy() {
        // Points stored without an accuracy, every 30 s as a phone app sends them.
        var detector = VisitDetector()
        var decisions: [VisitDetector.Decision] = []
        for i in 0..<20 {
            let c = SyntheticTrail.offset(SyntheticTrail.place, east: Double(i % 3) * 5, north: 0)
            decisions += detector.process(
                .init(
                    time: SyntheticTrail.start + Double(i) * 30, coordinate: c,
                    horizontalAccuracy: -1))
        }
        #expect(decisions.arrivals.map(\.arrival) == [SyntheticTrail.start])
        #expect(detector.radius(of: detector.stay!) == 50)
    }
}
