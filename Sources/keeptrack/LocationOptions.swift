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
    @Option(
        help: ArgumentHelp(
            "Deliver a location after moving this many metres (standard updates). The default is 0.",
            valueName: "metres"))
    var distanceFilter: Double?

    @Option(
        help: ArgumentHelp(
            "best-for-navigation, best (≤5 m), 10m, 100m, 1km or 3km: accuracy a fix needs. The default is 100m.",
            valueName: "accuracy"))
    var desiredAccuracy: DesiredAccuracy?

    @Flag(help: "Also report significant changes (≥500 m moved, at most one per 5 minutes).")
    var significantChanges = false

    @Option(
        help: ArgumentHelp(
            "Monitor the regions in this GeoJSON file (Points with a radius property, Polygons).",
            valueName: "file.geojson"))
    var regions: String?

    @Option(
        help: ArgumentHelp("Report a dwell after this long inside a region (90, 90s, 5m).", valueName: "duration"),
        transform: DurationText.parse)
    var dwell: Double?

    @Flag(help: "Pause standard updates while stationary (25 m for 5 minutes) and resume on movement.")
    var pauseWhenStationary = false

    @Option(
        help: ArgumentHelp("Also deliver a location when this long passed since the last one.", valueName: "duration"),
        transform: DurationText.parse)
    var timeInterval: Double?

    @Option(
        help: ArgumentHelp("Also deliver a location when the course turned this many degrees.", valueName: "degrees"))
    var headingChange: Double?

    @Option(
        help: ArgumentHelp(
            "With --pause-when-stationary: a stop stays within this radius. The default is 25.",
            valueName: "metres"))
    var stationaryRadius: Double?

    @Option(
        help: ArgumentHelp(
            "With --pause-when-stationary: pause after this long within the radius. The default is 5m.",
            valueName: "duration"), transform: DurationText.parse)
    var stationaryTimeout: Double?

    @Option(
        help: ArgumentHelp(
            "With --significant-changes: the distance of a change. The default is 500.",
            valueName: "metres"))
    var significantChangeDistance: Double?

    @Option(
        help: ArgumentHelp(
            "With --significant-changes: the least time between two. The default is 5m.",
            valueName: "duration"), transform: DurationText.parse)
    var significantChangeInterval: Double?

    @Option(
        help: ArgumentHelp(
            "Fixes older than this when they arrive are stale, or 'none' (replaying an old log "
                + "through gpsd). The default is 10s.", valueName: "duration|none"),
        transform: { $0 == "none" ? .infinity : try DurationText.parse($0) })
    var maxFixAge: Double?

    @Flag(help: "Also report visits (a stay of 3 minutes or more, at arrival and at departure) and trips between.")
    var visits = false

    @Option(
        help: ArgumentHelp("With --visits: a stay this long is a visit. The default is 3m.", valueName: "duration"),
        transform: DurationText.parse)
    var visitMinDuration: Double?

    @Option(
        help: ArgumentHelp(
            "With --visits: a visit's radius, unless 2 × its fixes' accuracy and at least 50. "
                + "The default is adaptive.", valueName: "metres"))
    var visitRadius: Double?

    @Option(
        help: ArgumentHelp(
            "With --visits: a hole without fixes longer than this ends a visit. The default is 1h.",
            valueName: "duration"), transform: DurationText.parse)
    var visitGap: Double?

    @Option(
        help: ArgumentHelp(
            "With --visits: fixes with an accuracy worse than this are outliers, left out of visits "
                + "and trips (as are fixes at 0,0 and single fixes that jump away and back). "
                + "The default is 200.", valueName: "metres"))
    var maxAccuracy: Double?

    @Option(
        help: ArgumentHelp(
            "While the device does not move (fixes held back by the distance filter or a pause), "
                + "record the latest location again this often, as a heartbeat (60s, 5m). "
                + "The default is off.", valueName: "duration"), transform: DurationText.parse)
    var heartbeat: Double?

    var wantsEvents: Bool {
        distanceFilter != nil || desiredAccuracy != nil || significantChanges || regions != nil || dwell != nil
            || pauseWhenStationary || timeInterval != nil || headingChange != nil || maxFixAge != nil || visits
            || visitMinDuration != nil || visitRadius != nil || visitGap != nil || maxAccuracy != nil
            || heartbeat != nil
    }

    var settings: LocationSettings {
        var s = LocationSettings()
        (s.distanceFilter, s.desiredAccuracy, s.timeInterval, s.headingChange) = (
            distanceFilter, desiredAccuracy, timeInterval, headingChange
        )
        (s.significantChanges, s.significantChangeDistance, s.significantChangeInterval) =
            (significantChanges, significantChangeDistance, significantChangeInterval)
        (s.pauseWhenStationary, s.stationaryRadius, s.stationaryTimeout) = (
            pauseWhenStationary, stationaryRadius, stationaryTimeout
        )
        (s.maxFixAge, s.monitorsRegions, s.dwell) = (maxFixAge, regions != nil, dwell)
        (s.visits, s.visitMinimumDuration, s.visitRadius, s.visitGap, s.maxAccuracy) =
            (visits, visitMinDuration, visitRadius, visitGap, maxAccuracy)
        return s
    }

    func validate() throws {
        if let problem = settings.problem { throw ValidationError(problem.sentence) }
        // Said before anything starts (and by `config check`), not when the tracker reads it.
        if let regions, access(regions, R_OK) != 0 {
            throw ValidationError("--regions: cannot read \(regions): \(String(cString: strerror(errno)))")
        }
        if let heartbeat, !(heartbeat > 0 && heartbeat.isFinite) {
            throw ValidationError("--heartbeat must be more than 0s.")
        }
    }
}

extension LocationSettings.Field {
    /// The option that sets the field.
    var option: String {
        switch self {
        case .distanceFilter: "--distance-filter"
        case .desiredAccuracy: "--desired-accuracy"
        case .significantChanges: "--significant-changes"
        case .significantChangeDistance: "--significant-change-distance"
        case .significantChangeInterval: "--significant-change-interval"
        case .pauseWhenStationary: "--pause-when-stationary"
        case .stationaryRadius: "--stationary-radius"
        case .stationaryTimeout: "--stationary-timeout"
        case .timeInterval: "--time-interval"
        case .headingChange: "--heading-change"
        case .maxFixAge: "--max-fix-age"
        case .monitorsRegions: "--regions"
        case .dwell: "--dwell"
        case .visits: "--visits"
        case .visitMinimumDuration: "--visit-min-duration"
        case .visitRadius: "--visit-radius"
        case .visitGap: "--visit-gap"
        case .maxAccuracy: "--max-accuracy"
        }
    }
}

extension LocationSettings.Problem {
    /// The sentence `replay` and `track` say, naming the options.
    var sentence: String {
        switch self {
        case .negative(let field): "\(field.option) must be 0 or more metres."
        case .notPositive(.dwell): "--dwell must be more than 0s."
        case .notPositive(.visitMinimumDuration): "--visit-min-duration must be more than 0s."
        case .notPositive(.visitGap): "--visit-gap must be more than 0s."
        case .notPositive(let field): "\(field.option) must be more than 0."
        case .headingChangeOutOfRange(let h): "--heading-change takes 1 to 180 degrees, got \(h)."
        case .requires(_, .monitorsRegions): "--dwell applies to regions: add --regions FILE.geojson."
        case .requires(let fields, let requirement):
            "\(fields.map(\.option).joined(separator: " and ")) \(fields.count == 1 ? "goes" : "go") with "
                + "\(requirement.option)."
        }
    }
}
