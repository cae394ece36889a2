import Geo
import Testing

@testable import LocationService

let origin = Coordinate(latitude: 48.137, longitude: 11.575)

/// A location `metres` north-east-ish of the origin at `t` seconds, with accuracy `acc`.
func at(_ t: Double, metres: Double = 0, bearing: Double = 90, acc: Double = 5, course: Double = -1) -> Location {
    Location(
        coordinate: Geodesy.destination(from: origin, bearing: bearing, distance: metres), horizontalAccuracy: acc,
        course: course, timestamp: 1_700_000_000 + t)
}

extension StandardUpdateFilter {
    /// Processes a location "now" (no staleness) and returns the kinds of outcome.
    mutating func feed(_ l: Location, lag: Double = 0) -> [StandardUpdateFilter.Outcome] {
        process(l, now: l.timestamp + lag)
    }
}

func delivered(_ outcomes: [StandardUpdateFilter.Outcome]) -> Bool {
    outcomes.contains { if case .deliver = $0 { true } else { false } }
}

@Suite("Standard updates")
struct StandardUpdateFilterTests {
    @Test func deliversEveryUsableFixWithoutADistanceFilter() {
        var f = StandardUpdateFilter()
        #expect((0..<5).allSatisfy { delivered(f.feed(at(Double($0), metres: Double($0)))) })
    }

    @Test func distanceFilterMeasuresFromTheLastDeliveredLocation() {
        var c = StandardUpdateFilter.Configuration()
        c.distanceFilter = 10
        var f = StandardUpdateFilter(configuration: c)
        #expect(delivered(f.feed(at(0, metres: 0))))
        // 4 m steps: 4, 8 suppressed; 12 from the last delivered (0) → delivered.
        #expect(f.feed(at(1, metres: 4)) == [.suppress])
        #expect(f.feed(at(2, metres: 8)) == [.suppress])
        #expect(delivered(f.feed(at(3, metres: 12))))
        #expect(f.feed(at(4, metres: 16)) == [.suppress])
        #expect(delivered(f.feed(at(5, metres: 22.5))))
    }

    @Test(arguments: [
        (DesiredAccuracy.best, 5.0, true), (.best, 5.1, false), (.tenMeters, 10, true), (.tenMeters, 12, false),
        (.hundredMeters, 99, true), (.kilometer, 1500, false), (.threeKilometers, 2999, true),
        (.bestForNavigation, 500, true),
    ])
    func desiredAccuracyGatesFixes(_ accuracy: DesiredAccuracy, _ hAcc: Double, _ accepted: Bool) {
        var c = StandardUpdateFilter.Configuration()
        c.desiredAccuracy = accuracy
        var f = StandardUpdateFilter(configuration: c)
        #expect(delivered(f.feed(at(0, acc: hAcc))) == accepted)
    }

    @Test func deliversTheBestInaccurateFixWhenNoneQualifiesForTheFallbackTime() {
        var c = StandardUpdateFilter.Configuration()
        c.desiredAccuracy = .tenMeters
        c.accuracyFallback = 30
        var f = StandardUpdateFilter(configuration: c)
        #expect(f.feed(at(0, acc: 50)) == [.reject(.inaccurate(accuracy: 50, limit: 10))])
        #expect(f.feed(at(10, acc: 20)).count == 1)
        #expect(!delivered(f.feed(at(20, acc: 40))))
        // 30 s without a qualifying fix: the 20 m one (the best seen) is delivered.
        let out = f.feed(at(30, acc: 60))
        #expect(out == [.deliver(at(10, acc: 20))])
        // And the wait starts again.
        #expect(!delivered(f.feed(at(31, acc: 60))))
    }

    @Test func rejectsStaleAndOutOfOrderFixes() {
        var f = StandardUpdateFilter()
        #expect(f.feed(at(0), lag: 11) == [.reject(.stale(age: 11))])
        #expect(delivered(f.feed(at(5))))
        #expect(f.feed(at(5)) == [.reject(.outOfOrder)])
        #expect(f.feed(at(4)) == [.reject(.outOfOrder)])
    }

