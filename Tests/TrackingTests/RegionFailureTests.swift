import LocationService
import Testing
import Tracking

/// Regions that can't be monitored are kept as typed errors naming the region.
@Suite struct RegionFailureTests {
    @Test func aRegionThatCannotBeMonitoredIsATypedFailureNamingIt() throws {
        let geoJSON = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"ok","properties":{"radius":50},"geometry":{"type":"Point","coordinates":[2.35,48.85]}},
            {"type":"Feature","id":"flat","properties":{"radius":0},"geometry":{"type":"Point","coordinates":[2.35,48.85]}}
            ]}
            """
        var c = Tracker.Configuration()
        try c.addRegions(geoJSON: Array(geoJSON.utf8))
        #expect(c.regionFailures.count == 1)
        let failure = try #require(c.regionFailures.first)
        #expect(failure.code == .invalidRegion)
        #expect(failure.region == "flat")
        #expect(failure.reason == "the radius must be a positive number of metres, got 0.0")
        #expect(c.regions.regions.count == 1)
    }

    /// A region larger than a monitor can index at a bounded cost is refused, as CoreLocation
    /// refuses one past its `maximumRegionMonitoringDistance`: a radius of 21,000 km asked for 35 GB.
    @Test func aRegionTooLargeToIndexIsRefusedNamingItsSize() throws {
        let geoJSON = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"city","properties":{"radius":100000},"geometry":{"type":"Point","coordinates":[11.57,48.13]}},
            {"type":"Feature","id":"earth","properties":{"radius":2.1e7},"geometry":{"type":"Point","coordinates":[11.57,48.13]}},
            {"type":"Feature","id":"land","geometry":{"type":"Polygon","coordinates":[[[9,47],[14,47],[14,50.5],[9,50.5],[9,47]]]}},
            {"type":"Feature","id":"county","geometry":{"type":"Polygon","coordinates":[[[11,48],[12,48],[12,48.9],[11,48.9],[11,48]]]}}
            ]}
            """
        var c = Tracker.Configuration()
        try c.addRegions(geoJSON: Array(geoJSON.utf8))
        #expect(c.regionFailures.map(\.region) == ["earth", "land"])
        #expect(
            c.regionFailures.map(\.reason) == [
                "the radius must be at most 100 km, got 21000 km", "the polygon spans 389 km, more than 200 km",
            ])
        #expect(c.regions.regions.map(\.id).sorted() == ["city", "county"])
    }

    /// An id twice in one file: the first feature is monitored, the second is a failure naming both.
    @Test func anIdTwiceInOneFileMonitorsTheFirstAndNamesTheSecond() throws {
        let geoJSON = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"home","properties":{"radius":50},"geometry":{"type":"Point","coordinates":[2.35,48.85]}},
            {"type":"Feature","id":"home","properties":{"radius":80},"geometry":{"type":"Point","coordinates":[2.36,48.86]}}
            ]}
            """
        var c = Tracker.Configuration()
        try c.addRegions(geoJSON: Array(geoJSON.utf8))
        #expect(
            c.regionFailures.map(\.description) == [
                "region home: feature 2 has the id of feature 1 (an id is one region)"
            ])
        let kept = try #require(c.regions.regions.first)
        guard case .circle(_, let radius) = kept.shape else { Issue.record("home is not a circle"); return }
        #expect(c.regions.regions.count == 1 && radius == 50)
    }
}
