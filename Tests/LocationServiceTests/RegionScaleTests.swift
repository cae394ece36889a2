import Foundation
import Formats
import Geo
import Testing

@testable import LocationService

@Suite("Regions at scale: first states, state on request, saving")
struct RegionScaleTests {
    @Test func reportsFirstStatesOnlyForRegionsInsideOrNearby() {
        var m = RegionMonitor()
        m.add(circle("here"))
        m.add(circle("near", radius: 50, at: Geodesy.destination(from: origin, bearing: 0, distance: 600)))
        m.add(circle("far", radius: 50, at: Geodesy.destination(from: origin, bearing: 0, distance: 5_000)))
        m.add(circle("elsewhere", radius: 50, at: Coordinate(latitude: -33.9, longitude: 151.2)))
        let events = m.process(at(0))
        #expect(events == [.state("here", .inside), .state("near", .outside)])
        // The others are settled all the same, and answer when asked.
        #expect(m.state(for: "far") == .outside)
        #expect(m.state(for: "elsewhere") == .outside)
        #expect(m.allStatesKnown)
        // Walking to the far one still reports its entry.
        var later: [RegionMonitor.Event] = []
        for i in 1...1_040 { later += m.process(at(Double(i), metres: min(Double(i) * 5, 5_000), bearing: 0)) }
        #expect(later.contains { if case .enter("far", _) = $0 { true } else { false } })
    }

    @Test func theReportDistanceIsASetting() {
        var m = RegionMonitor()
        m.firstStateReportDistance = 10_000
        m.add(circle("far", radius: 50, at: Geodesy.destination(from: origin, bearing: 0, distance: 5_000)))
        #expect(m.process(at(0)) == [.state("far", .outside)])
    }

    @Test func aHundredThousandFarRegionsAnswerTheirStateWithoutAnEventEach() {
        var m = RegionMonitor()
        m.reserveCapacity(100_000)
        for i in 0..<100_000 {
            let c = Coordinate(latitude: -60 + Double(i % 1000) * 0.1, longitude: -170 + Double(i / 1000) * 1.5)
            m.add(circle("w\(i)", radius: 200, at: c))
        }
        m.add(circle("home"))
        let events = m.process(at(0))
        #expect(events == [.state("home", .inside)])
        #expect(m.state(for: "w42") == .outside)
        #expect(m.insideRegions.map(\.id) == ["home"])
    }

    @Test func theInsideVersionMovesOnlyWhenTheInsideSetChanges() {
        var m = RegionMonitor()
        m.add(circle("home"))
        m.add(circle("away", at: Geodesy.destination(from: origin, bearing: 0, distance: 3_000)))
        let v0 = m.insideVersion
        _ = m.process(at(0))  // first state inside: a change
        let v1 = m.insideVersion
        #expect(v1 != v0)
        for t in 1..<10 { _ = m.process(at(Double(t))) }
        #expect(m.insideVersion == v1)
        // Leave home for good: the exit changes it again.
        for t in 10..<60 { _ = m.process(at(Double(t), metres: 400)) }
        #expect(m.state(for: "home") == .outside)
        #expect(m.insideVersion != v1)
    }

    @Test func aBurstOfTransitionsIsOneSave() {
        var saving = RegionStateSaving(version: 0)
        func save(_ version: UInt64, at t: Double) -> Bool { saving.shouldSave(version: version, at: t) }
        // A fix that settles a thousand regions: a thousand events, each handled with the monitor as
        // that fix left it. One save, not one per event.
        var saves = 0
        for _ in 1...1000 where save(42, at: 100) { saves += 1 }
        #expect(saves == 1)
        // Nothing new: nothing to write, however much time passes.
        #expect(!save(42, at: 200))
    }

    @Test func savesAtMostOncePerIntervalAndWhatIsLeftAtTheEnd() {
        var saving = RegionStateSaving(version: 7)
        func save(_ version: UInt64, at t: Double) -> Bool { saving.shouldSave(version: version, at: t) }
        func end(_ version: UInt64) -> Bool { saving.shouldSaveAtEnd(version: version) }
        #expect(!save(7, at: 0))  // as loaded: already saved
        #expect(save(8, at: 10))
        #expect(!save(9, at: 10.2))
        #expect(!save(10, at: 10.9))
        #expect(save(10, at: 11))
        #expect(!save(11, at: 11.5))
        #expect(end(11))
        #expect(!end(11))
    }

    @Test(arguments: [
        // Key order, number ids, a Feature root, notify flags, an altitude.
        (
            #"{"features":[{"properties":{"radius":30,"notifyOnExit":false},"geometry":{"coordinates":[11.5,48.1,500],"type":"Point"},"id":7,"type":"Feature"}],"type":"FeatureCollection"}"#,
            "7 11.5 48.1 30.0 true false"
        ),
        (
            #"{"type":"Feature","id":"a\u00e9","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"radius":5.5,"dwell":60}}"#,
            "aé 1.0 2.0 5.5 true true"
        ),
        (
            #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"id":"p","radius":1,"extra":{"deep":[1,[2]]}}}]}"#,
            "p 1.0 2.0 1.0 true true"
        ),
        (
            #"{"type":"Feature","id":"","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"id":"q","radius":1}}"#,
            "q 1.0 2.0 1.0 true true"
        ),
    ])
    func readsGeoJSONInAnyKeyOrder(json: String, expected: String) throws {
        let d = try RegionDefinition.parseGeoJSON(Array(json.utf8))
        #expect(d.count == 1)
        guard case .circle(let c, let r) = d[0].shape else {
            Issue.record("not a circle")
            return
        }
        #expect("\(d[0].id) \(c.longitude) \(c.latitude) \(r) \(d[0].notifyOnEntry) \(d[0].notifyOnExit)" == expected)
    }

