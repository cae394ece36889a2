/// The location service's settings as a command line or a configuration file gives them: every
/// value optional (unset keeps the library's default), checked together (``problem``) and turned
/// into a ``LocationManagerConfiguration``.
public struct LocationSettings: Sendable, Hashable {
    public var distanceFilter: Double?
    public var desiredAccuracy: DesiredAccuracy?
    public var significantChanges = false
    public var significantChangeDistance: Double?
    public var significantChangeInterval: Double?
    public var pauseWhenStationary = false
    public var stationaryRadius: Double?
    public var stationaryTimeout: Double?
    public var timeInterval: Double?
    public var headingChange: Double?
    public var maxFixAge: Double?
    /// Regions are monitored (their dwell is checked here, the file elsewhere).
    public var monitorsRegions = false
    public var dwell: Double?

    public init() {}

    /// What is wrong with the settings, in a sentence naming the `keeptrack` option, or nil.
    public var problem: String? {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { return "--distance-filter must be 0 or more metres." }
        if let d = dwell, !(d > 0 && d.isFinite) { return "--dwell must be more than 0s." }
        if dwell != nil && !monitorsRegions { return "--dwell applies to regions: add --regions FILE.geojson." }
        let positive: [(String, Double?)] = [
            ("--time-interval", timeInterval), ("--stationary-timeout", stationaryTimeout),
            ("--significant-change-interval", significantChangeInterval), ("--max-fix-age", maxFixAge),
            ("--stationary-radius", stationaryRadius), ("--significant-change-distance", significantChangeDistance),
        ]
        for (name, value) in positive where value.map({ !($0 > 0) }) == true { return "\(name) must be more than 0." }
        if let h = headingChange, !(h > 0 && h <= 180) { return "--heading-change takes 1 to 180 degrees, got \(h)." }
        if (stationaryRadius != nil || stationaryTimeout != nil) && !pauseWhenStationary {
            return "--stationary-radius and --stationary-timeout go with --pause-when-stationary."
        }
        if (significantChangeDistance != nil || significantChangeInterval != nil) && !significantChanges {
            return "--significant-change-distance and --significant-change-interval go with --significant-changes."
        }
        return nil
    }

    /// The manager's configuration: standard updates with these settings over the defaults, and
    /// significant changes when asked for.
    public var configuration: LocationManagerConfiguration {
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
}
