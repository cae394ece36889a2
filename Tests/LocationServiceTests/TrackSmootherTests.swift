import Geo
import Testing

@testable import LocationService

@Suite("Track smoother")
struct TrackSmootherTests {
    @Test func everyFixGetsOneSmoothedPositionInOrder() {
        var trail = SyntheticTrail(seed: 11)
        trail.stay(20)
        trail.move(500, speed: 1.4)
        trail.hole(40)
        trail.move(300, speed: 10)
        let points = TrackSmoother.smooth(trail.samples)
        #expect(points.map(\.time) == trail.samples.map(\.time))
        #expect(points.map(\.reportedSpeed) == trail.samples.map(\.speed))
    }

    /// Taking the positions one at a time (``TrackSmoother/append(_:)`` and
    /// ``TrackSmoother/nextCompleted()``, what the visit detector does) gives what ``add(_:_:)`` gives,
    /// to the bit, and leaves the same state.
    @Test func positionsTakenOneAtATimeAreTheSame() {
        var trail = SyntheticTrail(seed: 12)
        trail.stay(30)
        trail.move(400, speed: 1.4)
        trail.hole(40)
        trail.move(200, speed: 12)
        var pushed = TrackSmoother()
        var pulled = TrackSmoother()
        var a: [TrackSmoother.Point] = []
        var b: [TrackSmoother.Point] = []
        for s in trail.samples {
            pushed.add(s) { a.append($0) }
            pulled.append(s)
            while let p = pulled.nextCompleted() { b.append(p) }
            #expect(pulled == pushed)
        }
        #expect(a == b && a.count >= trail.samples.count - 4)
    }

    @Test func aFixWaitsForTheLagOrTheMaximumWaitAtMost() {
        var smoother = TrackSmoother()
        var given: [Double] = []
        // 1 Hz: each fix comes out four fixes later.
        for i in 0..<10 {
            smoother.add(.init(time: Double(i), coordinate: SyntheticTrail.place, horizontalAccuracy: 5)) {
                given.append($0.time)
            }
            #expect(given.last == (i >= 4 ? Double(i - 4) : nil))
        }
        // A fix a minute later: every fix still waiting is older than the maximum wait.
        smoother.add(.init(time: 70, coordinate: SyntheticTrail.place, horizontalAccuracy: 5)) { given.append($0.time) }
        #expect(given.suffix(4) == [6, 7, 8, 9])
        smoother.finish { given.append($0.time) }
        #expect(given.last == 70)
        #expect(smoother.isEmpty)
    }

    @Test func aTenHourDriveAtTenHertzKeepsEightFixesAtMost() {
        var smoother = TrackSmoother()
        var count = 0
        var longest = 0
        for i in 0..<360_000 {
            let position = SyntheticTrail.offset(SyntheticTrail.place, east: 2 * Double(i % 1000), north: 0)
            smoother.add(.init(time: Double(i) / 10, coordinate: position, horizontalAccuracy: 3, speed: 20)) { _ in
                count += 1
            }
            longest = max(longest, smoother.fixes.count)
        }
        #expect(longest == 8)
        #expect(count == 360_000 - 4)
    }

    @Test func twoSmoothersThatSawTheSameLastFixesAreEqual() {
        // The endpoint compares stored detector states: what a smoother holds depends on its window only.
        var trail = SyntheticTrail(seed: 5)
        trail.stay(100)
        trail.move(800, speed: 1.4)
        var whole = TrackSmoother()
        var late = TrackSmoother()
        for (i, s) in trail.samples.enumerated() {
            whole.add(s) { _ in }
            if i >= 300 { late.add(s) { _ in } }
        }
        #expect(whole == late)
    }

    @Test(arguments: [(correlation: 0.0, accuracy: 5.0), (0.0, 15), (0.967, 5), (0.967, 15)])
    func smoothedPositionsAreCloserToTheWayThanTheFixes(correlation: Double, accuracy: Double) {
        var trail = SyntheticTrail(seed: 21)
        trail.correlation = correlation
        trail.accuracy = accuracy
        trail.reportsSpeed = false
        var truth: [Coordinate] = []
        for _ in 0..<600 {
            trail.move(1.4, bearing: 30, speed: 1.4)
            truth.append(trail.position)
        }
        let points = TrackSmoother.smooth(trail.samples)
        func rms(_ c: [Coordinate]) -> Double {
            (zip(c, truth).map { Geodesy.distance($0, $1) }.map { $0 * $0 }.reduce(0, +) / Double(c.count))
                .squareRoot()
        }
        let raw = rms(trail.samples.map(\.coordinate))
        let smoothed = rms(points.map(\.coordinate))
        #expect(smoothed < raw)
        // White noise averages out over the window; a receiver's slow wander does not, but its
        // second-to-second jitter does.
        if correlation == 0 { #expect(smoothed < 0.7 * raw) }
        // The smoothed speed follows the walk (with a good receiver: noise adds to the speed).
        if accuracy == 5 {
            let speeds = points.dropFirst(10).map(\.speed).sorted()
            #expect(abs(speeds[speeds.count / 2] - 1.4) < 0.4)
        }
    }

    @Test func aStandstillStaysStill() {
        let samples = (0..<100).map {
            VisitDetector.Sample(time: Double($0), coordinate: SyntheticTrail.place, horizontalAccuracy: 5)
        }
        for p in TrackSmoother.smooth(samples) {
            #expect(Geodesy.distance(p.coordinate, SyntheticTrail.place) < 1e-6)
            #expect(p.speed < 1e-9)
        }
    }
}