    @Test(arguments: [
        (
            #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2]},"properties":{}}]}"#,
            "feature 1: no id"
        ),
        // Found by RegionsGeoJSONFuzz in CI: an empty string was taken as an id.
        (
            #"{"type":"Feature","id":"","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"radius":1}}"#,
            "feature 1: no id"
        ),
        (
            #"{"type":"Feature","id":"","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"id":"","radius":1}}"#,
            "feature 1: no id"
        ),
        (
            #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"x","geometry":{"type":"Point","coordinates":[1,2]}}]}"#,
            "feature 1 (x): a Point region needs a numeric properties.radius in metres"
        ),
        (
            #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"x","geometry":{"type":"LineString","coordinates":[[1,2]]}}]}"#,
            "feature 1 (x): geometry LineString is not supported"
        ),
        // Found by RegionsGeoJSONFuzz: a number too large for a double read as infinity.
        (
            #"{"type":"Feature","id":"x","geometry":{"type":"Point","coordinates":[1,4099939e99999999999999]},"properties":{"radius":1}}"#,
            "feature 1 (x): a Point's coordinates overflow a number"
        ),
        (
            #"{"type":"Feature","id":"x","geometry":{"type":"Point","coordinates":[1,2]},"properties":{"radius":1e999}}"#,
            "feature 1 (x): properties.radius overflows a number"
        ),
        (
            #"{"type":"Feature","id":"x","geometry":{"type":"Polygon","coordinates":[[[1,2],[1,-1e999],[2,2]]]}}"#,
            "feature 1 (x): vertex 2 overflows a number"
        ),
        (#"{"type":"Topology"}"#, "expected a GeoJSON FeatureCollection or Feature"),
        (#"{"type":"FeatureCollection","features":[{"#, "not valid JSON"),
    ])
    func explainsBadGeoJSON(json: String, message: String) {
        #expect {
            try RegionDefinition.parseGeoJSON(Array(json.utf8))
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}

@Suite("Region index: the cheap tests against exact distances")
struct RegionCheapTestTests {
    /// Circles clustered around a place (some large, some polygons, some with a dwell), a wander
    /// through them with jumps and an accuracy that changes every fix: the indexed monitor (cells,
    /// planar pre-tests, quiet regions left unread) reports per fix exactly what a monitor that
    /// measures every region's exact distance reports.
    @Test(arguments: [
        ("Munich", Coordinate(latitude: 48.137, longitude: 11.575)),
        ("across the antimeridian", Coordinate(latitude: -17.0, longitude: 179.998)),
        ("at the planar latitude limit", Coordinate(latitude: 69.99, longitude: -20.0)),
        ("polar, exact only", Coordinate(latitude: 78.2, longitude: 15.6)),
    ])
    func theIndexedMonitorReportsWhatExactDistancesGive(place: String, centre: Coordinate) throws {
        var seed: UInt64 = 11
        func next() -> Double {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(seed >> 11) / Double(1 << 53)
        }
        var indexed = RegionMonitor()
        var exact = RegionMonitor(cellDegrees: 360)
        for i in 0..<600 {
            let c = Geodesy.destination(from: centre, bearing: next() * 360, distance: next() * 2_000)
            var region: Region
            switch i % 50 {
            case 0:
                region = try Region(id: "big\(i)", center: c, radius: 8_000 + next() * 6_000)
            case 1:
                let ring = (0..<5).map { Geodesy.destination(from: c, bearing: Double($0) * 72, distance: 150) }
                region = try Region(id: "poly\(i)", ring: ring)
            default:
                region = try Region(id: "r\(i)", center: c, radius: 20 + next() * 300)
            }
            if i % 7 == 0 { region.loiteringDelay = 30 }
            indexed.add(region)
            exact.add(region)
        }
        var position = centre
        var differences = 0
        var transitions = 0
        for t in 0..<3_000 {
            let step = next() < 0.01 ? 1_500 * next() : 3 * next()
            position = Geodesy.destination(from: position, bearing: next() * 360, distance: step)
            if Geodesy.haversineDistance(position, centre) > 2_500 { position = centre }
            let location = Location(
                coordinate: position, horizontalAccuracy: 3 + next() * 60,
                timestamp: 1_700_000_000 + Double(t))
            let a = indexed.process(location).map { "\($0)" }.sorted()
            let b = exact.process(location).map { "\($0)" }.sorted()
            if a != b { differences += 1 }
            transitions += b.filter { $0.hasPrefix("enter") || $0.hasPrefix("exit") || $0.hasPrefix("dwell") }.count
        }
        #expect(differences == 0)
        #expect(transitions > 100)
        #expect(indexed.insideRegions.map(\.id).sorted() == exact.insideRegions.map(\.id).sorted())
    }
}
