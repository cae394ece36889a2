/// What the location service delivers, like CoreLocation's `CLLocation`.
///
/// Accuracies follow CoreLocation's convention: a negative value means "invalid/unknown".
public struct Location: Hashable, Sendable {
    /// Where a location came from.
    public enum Source: String, Hashable, Sendable, Codable {
        case gpsd
        case serial
        case log
        case other
    }

    public var coordinate: Coordinate
    /// Altitude above mean sea level, in metres (valid when ``verticalAccuracy`` ≥ 0).
    public var altitude: Double
    /// Radius of uncertainty in metres; negative when invalid.
    public var horizontalAccuracy: Double
    /// Altitude uncertainty in metres; negative when invalid.
    public var verticalAccuracy: Double
    /// Speed in m/s; negative when unknown.
    public var speed: Double
    /// Speed uncertainty in m/s; negative when unknown.
    public var speedAccuracy: Double
    /// Course in degrees from true north, 0..<360; negative when unknown.
    public var course: Double
    /// Course uncertainty in degrees; negative when unknown.
    public var courseAccuracy: Double
    /// UTC seconds since 1970-01-01.
    public var timestamp: Double
    public var source: Source

    public init(
        coordinate: Coordinate, altitude: Double = 0, horizontalAccuracy: Double, verticalAccuracy: Double = -1,
        speed: Double = -1, speedAccuracy: Double = -1, course: Double = -1, courseAccuracy: Double = -1,
        timestamp: Double, source: Source = .other
    ) {
        self.coordinate = coordinate
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.speedAccuracy = speedAccuracy
        self.course = course
        self.courseAccuracy = courseAccuracy
        self.timestamp = timestamp
        self.source = source
    }

    /// The location a fix describes, or `nil` when the fix has no position or no full date and time.
    ///
    /// A fix without an accuracy gets `horizontalAccuracy` = -1 (invalid), as CoreLocation does.
    public init?(_ fix: Fix, source: Source = .other) {
        guard fix.hasPosition, let coordinate = fix.coordinate, let t = fix.time?.secondsSince1970 else {
            return nil
        }
        self.init(
            coordinate: coordinate,
            altitude: fix.altitudeMSL ?? 0,
            horizontalAccuracy: fix.horizontalAccuracy ?? -1,
            verticalAccuracy: fix.mode == .threeD && fix.altitudeMSL != nil ? (fix.verticalAccuracy ?? -1) : -1,
            speed: fix.speed ?? -1,
            course: fix.course ?? -1,
            timestamp: t,
            source: source
        )
    }

    /// Distance to another location in metres (ellipsoidal).
    public func distance(from other: Location) -> Double {
        Geodesy.distance(coordinate, other.coordinate)
    }
}

extension Location: CustomStringConvertible {
    public var description: String { "Location(t: \(timestamp), hAcc: \(horizontalAccuracy), <coordinate redacted>)" }
}
