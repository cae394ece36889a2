import Foundation
import Geo
import Testing

@testable import LocationService

func circle(_ id: String, radius: Double = 100, at c: Coordinate = origin) -> Region {
    try! Region(id: id, center: c, radius: radius)
}

/// Locations along a line through the origin, eastwards, one per second.
func walk(from start: Double, to end: Double, speed: Double = 2, acc: Double = 5, t0: Double = 0) -> [Location] {
    let n = Int(abs(end - start) / speed)
    return (0...n).map { i in
        let x = start + Double(i) * speed * (end > start ? 1 : -1)
        return at(t0 + Double(i), metres: abs(x), bearing: x >= 0 ? 90 : 270, acc: acc)
    }
}

@Suite("Region monitoring")
struct RegionMonitorTests {
    @Test func reportsTheFirstStateThenEnterAndExitAtTheCrossingTimes() {
        var m = RegionMonitor()
        m.add(circle("home"))
        var events: [RegionMonitor.Event] = []
        // From 300 m west to 300 m east at 2 m/s: inside (by more than 5 m) from x = -95 to 95.
        for l in walk(from: -300, to: 300) { events += m.process(l) }
        #expect(events.count == 3)
        #expect(events[0] == .state("home", .outside))
        guard case .enter("home", let tIn) = events[1], case .exit("home", let tOut) = events[2] else {
            Issue.record("expected enter then exit, got \(events)")
            return
        }
        // Evidence begins 5 m (the margin) inside the edge: x = -94 at t = 103 s; and 5 m outside
        // on the way out: x = 106 at t = 203 s.
        #expect(tIn == 1_700_000_000 + 103)
        #expect(tOut == 1_700_000_000 + 203)
        #expect(m.state(for: "home") == .outside)
        #expect(m.state(for: "nope") == .unknown)
    }

    @Test func noiseAlongTheBoundaryNeverFlaps() {
        var m = RegionMonitor()
        m.add(circle("edge"))
        var events: [RegionMonitor.Event] = []
        // Start well outside, then an hour of fixes jumping ±15 m around the edge with 10 m accuracy.
        for l in walk(from: -300, to: -150) { events += m.process(l) }
        var seed: UInt64 = 42
        for i in 0..<3600 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let jitter = Double(Int(seed >> 33) % 31) - 15
            events += m.process(at(100 + Double(i), metres: 100 + jitter, bearing: 270, acc: 10))
        }
        #expect(events == [.state("edge", .outside)])
    }

    @Test func aShortVisitBelowTheMinimumDurationIsNoEntry() {
        var m = RegionMonitor()
        m.add(circle("shop", radius: 30))
        var events: [RegionMonitor.Event] = []
        // Crossing a 60 m wide circle at 10 m/s: at most 5 s inside, less than 20 s.
        for l in walk(from: -200, to: 200, speed: 10) { events += m.process(l) }
        #expect(events == [.state("shop", .outside)])
    }

    @Test func reportsADwellOncePerVisit() {
        var m = RegionMonitor()
        var r = circle("office")
        r.loiteringDelay = 60
        m.add(r)
        var events: [RegionMonitor.Event] = []
        for l in walk(from: -300, to: 0) { events += m.process(l) }
        for t in 151...400 { events += m.process(at(Double(t))) }
        #expect(events.filter { if case .dwell = $0 { true } else { false } }.count == 1)
        guard case .enter(_, let entered) = events[1], case .dwell(_, let dwelt) = events[2] else {
            Issue.record("expected enter then dwell, got \(events)")
            return
        }
        #expect(dwelt - entered >= 60)
        #expect(dwelt - entered < 62)
    }

    @Test func honoursNotifyFlagsAndReplacesBySameID() {
        var m = RegionMonitor()
        var quiet = circle("quiet")
        quiet.notifyOnEntry = false
        m.add(quiet)
        var events: [RegionMonitor.Event] = []
        for l in walk(from: -300, to: 300) { events += m.process(l) }
        #expect(events.contains(.exit("quiet", time: 1_700_000_000 + 203)))
        #expect(!events.contains { if case .enter = $0 { true } else { false } })
        // Same id: replaced, state starts again.
        m.add(circle("quiet", radius: 10_000))
        #expect(m.count == 1)
        #expect(m.state(for: "quiet") == .unknown)
    }

    @Test func rejectsInvalidRegionsWithAReason() {
        #expect(throws: LocationError.self) { try Region(id: "a", center: origin, radius: 0) }
        #expect(throws: LocationError.self) {
            try Region(id: "b", center: Coordinate(latitude: 91, longitude: 0), radius: 5)
        }
        #expect(throws: LocationError.self) { try Region(id: "", center: origin, radius: 5) }
        do {
            _ = try Region(
                id: "bow",
                ring: [
                    Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 1, longitude: 1),
                    Coordinate(latitude: 1, longitude: 0), Coordinate(latitude: 0, longitude: 1),
                ])
            Issue.record("a self-intersecting polygon was accepted")
        } catch {
            #expect(error.description == "region bow: the polygon intersects itself (edge 0 crosses edge 2)")
        }
    }

    @Test func monitorsPolygons() throws {
        // A 200 m square centred on the origin.
        let d = 100.0 / 111_195
        let e = d / cos(origin.latitude * .pi / 180)
        let square = try Region(
            id: "square",
            ring: [
                Coordinate(latitude: origin.latitude - d, longitude: origin.longitude - e),
                Coordinate(latitude: origin.latitude - d, longitude: origin.longitude + e),
                Coordinate(latitude: origin.latitude + d, longitude: origin.longitude + e),
                Coordinate(latitude: origin.latitude + d, longitude: origin.longitude - e),
            ])
        var m = RegionMonitor()
        m.add(square)
        var events: [RegionMonitor.Event] = []
        for l in walk(from: -300, to: 300) { events += m.process(l) }
        #expect(events.count == 3)
        #expect(events.first == .state("square", .outside))
        #expect(m.state(for: "square") == .outside)
    }

    @Test func theSpatialIndexGivesTheSameEventsAsCheckingEveryRegion() {
        // 2,000 circles scattered within ~3 km, a 2 km walk; one huge cell = no index at all.
        var seed: UInt64 = 7
        func next() -> Double {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(seed >> 11) / Double(1 << 53)
        }
        var indexed = RegionMonitor(cellDegrees: 0.01)
        var brute = RegionMonitor(cellDegrees: 360)
        for i in 0..<2000 {
            let c = Geodesy.destination(from: origin, bearing: next() * 360, distance: next() * 3000)
            let r = circle("r\(i)", radius: 20 + next() * 200, at: c)
            indexed.add(r)
            brute.add(r)
        }
        var a: [RegionMonitor.Event] = []
        var b: [RegionMonitor.Event] = []
        for l in walk(from: -1000, to: 1000, speed: 3) {
            a += indexed.process(l)
            b += brute.process(l)
        }
        func key(_ e: RegionMonitor.Event) -> String { "\(e)" }
        #expect(
            a.filter { if case .state = $0 { false } else { true } }.map(key).sorted()
                == b.filter { if case .state = $0 { false } else { true } }.map(key).sorted())
        #expect(a.contains { if case .enter = $0 { true } else { false } })
    }
}
