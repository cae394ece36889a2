import Foundation
import Geo
import Testing

@testable import LocationService

/// Trip distances and speeds through receiver noise (issue 36): on synthetic trails whose true way is
/// known, with and without the receiver's speed.
@Suite("Trip distances and speeds")
struct TripFiguresTests {
    /// The one trip of `samples`.
    static func trip(_ samples: [VisitDetector.Sample]) throws -> Trip {
        var detector = VisitDetector()
        let trips = detector.decisions(samples).trips
        try #require(trips.count == 1)
        return trips[0]
    }

    /// Metres along the raw fixes of `samples` between two times: what the trips measured before.
    static func rawLength(_ samples: [VisitDetector.Sample], from: Double, to: Double) -> Double {
        let inside = samples.filter { $0.time >= from && $0.time <= to }
        return zip(inside, inside.dropFirst()).map { Geodesy.distance($0.coordinate, $1.coordinate) }.reduce(0, +)
    }

    struct Noise: CustomTestStringConvertible, Sendable {
        var correlation: Double
        var reportsSpeed: Bool
        var testDescription: String {
            (correlation == 0 ? "white noise" : "a receiver's wander (τ 30 s)")
                + (reportsSpeed ? ", with the receiver's speed" : ", positions only")
        }
    }
    static let noises = [
        Noise(correlation: 0, reportsSpeed: true), Noise(correlation: 0, reportsSpeed: false),
        Noise(correlation: 0.967, reportsSpeed: true), Noise(correlation: 0.967, reportsSpeed: false),
    ]

    @Test(arguments: noises)
    func aStraightWalkAtWalkingSpeedWithFiveMetresOfNoiseMeasuresItsTrueDistance(_ noise: Noise) throws {
        var trail = SyntheticTrail(seed: 36)
        trail.accuracy = 5
        trail.correlation = noise.correlation
        trail.reportsSpeed = noise.reportsSpeed
        trail.hold(600)
        let left = trail.time
        trail.move(1400, bearing: 60, speed: 1.4)
        let arrived = trail.time
        trail.hold(600)
        let trip = try Self.trip(trail.samples)
        print("walk, \(noise.testDescription): \(trip.distance) m of 1400, \(trip.duration) s of \(arrived - left)")
        // The receiver's speed integrates to the way; smoothed positions keep some of the noise.
        #expect(abs(trip.distance - 1400) <= (noise.reportsSpeed ? 0.01 : 0.03) * 1400)
        let slack = noise.reportsSpeed ? 2.0 : 20
        #expect(abs(trip.start - left) <= slack && abs(trip.end - arrived) <= slack)
        #expect(trip.averageSpeed <= trip.maximumSpeed)
        #expect(abs(trip.averageSpeed - 1.4) <= 0.1)
        // Along the raw fixes the same walk is far longer: the test could fail.
        if noise.correlation == 0 {
            #expect(Self.rawLength(trail.samples, from: trip.start, to: trip.end) > 1.5 * 1400)
        }
    }

    struct Stop: CustomTestStringConvertible, Sendable {
        var seconds: Int
        var drift: Bool
        var reportsSpeed: Bool
        var speed: Double
        var testDescription: String {
            "\(seconds) s \(drift ? "wandering" : "held") at \(speed) m/s"
                + (reportsSpeed ? ", with the receiver's speed" : ", positions only")
        }
    }

    /// The trip of a trail with a stop half-way along 1,600 m (none when `seconds` is 0).
    static func tripWithStop(_ stop: Stop, seconds: Int) throws -> Trip {
        var trail = SyntheticTrail(seed: 4)
        trail.reportsSpeed = stop.reportsSpeed
        trail.hold(600)
        trail.move(800, bearing: 20, speed: stop.speed)
        if stop.drift { trail.stay(seconds) } else { trail.hold(seconds) }
        trail.move(800, bearing: 20, speed: stop.speed)
        trail.hold(600)
        return try Self.trip(trail.samples)
    }

    @Test(
        arguments: [45, 90, 120].flatMap { seconds in
            [false, true].flatMap { drift in
                [true, false].flatMap { reportsSpeed in
                    [1.4, 12].map { Stop(seconds: seconds, drift: drift, reportsSpeed: reportsSpeed, speed: $0) }
                }
            }
        })
    func standingStillOnTheWayAddsNoDistance(_ stop: Stop) throws {
        // A traffic light (static hold: the position frozen, the speed 0) or a walker's wait at a
        // crossing (the receiver wandering, with a standstill's speeds of a few tenths), shorter than a
        // visit, half-way along 1,600 m; against the same trail without the stop.
        let trip = try Self.tripWithStop(stop, seconds: stop.seconds)
        let without = try Self.tripWithStop(stop, seconds: 0)
        print("stop \(stop.testDescription): \(trip.distance) m, \(without.distance) m without the stop, of 1600")
        #expect(trip.averageSpeed <= trip.maximumSpeed)
        #expect(abs(trip.distance - 1600) <= 0.05 * 1600)
        if !stop.drift {
            // A held stop draws no noise: the fixes after it are those of the trail without it.
            #expect(abs(trip.distance - without.distance) <= 3)
        } else if stop.reportsSpeed {
            // The fixes after a wandering stop have other noise: the trips differ by it, not by the stop.
            #expect(abs(trip.distance - without.distance) <= 0.01 * 1600)
        } else {
            // Without the receiver's speed, the wander adds what the smoothed velocity lets through
            // (see docs/visits.md): a quarter of a metre a second of the stop at most.
            #expect(abs(trip.distance - without.distance) <= 0.25 * Double(stop.seconds) + 0.01 * 1600)
        }
    }

