import Geo
import Testing

@testable import LocationService

/// A 1 Hz walk east at 1.4 m/s from `start`, with 5 m accuracy, as samples.
private func walk(_ seconds: Int, from start: Double = 1_741_993_200, speed: Double = 1.4) -> [VisitDetector.Sample] {
    (0..<seconds).map { i in
        VisitDetector.Sample(
            time: start + Double(i),
            coordinate: SyntheticTrail.offset(SyntheticTrail.place, east: speed * Double(i), north: 0),
            horizontalAccuracy: 5, speed: speed)
    }
}

extension OutlierFilter {
    /// Every point through the filter (and a held one at the end): the points that passed, in order,
    /// and the verdicts.
    mutating func run(_ samples: [VisitDetector.Sample]) -> (passed: [VisitDetector.Sample], verdicts: [Verdict]) {
        var passed: [VisitDetector.Sample] = []
        var verdicts: [Verdict] = []
        for s in samples {
            let outcome = add(s)
            passed += outcome.released
            if let v = outcome.verdict { verdicts.append(v) }
        }
        if let s = finish() { passed.append(s) }
        return (passed, verdicts)
    }
}

@Suite("Outlier filter")
struct OutlierFilterTests {
    /// A point replaced in a walk, and what the filter must say of it.
    struct Injected: CustomTestStringConvertible, Sendable {
        var name: String
        var east: Double
        var accuracy: Double
        var reason: OutlierFilter.Reason?
        var testDescription: String { name }
    }

    @Test(arguments: [
        Injected(name: "no position (0,0)", east: .nan, accuracy: 5, reason: .noPosition),
        Injected(name: "a cell-tower fix of 1,500 m", east: 300, accuracy: 1500, reason: .inaccurate),
        Injected(name: "an accuracy just worse than 200 m", east: 0, accuracy: 200.5, reason: .inaccurate),
        Injected(name: "an accuracy of 200 m", east: 0, accuracy: 200, reason: nil),
        Injected(name: "300 km/h away and back", east: 83.3, accuracy: 5, reason: .jump),
        Injected(name: "1,000 km/h away and back", east: 278, accuracy: 5, reason: .jump),
        Injected(
            name: "a 35 m multipath jump (below 180 km/h after the accuracies)", east: 35, accuracy: 5, reason: nil),
    ])
    func aPointIsMarkedForWhatItIsAndEveryOtherPointPasses(_ injected: Injected) {
        var samples = walk(60)
        let i = 30
        let truth = samples[i]
        samples[i].horizontalAccuracy = injected.accuracy
        samples[i].coordinate =
            injected.east.isNaN
            ? Coordinate(latitude: 0, longitude: 0)
            : SyntheticTrail.offset(truth.coordinate, east: 0, north: injected.east)
        var filter = OutlierFilter()
        let (passed, verdicts) = filter.run(samples)
        if let reason = injected.reason {
            #expect(verdicts == [.init(time: truth.time, reason: reason)])
            #expect(passed == samples.enumerated().filter { $0.offset != i }.map(\.element))
        } else {
            #expect(verdicts.isEmpty)
            #expect(passed == samples)
        }
    }

    @Test func aJumpIsJudgedWhenTheNextPointArrivesAndTheVerdictNamesTheJumpedPoint() {
        var samples = walk(10)
        samples[5].coordinate = SyntheticTrail.offset(samples[5].coordinate, east: 0, north: 200)
        var filter = OutlierFilter()
        for s in samples[0..<5] { #expect(Array(filter.add(s)) == [s]) }
        // The jump waits: nothing passes, nothing is marked yet.
        let held = filter.add(samples[5])
        #expect(held.verdict == nil && held.released.isEmpty)
        // The next point, back on the walk, marks it and passes.
        let next = filter.add(samples[6])
        #expect(next.verdict == .init(time: samples[5].time, reason: .jump))
        #expect(next.released == [samples[6]])
    }

    @Test func aPointWithNoPositionOrNoAccuracyDoesNotJudgeAHeldOne() {
        var samples = walk(10)
        samples[5].coordinate = SyntheticTrail.offset(samples[5].coordinate, east: 0, north: 200)
        var nothing = samples[6]
        nothing.coordinate = Coordinate(latitude: 0, longitude: 0)
        var cell = samples[6]
        cell.time += 0.5
        cell.horizontalAccuracy = 1500
        var filter = OutlierFilter()
        let (passed, verdicts) = filter.run(Array(samples[0...5]) + [nothing, cell] + Array(samples[7...]))
        #expect(
            verdicts == [
                .init(time: nothing.time, reason: .noPosition), .init(time: cell.time, reason: .inaccurate),
                .init(time: samples[5].time, reason: .jump),
            ])
        #expect(passed == Array(samples[0...4]) + Array(samples[7...]))
    }