    @Test func rejectsImpliedSpeedOutliersButGrantsAccuracy() {
        var c = StandardUpdateFilter.Configuration()
        c.desiredAccuracy = .bestForNavigation
        var f = StandardUpdateFilter(configuration: c)
        #expect(delivered(f.feed(at(0))))
        // 1 km in 1 s: about 1000 m/s, an outlier whatever the accuracies (5 m each).
        let out = f.feed(at(1, metres: 1000))
        guard case .reject(.impliedSpeed(let v)) = out.first else {
            Issue.record("expected an implied-speed rejection, got \(out)")
            return
        }
        #expect(abs(v - 1000) < 0.01)
        #expect("\(RejectReason.impliedSpeed(metresPerSecond: v))" == "implied speed 1000 m/s")
        // 150 m in 1 s with 100 m accuracies is within the error: accepted.
        #expect(delivered(f.feed(at(2, metres: 150, acc: 100))))
    }

    @Test func timeAndHeadingTriggersFireDespiteTheDistanceFilter() {
        var c = StandardUpdateFilter.Configuration()
        c.distanceFilter = 1000
        c.timeInterval = 60
        c.headingChange = 30
        var f = StandardUpdateFilter(configuration: c)
        #expect(delivered(f.feed(at(0, course: 10))))
        #expect(f.feed(at(30, metres: 5, course: 20)) == [.suppress])
        #expect(delivered(f.feed(at(40, metres: 6, course: 45))))  // turned 35°
        #expect(f.feed(at(50, metres: 7, course: 50)) == [.suppress])
        #expect(delivered(f.feed(at(100, metres: 8, course: 50))))  // 60 s since the last delivery
        // 350° after 50°: a 60° turn across north.
        #expect(delivered(f.feed(at(101, metres: 8, course: 350))))
    }

    @Test func pausesWhenStationaryAndResumesWhenMoving() {
        var c = StandardUpdateFilter.Configuration()
        c.pauseWhenStationary = true
        c.stationaryRadius = 25
        c.stopTimeout = 300
        var f = StandardUpdateFilter(configuration: c)
        var outcomes: [StandardUpdateFilter.Outcome] = []
        for t in stride(from: 0.0, through: 400, by: 10) {
            // Wandering within 10 m of the origin.
            outcomes += f.feed(at(t, metres: t.truncatingRemainder(dividingBy: 20) / 2, bearing: t))
        }
        let paused = outcomes.firstIndex { if case .paused = $0 { true } else { false } }
        #expect(paused != nil)
        #expect(f.isPaused)
        // Nothing delivered after the pause.
        #expect(!outcomes[(paused! + 1)...].contains { if case .deliver = $0 { true } else { false } })
        let moved = f.feed(at(410, metres: 80))
        #expect(moved == [.resumed(at(410, metres: 80)), .deliver(at(410, metres: 80))])
        #expect(!f.isPaused)
    }
}

@Suite("Significant changes")
struct SignificantChangeTests {
    @Test func deliversTheFirstLocationThenFarAndLateEnoughOnes() {
        var m = SignificantChangeMonitor()
        #expect(m.process(at(0)) != nil)
        #expect(m.process(at(100, metres: 600)) == nil)  // far, too soon
        #expect(m.process(at(400, metres: 400)) == nil)  // late, not far enough
        #expect(m.process(at(400, metres: 501)) != nil)
        #expect(m.process(at(650, metres: 1200)) == nil)  // 250 s after the last one
        #expect(m.process(at(701, metres: 1200)) != nil)
    }

    @Test func distanceAndIntervalAreConfigurable() {
        var m = SignificantChangeMonitor(distance: 100, minimumInterval: 10)
        #expect(m.process(at(0)) != nil)
        #expect(m.process(at(10, metres: 100)) != nil)
    }
}
