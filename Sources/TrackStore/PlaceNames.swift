import Geo

/// A cell of 0.001° of latitude and longitude (111 m north–south; 111 m × cos(latitude) east–west:
/// 74 m at 48°), the coordinate rounded to three decimals: what a visit without a name is counted as
/// a place by (``Statistics``), and what the reverse geocoder's answers are kept by (its cache).
public struct PlaceCell: Hashable, Sendable, CustomStringConvertible {
    /// The latitude in thousandths of a degree.
    public let latitude: Int32
    /// The longitude in thousandths of a degree.
    public let longitude: Int32

    /// The cell of `coordinate`: its latitude and longitude rounded to three decimals.
    public init(_ coordinate: Coordinate) {
        latitude = Int32(clamping: Int64((max(-90, min(90, coordinate.latitude)) * 1000).rounded()))
        longitude = Int32(clamping: Int64((max(-180, min(180, coordinate.longitude)) * 1000).rounded()))
    }

    /// The cell with these thousandths of a degree.
    public init(latitude: Int32, longitude: Int32) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// `LAT:LON` in thousandths of a degree (`48137:11575`): how a store keys it.
    public var key: String { "\(latitude):\(longitude)" }

    /// The cell a ``key`` names, or `nil`.
    public init?(key: String) {
        let parts = key.split(separator: ":")
        guard parts.count == 2, let lat = Int32(parts[0]), let lon = Int32(parts[1]) else { return nil }
        self.init(latitude: lat, longitude: lon)
    }

    /// Its centre.
    public var centre: Coordinate {
        Coordinate(latitude: Double(latitude) / 1000, longitude: Double(longitude) / 1000)
    }

    /// Nothing of where: a cell is a coordinate, kept out of descriptions and logs (as ``Visit``'s is).
    public var description: String { "PlaceCell(<redacted>)" }
}

/// The user's own named areas (an endpoint's geofences, a device's regions) that contain a place:
/// what names a visit first ("home", "depot"), before a reverse geocoder. A store that keeps such
/// areas conforms; the server asks a store that does (`store as? any PlaceAreaSource`), so the areas
/// and the names land in either order.
public protocol PlaceAreaSource {
    /// For each of `coordinates`, the names of `device`'s areas that contain it (those of every
    /// device included), the most specific (smallest) first; empty when none does.
    func areaNames(device: String, containing coordinates: [Coordinate]) async throws -> [[String]]
}

/// The reverse geocoder's answers a store keeps, by cell (``PlaceCell``): asked once per cell, ever.
public protocol PlaceNameStore {
    /// The names kept for `cells`: a cell answered is in the result (its name `nil` when the
    /// geocoder had none for it); a cell never answered is not.
    func placeNames(_ cells: [PlaceCell]) async throws -> [PlaceCell: String?]

    /// Keeps the geocoder's answer for `cell` (`nil`: it knows no name there), asked at `time`.
    func setPlaceName(_ name: String?, for cell: PlaceCell, at time: Double) async throws
}