    @Test func aTrainAt300KilometresAnHourIsNoJump() {
        var filter = OutlierFilter()
        let samples = walk(120, speed: 83.3)
        let (passed, verdicts) = filter.run(samples)
        #expect(verdicts.isEmpty)
        #expect(passed == samples)
    }

    @Test func aDeviceThatReappearsFarAwayAndStaysThereIsNoJump() {
        // A phone switched off in Munich and on in Berlin an hour later, or a fix 300 km/h away that
        // the next points confirm: the device did go there.
        var samples = walk(20)
        for i in 10..<20 {
            samples[i].coordinate = SyntheticTrail.offset(samples[i].coordinate, east: 0, north: 5000)
        }
        var filter = OutlierFilter()
        let (passed, verdicts) = filter.run(samples)
        #expect(verdicts.isEmpty)
        #expect(passed == samples)
    }

    @Test func aHeldPointPassesAtTheEndOfTheInput() {
        var samples = walk(10)
        samples[9].coordinate = SyntheticTrail.offset(samples[9].coordinate, east: 0, north: 500)
        var filter = OutlierFilter()
        for s in samples[0..<9] { _ = filter.add(s) }
        #expect(filter.add(samples[9]).released.isEmpty)
        #expect(filter.finish() == samples[9])
        #expect(filter.finish() == nil)
    }

    /// A jump at the very end of a trail is pending on the device: held by the detector, in no trip
    /// or distance (the same decisions as without it), until the next point says whether it jumped
    /// (it comes back: marked) or the device went there (a fix there much later: decided then).
    @Test func aJumpAtTheEndIsPendingUntilTheNextPoint() {
        // A walk, a stop of 5 minutes, a walk, a stop of 5 minutes: two visits and the trip between.
        let start = 1_741_993_200.0
        var samples = walk(300, from: start, speed: 0) + walk(600, from: start + 300)
        let there = samples.last!.coordinate
        samples += (1...300).map {
            VisitDetector.Sample(time: start + 900 + Double($0), coordinate: there, horizontalAccuracy: 5, speed: 0)
        }
        var jump = samples.last!
        jump.time += 2
        jump.coordinate = SyntheticTrail.offset(there, east: 0, north: 5000)
        func decisions(_ samples: [VisitDetector.Sample]) -> (VisitDetector, [VisitDetector.Decision]) {
            var detector = VisitDetector()
            var out: [VisitDetector.Decision] = []
            for s in samples { detector.add(s) { out += $0 } }
            return (detector, out)
        }
        let (clean, without) = decisions(samples)
        var (detector, with) = decisions(samples + [jump])
        #expect(without.contains { if case .trip = $0 { true } else { false } })
        #expect(with == without)
        #expect(detector.pending == jump)
        #expect(detector.currentVisit == clean.currentVisit)
        #expect(clean.pending == nil)

        // Back where it was: the far point was a jump.
        var back = samples.last!
        back.time = jump.time + 1
        var later: [VisitDetector.Decision] = []
        let verdict = detector.add(back) { later += $0 }
        #expect(verdict == OutlierFilter.Verdict(time: jump.time, reason: .jump))
        #expect(detector.pending == nil && later.isEmpty)

        // A fix there an hour later: the device did go there.
        var moved = clean
        _ = moved.add(jump) { _ in }
        var there2 = jump
        there2.time += 3600
        #expect(moved.add(there2) { _ in } == nil)
        #expect(moved.pending == nil && moved.lastTime == there2.time)
    }

    @Test func pointsOutOfTimeOrderPassUnjudged() {
        let samples = walk(10)
        var filter = OutlierFilter()
        for s in samples { _ = filter.add(s) }
        var late = samples[3]
        late.coordinate = SyntheticTrail.offset(late.coordinate, east: 0, north: 900)
        #expect(Array(filter.add(late)) == [late])
    }

    @Test func theMaximumAccuracyIsASetting() {
        var configuration = OutlierFilter.Configuration()
        configuration.maximumAccuracy = 50
        var sample = walk(1)[0]
        sample.horizontalAccuracy = 65
        #expect(OutlierFilter.reason(for: sample, configuration: configuration) == .inaccurate)
        #expect(OutlierFilter.reason(for: sample, configuration: .init()) == nil)
        sample.horizontalAccuracy = -1  // unknown: taken as 20 m
        #expect(OutlierFilter.reason(for: sample, configuration: configuration) == nil)
    }
}
