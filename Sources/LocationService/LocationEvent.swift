#if canImport(Glibc)
    import Glibc
#endif
import Geo

/// Why a fix was not delivered.
public enum RejectReason: Hashable, Sendable, CustomStringConvertible {
    /// No 2D/3D position.
    case noPosition
    /// A position at a time of day without a date (an NMEA log without RMC or ZDA): no time to
    /// judge it by.
    case noDate
    /// No horizontal accuracy to judge it by.
    case noAccuracy
    /// Worse than the desired accuracy (it may still be delivered by the fallback).
    case inaccurate(accuracy: Double, limit: Double)
    /// Older than the staleness limit at the time it was processed.
    case stale(age: Double)
    /// Reaching it from the last accepted location would take an impossible speed.
    case impliedSpeed(metresPerSecond: Double)
    /// Not older than the last accepted location.
    case outOfOrder

    /// A label for counting: `no-position`, `no-date`, `no-accuracy`, `inaccurate`, `stale`,
    /// `implied-speed`, `out-of-order`.
    public var category: String {
        switch self {
        case .noPosition: "no-position"
        case .noDate: "no-date"
        case .noAccuracy: "no-accuracy"
        case .inaccurate: "inaccurate"
        case .stale: "stale"
        case .impliedSpeed: "implied-speed"
        case .outOfOrder: "out-of-order"
        }
    }

    public var description: String {
        switch self {
        case .noPosition: "no position"
        case .noDate: "no date"
        case .noAccuracy: "no accuracy"
        case .inaccurate(let a, let l): "accuracy \(Int(a.rounded())) m worse than \(Int(l)) m"
        case .stale(let age): "stale by \(Int(age.rounded())) s"
        case .impliedSpeed(let v): "implied speed \(Int(v.rounded())) m/s"
        case .outOfOrder: "not newer than the last location"
        }
    }
}

/// What the location service reports, like CLLocationManagerDelegate's callbacks.
public enum LocationEvent: Hashable, Sendable {
    /// A location delivered by standard updates.
    case location(Location)
    /// A location delivered by significant-change monitoring.
    case significantChange(Location)
    /// Standard updates paused because the device is stationary.
    case paused(Location)
    /// Standard updates resumed: the device moved.
    case resumed(Location)
    /// A region transition or a region's first state, with the location that decided it (the
    /// position a server stores with the transition).
    case region(RegionMonitor.Event, at: Location)
    /// A visit (CLLocationManagerDelegate's `didVisit`): at arrival with no departure (the device is
    /// still there), again at departure with both times; with the location that decided it.
    case visit(Visit, at: Location)
    /// The trip between two visits, when the arrival at the second ends it; with the location that
    /// decided it.
    case trip(Trip, at: Location)
    /// An error, like CoreLocation's: location unknown, source unavailable, region monitoring failed.
    case error(LocationError)
}

/// LocationService's error: one the location service reports as an event, never a crash
/// (``Code/locationUnknown``, ``Code/sourceUnavailable``, ``Code/regionMonitoringFailure``), or one
/// a region or the region store throws. What (``code``, ``reason``), where (``region``, ``path``)
/// and why (``errno``, ``underlying``). It never holds a coordinate.
public struct LocationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of error.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No usable fix for a while.
        public static let locationUnknown = Code(rawValue: "location-unknown")
        /// The fix source reports a problem (gpsd gone, receiver unplugged).
        public static let sourceUnavailable = Code(rawValue: "source-unavailable")
        /// A region could not be monitored.
        public static let regionMonitoringFailure = Code(rawValue: "region-monitoring-failure")
        /// A region that cannot be monitored (``LocationError/region`` names it, ``LocationError/reason``
        /// says why; ``LocationError/underlying`` is the `GeoError` of a ring that is no polygon).
        public static let invalidRegion = Code(rawValue: "invalid-region")
        /// A region file that cannot be read (``LocationError/path``; ``LocationError/errno`` or
        /// ``LocationError/underlying`` says why).
        public static let unreadable = Code(rawValue: "unreadable")
        /// A region file that cannot be written (``LocationError/path``, ``LocationError/errno``).
        public static let unwritable = Code(rawValue: "unwritable")
        /// A region file that is not what it should be (``LocationError/path``; the cause, a
        /// `FormatsError` or a region's ``invalidRegion``, is ``LocationError/underlying``, or the
        /// invalid regions are ``LocationError/failures``: then nothing was imported).
        public static let invalidFile = Code(rawValue: "invalid-file")
        /// Ids the region store does not have (``LocationError/regions``).
        public static let unknownRegion = Code(rawValue: "unknown-region")
    }

    public var code: Code
    /// What went wrong, in words (for ``Code/invalidRegion``, the events' codes).
    public var reason: String
    /// The region's id, for ``Code/invalidRegion``.
    public var region: String?
    /// The ids, for ``Code/unknownRegion``.
    public var regions: [String] = []
    /// The file, for the region store's codes.
    public var path: String?
    /// The system's error number, when the system said why.
    public var errno: Int32?
    /// The error this one comes from, when there is one.
    public var underlying: (any Error)?
    /// The invalid regions of a file, for ``Code/invalidFile`` when several are.
    public var failures: [LocationError] = []

    public init(
        _ code: Code, _ reason: String = "", region: String? = nil, regions: [String] = [],
        path: String? = nil, errno: Int32? = nil, underlying: (any Error)? = nil,
        failures: [LocationError] = []
    ) {
        self.code = code
        self.reason = reason
        self.region = region
        self.regions = regions
        self.path = path
        self.errno = errno
        self.underlying = underlying
        self.failures = failures
    }

    /// Equal when they say the same thing about the same place (the cause is compared by its description).
    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.reason == b.reason && a.region == b.region && a.regions == b.regions
            && a.path == b.path && a.errno == b.errno && a.failures == b.failures
            && a.underlying.map { "\($0)" } == b.underlying.map { "\($0)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(reason)
        hasher.combine(region)
        hasher.combine(path)
    }

    /// Why, from the system's number or the cause.
    var cause: String {
        if let errno { return String(cString: strerror(errno)) }
        if let underlying { return "\(underlying)" }
        return reason
    }

    public var description: String {
        switch code {
        case .invalidRegion: "region \(region ?? ""): \(underlying.map { "\($0)" } ?? reason)"
        case .unreadable: "cannot read \(path ?? ""): \(cause)"
        case .unwritable: "cannot write \(path ?? ""): \(cause)"
        case .invalidFile where !failures.isEmpty:
            "\(path ?? ""): " + failures.map(\.description).joined(separator: "; ") + " (nothing imported)"
        case .invalidFile: "\(path ?? ""): \(cause)"
        case .unknownRegion: "no monitored region with id \(regions.joined(separator: ", "))"
        default: "\(code.rawValue): \(reason)"
        }
    }
}
