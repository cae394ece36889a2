/// The location service's settings as a command line or a configuration file gives them: each
/// optional (absent means the library's default), checked together (``problem``), then turned into
/// a ``LocationManagerConfiguration``. The names are `keeptrack`'s options and config keys.
public struct LocationSettings: Sendable, Hashable {
    /// `--distance-filter`, metres. The default is 0.
    public var distanceFilter: Double?
    /// `--desired-accuracy`. The default is ``DesiredAccuracy/hundredMeters``.
    public var desiredAccuracy: DesiredAccuracy?
    /// `--significant-changes`. The default is off.
    public var significantChanges = false
    /// `--pause-when-stationary`. The default is off.
    public var pauseWhenStationary = false
    /// `--time-interval`, seconds. The default is off.
    public var timeInterval: Double?
    /// `--heading-change`, degrees. The default is off.
    public var headingChange: Double?
    /// `--stationary-radius`, metres (with pauses). The default is 25.
    public var stationaryRadius: Double?
    /// `--stationary-timeout`, seconds (with pauses). The default is 300.
    public var stationaryTimeout: Double?
    /// `--significant-change-distance`, metres. The default is 500.
    public var significantChangeDistance: Double?
    /// `--significant-change-interval`, seconds. The default is 300.
    public var significantChangeInterval: Double?
    /// `--max-fix-age`, seconds; infinity for none. The default is 10.
    public var maxFixAge: Double?

    public init() {}

    /// What is wrong, as a sentence naming the option and what it takes, or `nil`.
    public var problem: String? {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { return "--distance-filter must be 0 or more metres." }
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

    /// Whether any setting asks for location events (every one but the defaults does).
    public var isSet: Bool { self != LocationSettings() }

    /// The configuration: standard updates always (with these settings), significant changes when asked.
    public var configuration: LocationManagerConfiguration {
        var c = LocationManagerConfiguration()
        var s = StandardUpdateFilter.Configuration()
        if let distanceFilter { s.distanceFilter = distanceFilter }
        if let desiredAccuracy { s.desiredAccuracy = desiredAccuracy }
        s.pauseWhenStationary = pauseWhenStationary
        (s.timeInterval, s.headingChange) = (timeInterval, headingChange)
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
