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
    /// Visit monitoring (``LocationManagerConfiguration/visits``).
    public var visits = false
    /// Seconds a stay must span to be a visit (``VisitDetector/Configuration/minimumDuration``).
    public var visitMinimumDuration: Double?
    /// A fixed visit radius in metres; unset adapts it (``VisitDetector/Configuration/radius``).
    public var visitRadius: Double?
    /// A hole longer than this many seconds ends a visit (``VisitDetector/Configuration/maximumGap``).
    public var visitGap: Double?
    /// Fixes with an accuracy worse than this many metres are outliers, left out of visits and trips
    /// (``VisitDetector/Configuration/maximumAccuracy``).
    public var maxAccuracy: Double?
    /// Regions are monitored (their dwell is checked here, the file elsewhere).
    public var monitorsRegions = false
    public var dwell: Double?

    public init() {}

    /// A field of the settings, as a ``Problem`` names it.
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case distanceFilter, desiredAccuracy, significantChanges, significantChangeDistance
        case significantChangeInterval, pauseWhenStationary, stationaryRadius, stationaryTimeout
        case timeInterval, headingChange, maxFixAge, monitorsRegions, dwell
        case visits, visitMinimumDuration, visitRadius, visitGap, maxAccuracy
    }

    /// What is wrong with the settings, by field.
    public enum Problem: Error, Sendable, Hashable {
        /// The field must be 0 or more (and finite).
        case negative(Field)
        /// The field must be more than 0.
        case notPositive(Field)
        /// ``LocationSettings/headingChange`` is not in 0 (excluded) to 180 degrees.
        case headingChangeOutOfRange(Double)
        /// The fields are set while `requirement` is off.
        case requires([Field], Field)
    }

    /// What is wrong with the settings, or nil; the first problem found.
    public var problem: Problem? {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { return .negative(.distanceFilter) }
        if let d = dwell, !(d > 0 && d.isFinite) { return .notPositive(.dwell) }
        if dwell != nil && !monitorsRegions { return .requires([.dwell], .monitorsRegions) }
        let positive: [(Field, Double?)] = [
            (.timeInterval, timeInterval), (.stationaryTimeout, stationaryTimeout),
            (.significantChangeInterval, significantChangeInterval), (.maxFixAge, maxFixAge),
            (.stationaryRadius, stationaryRadius), (.significantChangeDistance, significantChangeDistance),
            (.visitMinimumDuration, visitMinimumDuration), (.visitRadius, visitRadius), (.visitGap, visitGap),
            (.maxAccuracy, maxAccuracy),
        ]
        for (field, value) in positive where value.map({ !($0 > 0) }) == true { return .notPositive(field) }
        if let h = headingChange, !(h > 0 && h <= 180) { return .headingChangeOutOfRange(h) }
        if (stationaryRadius != nil || stationaryTimeout != nil) && !pauseWhenStationary {
            return .requires([.stationaryRadius, .stationaryTimeout], .pauseWhenStationary)
        }
        if (significantChangeDistance != nil || significantChangeInterval != nil) && !significantChanges {
            return .requires([.significantChangeDistance, .significantChangeInterval], .significantChanges)
        }
        let visitFields: [(Field, Double?)] = [
            (.visitMinimumDuration, visitMinimumDuration), (.visitRadius, visitRadius), (.visitGap, visitGap),
            (.maxAccuracy, maxAccuracy),
        ]
        if !visits, visitFields.contains(where: { $0.1 != nil }) {
            return .requires(visitFields.filter { $0.1 != nil }.map(\.0), .visits)
        }
        return nil
    }

    /// The manager's configuration: standard updates with these settings over the defaults, and
    /// significant changes and visits when asked for.
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
            c.significantChanges = SignificantChangeMonitor(
                distance: significantChangeDistance ?? 500,
                minimumInterval: significantChangeInterval ?? 300)
        }
        if visits {
            var v = VisitDetector.Configuration()
            if let visitMinimumDuration { v.minimumDuration = visitMinimumDuration }
            v.radius = visitRadius
            if let visitGap { v.maximumGap = visitGap }
            if let maxAccuracy { v.maximumAccuracy = maxAccuracy }
            c.visits = v
        }
        return c
    }
}
