import Geo

/// Why a fix was not delivered.
public enum RejectReason: Hashable, Sendable, CustomStringConvertible {
    /// No 2D/3D position (or no date to time it).
    case noPosition
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

    /// A label for counting: `no-position`, `no-accuracy`, `inaccurate`, `stale`,
    /// `implied-speed`, `out-of-order`.
    public var category: String {
        switch self {
        case .noPosition: "no-position"
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

/// An error the location service reports as an event, never a crash.
public struct LocationError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// No usable fix for a while.
        case locationUnknown = "location-unknown"
        /// The fix source reports a problem (gpsd gone, receiver unplugged).
        case sourceUnavailable = "source-unavailable"
        /// A region could not be monitored.
        case regionMonitoringFailure = "region-monitoring-failure"
    }

    public var code: Code
    public var reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }
}
