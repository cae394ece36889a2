import Formats
import Geo

#if canImport(Glibc)
    import Glibc
#endif

/// The fleet facet of a store: each device's latest position (kept in the device summaries), and
/// who was where (positions by box or by distance).
public protocol FleetStore: AnyObject {
    /// Each device's latest valid position, by device id (devices without one are left out); only
    /// `device`'s when given. Read from the device summaries, never the points.
    func latest(device: String?) async throws -> [LatestPosition]

    /// One page of the valid positions in `area` between `from` and `to` (seconds since 1970,
    /// inclusive), of every device or only `device`, by time then key, starting after `cursor`;
    /// `next` is where the following page starts, or `nil` on the last page.
    func positions(
        in area: PositionArea, from: Double, to: Double, device: String?, after cursor: TrailCursor?,
        limit: Int
    ) async throws -> (records: [TrailRecord], next: TrailCursor?)
}

extension FleetStore {
    public func latest() async throws -> [LatestPosition] { try await latest(device: nil) }

    public func positions(
        in area: PositionArea, from: Double = -.infinity, to: Double = .infinity,
        device: String? = nil, after cursor: TrailCursor?, limit: Int
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        try await positions(in: area, from: from, to: to, device: device, after: cursor, limit: limit)
    }
}

/// A device's latest valid position.
public struct LatestPosition: Hashable, Sendable {
    public var device: String
    public var time: Double
    public var latitude: Double
    public var longitude: Double
    public var altitude: Double?
    public var horizontalAccuracy: Double?
    public var speed: Double?
    public var course: Double?
    /// Records stored for the device, and when the last arrived (seconds since 1970).
    public var points: Int
    public var lastReceived: Double

    public init(
        device: String, time: Double, latitude: Double, longitude: Double, altitude: Double?,
        horizontalAccuracy: Double?, speed: Double?, course: Double?, points: Int, lastReceived: Double
    ) {
        (self.device, self.time, self.latitude, self.longitude) = (device, time, latitude, longitude)
        (self.altitude, self.horizontalAccuracy, self.speed, self.course) = (
            altitude, horizontalAccuracy, speed, course
        )
        (self.points, self.lastReceived) = (points, lastReceived)
    }
}

/// Where positions are looked for.
public enum PositionArea: Hashable, Sendable {
    /// A box, `west ≤ east` and `south ≤ north`, in degrees (edges included).
    case box(west: Double, south: Double, east: Double, north: Double)
    /// Within `radius` metres of a place (great-circle distance on the mean sphere,
    /// ``Geodesy/haversineDistance(_:_:)``).
    case near(latitude: Double, longitude: Double, radius: Double)

    /// The box that holds the area (for a circle: its bounding box, every longitude when it
    /// reaches a pole or the antimeridian).
    public var bounds: (west: Double, south: Double, east: Double, north: Double) {
        switch self {
        case let .box(west, south, east, north):
            return (west, south, east, north)
        case let .near(latitude, longitude, radius):
            let metresPerDegree = Geodesy.meanRadius * .pi / 180
            let dLat = radius / metresPerDegree * 1.0001
            let south = max(-90, latitude - dLat), north = min(90, latitude + dLat)
            let widest = max(abs(south), abs(north))
            guard widest < 89.9 else { return (-180, south, 180, north) }
            let dLon = dLat / cos(widest * .pi / 180)
            let west = longitude - dLon, east = longitude + dLon
            guard west >= -180, east <= 180 else { return (-180, south, 180, north) }
            return (west, south, east, north)
        }
    }
}
