import Formats
import LocationService

extension Tracker.Configuration {
    /// Monitors the regions of a GeoJSON FeatureCollection (Points with a `radius` property,
    /// Polygons; README, "Regions"). Regions that can't be monitored (radius ≤ 0, bad coordinates, a
    /// polygon that crosses itself) are left out and listed in ``regionFailures``, like CoreLocation's
    /// monitoringDidFail.
    ///
    /// - Parameter dwell: seconds inside before a dwell, for regions that don't set their own.
    /// - Throws: `RegionDefinition.ParseError` naming the feature when the file is not such GeoJSON.
    public mutating func addRegions(geoJSON bytes: [UInt8], dwell: Double? = nil) throws(RegionDefinition.ParseError) {
        for d in try RegionDefinition.parseGeoJSON(bytes) {
            do {
                var region: Region
                switch d.shape {
                case .circle(let center, let radius): region = try Region(id: d.id, center: center, radius: radius)
                case .polygon(let ring): region = try Region(id: d.id, ring: ring)
                }
                region.loiteringDelay = d.dwell ?? dwell
                region.notifyOnEntry = d.notifyOnEntry
                region.notifyOnExit = d.notifyOnExit
                regions.add(region)
            } catch {
                regionFailures.append("\(error)")
            }
        }
    }
}
