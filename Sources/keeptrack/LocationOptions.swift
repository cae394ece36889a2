import ArgumentParser
import FoundationEssentials
import Formats
import GPSInput
import Geo
import LocationService
import SystemIO
import Tracking

#if canImport(Glibc)
import Glibc
#endif

extension DesiredAccuracy: ExpressibleByArgument {}

/// The location-service options of `replay` and `track`. Any of them switches the output from
/// fixes to location events.
struct LocationOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Deliver a location only after moving this many metres (standard updates).",
                               valueName: "metres"))
    var distanceFilter: Double?

    @Option(help: ArgumentHelp(
        "best-for-navigation, best (≤5 m), 10m, 100m, 1km or 3km: accuracy a fix needs to be delivered.",
        valueName: "accuracy"))
    var desiredAccuracy: DesiredAccuracy?

    @Flag(help: "Also report significant changes (≥500 m moved, at most one per 5 minutes).")
    var significantChanges = false

    @Option(help: ArgumentHelp("Monitor the regions in this GeoJSON file (Points with a radius property, Polygons).",
                               valueName: "file.geojson"))
    var regions: String?

    @Option(help: ArgumentHelp("Report a dwell after this long inside a region (90, 90s, 5m).", valueName: "duration"),
            transform: parseDuration)
    var dwell: Double?

    @Flag(help: "Pause standard updates while stationary (25 m for 5 minutes) and resume on movement.")
    var pauseWhenStationary = false

    var wantsEvents: Bool {
        distanceFilter != nil || desiredAccuracy != nil || significantChanges || regions != nil || dwell != nil
            || pauseWhenStationary
    }

    func validate() throws {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { throw ValidationError("--distance-filter must be 0 or more metres.") }
        if let d = dwell, !(d > 0 && d.isFinite) { throw ValidationError("--dwell must be more than 0s.") }
        if dwell != nil && regions == nil { throw ValidationError("--dwell applies to regions: add --regions FILE.geojson.") }
    }

    var configuration: LocationManagerConfiguration {
        var c = LocationManagerConfiguration()
        var s = StandardUpdateFilter.Configuration()
        if let distanceFilter { s.distanceFilter = distanceFilter }
        if let desiredAccuracy { s.desiredAccuracy = desiredAccuracy }
        s.pauseWhenStationary = pauseWhenStationary
        c.standardUpdates = s
        if significantChanges { c.significantChanges = SignificantChangeMonitor() }
        return c
    }

    /// The regions of `--regions` added to `c`, or a usage error naming the problem.
    func addRegions(to c: inout Tracker.Configuration) throws {
        guard let regions else { return }
        let bytes: [UInt8]
        do {
            bytes = try readFile(regions)
        } catch {
            throw ValidationError("cannot read --regions \(regions): \(error)")
        }
        do {
            try c.addRegions(geoJSON: bytes, dwell: dwell)
        } catch {
            throw ValidationError("--regions \(regions): \(error)")
        }
    }

    /// The region monitor with the regions of `--regions` (those that can be monitored).
    func regionMonitor() throws -> RegionMonitor {
        var c = Tracker.Configuration()
        try addRegions(to: &c)
        return c.regions
    }
}

/// Wall-clock seconds since 1970, for live sources.
@Sendable func wallClockSeconds() -> Double { WallClock.seconds() }
