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

    @Option(help: ArgumentHelp("Also deliver a location when this long passed since the last one.", valueName: "duration"),
            transform: parseDuration)
    var timeInterval: Double?

    @Option(help: ArgumentHelp("Also deliver a location when the course turned this many degrees.", valueName: "degrees"))
    var headingChange: Double?

    @Option(help: ArgumentHelp("With --pause-when-stationary: a stop stays within this radius. The default is 25.",
                               valueName: "metres"))
    var stationaryRadius: Double?

    @Option(help: ArgumentHelp("With --pause-when-stationary: pause after this long within the radius. The default is 5m.",
                               valueName: "duration"), transform: parseDuration)
    var stationaryTimeout: Double?

    @Option(help: ArgumentHelp("With --significant-changes: the distance of a change. The default is 500.",
                               valueName: "metres"))
    var significantChangeDistance: Double?

    @Option(help: ArgumentHelp("With --significant-changes: the least time between two. The default is 5m.",
                               valueName: "duration"), transform: parseDuration)
    var significantChangeInterval: Double?

    @Option(help: ArgumentHelp("Fixes older than this when they arrive are stale, or 'none' (replaying an old log "
                               + "through gpsd). The default is 10s.", valueName: "duration|none"),
            transform: { $0 == "none" ? .infinity : try parseDuration($0) })
    var maxFixAge: Double?

    var wantsEvents: Bool {
        distanceFilter != nil || desiredAccuracy != nil || significantChanges || regions != nil || dwell != nil
            || pauseWhenStationary || timeInterval != nil || headingChange != nil || maxFixAge != nil
    }

    func validate() throws {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { throw ValidationError("--distance-filter must be 0 or more metres.") }
        if let d = dwell, !(d > 0 && d.isFinite) { throw ValidationError("--dwell must be more than 0s.") }
        if dwell != nil && regions == nil { throw ValidationError("--dwell applies to regions: add --regions FILE.geojson.") }
        for (name, value) in [("--time-interval", timeInterval), ("--stationary-timeout", stationaryTimeout),
                              ("--significant-change-interval", significantChangeInterval), ("--max-fix-age", maxFixAge),
                              ("--stationary-radius", stationaryRadius),
                              ("--significant-change-distance", significantChangeDistance)]
        where value.map({ !($0 > 0) }) == true {
            throw ValidationError("\(name) must be more than 0.")
        }
        if let h = headingChange, !(h > 0 && h <= 180) { throw ValidationError("--heading-change takes 1 to 180 degrees, got \(h).") }
        if (stationaryRadius != nil || stationaryTimeout != nil) && !pauseWhenStationary {
            throw ValidationError("--stationary-radius and --stationary-timeout go with --pause-when-stationary.")
        }
        if (significantChangeDistance != nil || significantChangeInterval != nil) && !significantChanges {
            throw ValidationError("--significant-change-distance and --significant-change-interval go with --significant-changes.")
        }
    }

    var configuration: LocationManagerConfiguration {
        var c = LocationManagerConfiguration()
        var s = StandardUpdateFilter.Configuration()
        if let distanceFilter { s.distanceFilter = distanceFilter }
        if let desiredAccuracy { s.desiredAccuracy = desiredAccuracy }
        s.pauseWhenStationary = pauseWhenStationary
        s.timeInterval = timeInterval
        s.headingChange = headingChange
        if let stationaryRadius { s.stationaryRadius = stationaryRadius }
        if let stationaryTimeout { s.stopTimeout = stationaryTimeout }
        if let maxFixAge { s.maxAge = maxFixAge }
        c.standardUpdates = s
        if significantChanges {
            c.significantChanges = SignificantChangeMonitor(distance: significantChangeDistance ?? 500,
                                                            minimumInterval: significantChangeInterval ?? 300)
        }
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
