import Formats
import LocationService
import SystemIO

extension Tracker.Configuration {
    /// Monitors the regions of a GeoJSON FeatureCollection (Points with a `radius` property,
    /// Polygons; docs/location-service.md). Regions that can't be monitored (radius ≤ 0, bad coordinates, a
    /// polygon that crosses itself) are left out and listed in ``regionFailures``, like CoreLocation's
    /// monitoringDidFail.
    ///
    /// - Parameters:
    ///   - bytes: the GeoJSON document's bytes.
    ///   - dwell: seconds inside before a dwell, for regions that don't set their own.
    /// - Throws: `FormatsError` naming the feature when the file is not such GeoJSON.
    public mutating func addRegions(geoJSON bytes: [UInt8], dwell: Double? = nil) throws(FormatsError) {
        // Straight from the bytes into the monitor, one feature at a time: no document tree and no
        // list of definitions (a million regions: about a second, memory only for the monitor).
        var monitor = regions
        regions = RegionMonitor()
        defer { regions = monitor }
        var failures: [LocationError] = []
        var ids = RegionIDs()
        try RegionDefinition.parseGeoJSON(bytes) { d in
            do throws(LocationError) {
                try ids.add(d.id)
                var region = try Region(d)
                region.loiteringDelay = d.dwell ?? dwell
                monitor.add(region)
            } catch {
                failures.append(error)
            }
        }
        regionFailures += failures
    }

    /// Adds the regions of the GeoJSON file at `path` (``addRegions(geoJSON:dwell:)``).
    ///
    /// - Throws: ``TrackerError`` naming the file: unreadable, or not such GeoJSON.
    public mutating func addRegions(file path: String, dwell: Double? = nil) throws(TrackerError) {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path)
        } catch {
            throw TrackerError(.regionsFile, "cannot read \(path)", path: path, underlying: error)
        }
        do {
            try addRegions(geoJSON: bytes, dwell: dwell)
        } catch {
            throw TrackerError(.regionsFile, path, path: path, underlying: error)
        }
    }
}
