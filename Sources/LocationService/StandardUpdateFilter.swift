import Geo

/// The decisions of standard location updates: which fixes become delivered locations.
///
/// A value type with no I/O and no clock of its own: ``process(_:now:)`` takes a fix and the current
/// time and returns what to report. Rules, in order:
///
/// 1. **Usable**: the fix has a 2D/3D position and a date (else ``RejectReason/noPosition``), and a
///    horizontal accuracy (else ``RejectReason/noAccuracy``).
/// 2. **Fresh**: `now - fix time ≤ maxAge` (else ``RejectReason/stale(age:)``), and newer than the
///    last accepted fix (else ``RejectReason/outOfOrder``).
/// 3. **Plausible**: reaching it from the last accepted location must not need more than
///    `maxSpeed`, after granting both fixes' accuracies (else ``RejectReason/impliedSpeed(metresPerSecond:)``).
/// 4. **Accurate enough** for ``Configuration/desiredAccuracy`` (see ``DesiredAccuracy``), with the
///    fallback after ``Configuration/accuracyFallback`` without a qualifying fix.
/// 5. **Stationary pause** (when `pauseWhenStationary`): once every accepted fix for `stopTimeout`
///    stayed within `stationaryRadius` of where the stop began, report ``Outcome/paused(_:)`` and
///    deliver nothing until a fix leaves that circle (beyond its accuracy): ``Outcome/resumed(_:)``,
///    and that fix is delivered.
/// 6. **Triggers**: deliver when no location was delivered yet, or it is at least `distanceFilter`
///    from the last *delivered* one, or (optional) `timeInterval` passed since it, or (optional)
///    the course turned by `headingChange` degrees or more since it.
public struct StandardUpdateFilter: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Minimum distance in metres from the last delivered location. The default is 0 (none,
        /// CoreLocation's `kCLDistanceFilterNone`).
        public var distanceFilter: Double = 0
        /// The default is ``DesiredAccuracy/hundredMeters``. (CoreLocation's default is "best", a
        /// power hint on an iPhone; here the value filters, so the default accepts every sensible
        /// GPS fix and rejects only wild ones.)
        public var desiredAccuracy: DesiredAccuracy = .hundredMeters
        /// Seconds without a qualifying fix after which the most accurate one seen is delivered. The default is 30.
        public var accuracyFallback: Double = 30
        /// Also deliver when this many seconds passed since the last delivery. The default is `nil` (off).
        public var timeInterval: Double?
        /// Also deliver when the course changed by this many degrees. The default is `nil` (off).
        public var headingChange: Double?
        /// Fixes older than this many seconds when processed are stale. The default is 10.
        public var maxAge: Double = 10
        /// Speeds above this (m/s) between accepted fixes are outliers. The default is 100 (360 km/h).
        public var maxSpeed: Double = 100
        /// Pause while stationary. The default is `false`.
        public var pauseWhenStationary = false
        /// Radius in metres a stop stays within. The default is 25.
        public var stationaryRadius: Double = 25
        /// Seconds within the radius before pausing. The default is 300.
        public var stopTimeout: Double = 300

        public init() {}
    }

    /// What to do with one fix.
    public enum Outcome: Hashable, Sendable {
        case deliver(Location)
        case reject(RejectReason)
        /// Accepted, but no trigger fired (distance filter, paused, waiting for accuracy).
        case suppress
        case paused(Location)
        case resumed(Location)
    }

    public var configuration: Configuration
    /// The last delivered location.
    public private(set) var lastDelivered: Location?
    /// The last location that passed the usability and plausibility checks.
    public private(set) var lastAccepted: Location?
    public private(set) var isPaused = false
    private var stopAnchor: Location?
    private var fallbackCandidate: Location?
    private var waitingSince: Double?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Decides what `fix` becomes at time `now` (seconds since 1970, on the manager's clock).
    public mutating func process(_ fix: Fix, source: Location.Source = .other, now: Double) -> [Outcome] {
        guard let location = Location(fix, source: source) else {
            return [.reject(.noPosition)]
        }
        return process(location, now: now)
    }

    /// Decides what a location becomes at time `now`.
    public mutating func process(_ location: Location, now: Double) -> [Outcome] {
        let c = configuration
        guard location.horizontalAccuracy >= 0 else { return [.reject(.noAccuracy)] }
        let age = now - location.timestamp
        if age > c.maxAge { return [.reject(.stale(age: age))] }
        if let last = lastAccepted {
            let dt = location.timestamp - last.timestamp
            if dt <= 0 { return [.reject(.outOfOrder)] }
            let d = Geodesy.distance(last.coordinate, location.coordinate)
            let excess = d - location.horizontalAccuracy - last.horizontalAccuracy
            if excess > 0 && d / dt > c.maxSpeed { return [.reject(.impliedSpeed(metresPerSecond: d / dt))] }
        }
        lastAccepted = location

        // Accuracy, with the fallback.
        if waitingSince == nil { waitingSince = location.timestamp }
        if location.horizontalAccuracy > c.desiredAccuracy.limit {
            if fallbackCandidate == nil || location.horizontalAccuracy < fallbackCandidate!.horizontalAccuracy {
                fallbackCandidate = location
            }
            guard location.timestamp - waitingSince! >= c.accuracyFallback, let best = fallbackCandidate else {
                return [.reject(.inaccurate(accuracy: location.horizontalAccuracy, limit: c.desiredAccuracy.limit))]
            }
            fallbackCandidate = nil
            waitingSince = location.timestamp
            return trigger(best, now: now)
        }
        fallbackCandidate = nil
        waitingSince = location.timestamp
        return trigger(location, now: now)
    }

    private mutating func trigger(_ location: Location, now: Double) -> [Outcome] {
        let c = configuration
        var outcomes: [Outcome] = []
        if c.pauseWhenStationary {
            if let anchor = stopAnchor,
                Geodesy.distance(anchor.coordinate, location.coordinate) - location.horizontalAccuracy
                    <= c.stationaryRadius
            {
                if isPaused { return [.suppress] }
                if location.timestamp - anchor.timestamp >= c.stopTimeout {
                    isPaused = true
                    return [.paused(location)]
                }
            } else {
                stopAnchor = location
                if isPaused {
                    isPaused = false
                    outcomes.append(.resumed(location))
                    lastDelivered = location
                    outcomes.append(.deliver(location))
                    return outcomes
                }
            }
        }
        guard let last = lastDelivered else {
            lastDelivered = location
            return [.deliver(location)]
        }
        var fire = Geodesy.distance(last.coordinate, location.coordinate) >= c.distanceFilter
        if let interval = c.timeInterval, location.timestamp - last.timestamp >= interval { fire = true }
        if let turn = c.headingChange, location.course >= 0, last.course >= 0 {
            let delta = abs(location.course - last.course).truncatingRemainder(dividingBy: 360)
            if min(delta, 360 - delta) >= turn { fire = true }
        }
        guard fire else { return [.suppress] }
        lastDelivered = location
        return [.deliver(location)]
    }
}

/// Significant-change monitoring: a location when the device moved far, at most so often.
///
/// Delivers the first location it sees, then one whenever a location is at least `distance`
/// metres (500 by default) from the last significant location and at least `minimumInterval`
/// seconds (300 by default) after it, like CoreLocation's significant-change service. It works
/// whether or not standard updates are on, and is the wake signal of the lifecycle.
public struct SignificantChangeMonitor: Sendable, Hashable {
    public var distance: Double
    public var minimumInterval: Double
    public private(set) var lastSignificant: Location?

    public init(distance: Double = 500, minimumInterval: Double = 300) {
        self.distance = distance
        self.minimumInterval = minimumInterval
    }

    /// The location to report, if `location` is a significant change.
    public mutating func process(_ location: Location) -> Location? {
        if let last = lastSignificant {
            guard location.timestamp - last.timestamp >= minimumInterval,
                Geodesy.distance(last.coordinate, location.coordinate) >= distance
            else { return nil }
        }
        lastSignificant = location
        return location
    }
}
