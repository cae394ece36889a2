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
}