    @Test func aVisitOfHoursWithDriftAndMultipathIsNoTripAndNoDistance() {
        var trail = SyntheticTrail(seed: 9)
        trail.accuracy = 15
        for _ in 0..<6 {
            trail.stay(1200)
            trail.burst(6, metres: 60)
        }
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(decisions.trips.isEmpty)
        #expect(decisions.arrivals.count == 1)
    }

    /// A random day: stays, moves at random speeds on random bearings, short stops, holes, multipath
    /// bursts, accuracies from 3 to 80 m, speeds reported or not, 1 to 10 fixes a second.
    static func randomDay(seed: UInt64) -> SyntheticTrail {
        var trail = SyntheticTrail(seed: seed)
        var random = SeededRandom(seed: seed &* 7919)
        func uniform(_ range: ClosedRange<Double>) -> Double {
            range.lowerBound + Double(random.next() >> 11) / Double(1 << 53) * (range.upperBound - range.lowerBound)
        }
        trail.stay(Int(uniform(200...1200)))
        for _ in 0..<8 {
            trail.accuracy = uniform(3...80)
            trail.correlation = uniform(0...1) < 0.3 ? 0 : 0.967
            trail.reportsSpeed = uniform(0...1) < 0.6
            let speed = uniform(0.6...40)
            for _ in 0..<Int(uniform(1...5)) {
                trail.move(uniform(50...3000), bearing: uniform(0...360), speed: speed)
                switch uniform(0...1) {
                case ..<0.2: trail.hold(Int(uniform(5...170)))
                case ..<0.4: trail.stay(Int(uniform(5...170)))
                case ..<0.5: trail.hole(uniform(5...600), moving: uniform(0...2000), bearing: uniform(0...360))
                case ..<0.6: trail.burst(Int(uniform(1...10)), metres: uniform(10...200))
                default: break
                }
            }
            trail.stay(Int(uniform(200...3000)))
        }
        return trail
    }

    @Test(arguments: 1...40)
    func theAverageSpeedIsNeverAboveTheMaximum(seed: UInt64) {
        let trail = Self.randomDay(seed: seed)
        var detector = VisitDetector()
        let decisions = detector.decisions(trail.samples)
        #expect(!decisions.trips.isEmpty)
        for trip in decisions.trips {
            #expect(trip.averageSpeed <= trip.maximumSpeed, "\(trip)")
            #expect(trip.end > trip.start && trip.distance >= 0)
        }
        // And each trip runs from the departure before it to the arrival after it.
        for (i, decision) in decisions.enumerated() {
            guard case .trip(let trip) = decision else { continue }
            guard
                case .departure(let left) = decisions[..<i].last(where: {
                    if case .departure = $0 { true } else { false }
                }),
                case .arrival(let arrived) = decisions[(i + 1)...].first(where: {
                    if case .arrival = $0 { true } else { false }
                })
            else {
                Issue.record("a trip without a departure before it and an arrival after it")
                continue
            }
            #expect(trip.start == left.departure && trip.end == arrived.arrival)
            #expect(left.arrival <= left.departure! && trip.end <= arrived.departure ?? .infinity)
        }
    }

    @Test(arguments: [true, false])
    func aDetectorStartedMidwayReachesTheSameStateAfterADeparture(reportsSpeed: Bool) {
        // The endpoint's queries start a detector at their `from` and stop reading once its state is a
        // stored one: the state must depend only on what it saw since the last standstill.
        var trail = SyntheticTrail(seed: 17)
        trail.reportsSpeed = reportsSpeed
        trail.stay(900)
        trail.move(2000, speed: 9)
        trail.stay(600)
        trail.move(700, bearing: 200, speed: 1.4)
        trail.stay(600)
        var whole = VisitDetector()
        var midway = VisitDetector()
        var met: Int?
        for (i, s) in trail.samples.enumerated() {
            let a = whole.process(s)
            if i >= 400 {
                let b = midway.process(s)
                if met != nil { #expect(a == b) }
                if met == nil && whole == midway { met = i }
            }
        }
        #expect(met.map { $0 < 900 + 240 } == true, "met at \(met.map(String.init) ?? "never")")
    }

    @Test func theDetectorsStateStaysSmall() throws {
        var trail = SyntheticTrail(seed: 2)
        trail.stay(600)
        trail.move(3000, speed: 12)
        var detector = VisitDetector()
        var largest = 0
        for s in trail.samples {
            _ = detector.process(s)
            largest = max(largest, try JSONEncoder().encode(detector).count)
        }
        print("the detector's state: \(largest) bytes of JSON at most")
        #expect(largest < 4000)
    }
}
