/// A point on the WGS84 ellipsoid, in decimal degrees.
public struct Coordinate: Hashable, Sendable, Codable {
    /// Latitude in degrees, positive north. Valid values lie in -90...90.
    public var latitude: Double
    /// Longitude in degrees, positive east. Valid values lie in -180...180.
    public var longitude: Double

    /// Creates a coordinate. No validation happens here: see ``isValid``.
    @inlinable
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Whether both components are finite and within their ranges.
    @inlinable
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
    }
}

extension Coordinate: CustomStringConvertible {
    /// Deliberately vague: coordinates are personal data and stay out of logs unless asked for.
    public var description: String { "Coordinate(<redacted>)" }
}
