import EndpointEvents
import Geo
import PostgresNIO
import TrackStore

/// The reverse geocoder's names by cell (``PlaceNameStore``).
extension PostgresTrackStore: PlaceNameStore {
    static let placeNamesMigration = [
        """
        CREATE TABLE place_names (
            lat integer NOT NULL, lon integer NOT NULL, name text, asked float8 NOT NULL, PRIMARY KEY (lat, lon)
        )
        """
    ]

    public func placeNames(_ cells: [PlaceCell]) async throws -> [PlaceCell: String?] {
        let unique = Array(Set(cells))
        guard !unique.isEmpty else { return [:] }
        var binds = PostgresBindings()
        binds.append(PostgresArray.integers(unique.map { Int64($0.latitude) }))
        binds.append(PostgresArray.integers(unique.map { Int64($0.longitude) }))
        var out: [PlaceCell: String?] = [:]
        for try await (lat, lon, name) in try await liveQuery(
            PostgresQuery(
                unsafeSQL: """
                    SELECT p.lat, p.lon, p.name FROM place_names p
                    JOIN unnest($1::int8[], $2::int8[]) AS c (lat, lon) ON p.lat = c.lat AND p.lon = c.lon
                    """, binds: binds), logger: logger
        ).decode((Int32, Int32, String?).self) {
            out[PlaceCell(latitude: lat, longitude: lon)] = .some(name)
        }
        return out
    }

    public func setPlaceName(_ name: String?, for cell: PlaceCell, at time: Double) async throws {
        try await liveQuery(
            """
            INSERT INTO place_names (lat, lon, name, asked) VALUES (\(cell.latitude), \(cell.longitude), \(name), \(time))
            ON CONFLICT (lat, lon) DO UPDATE SET name = excluded.name, asked = excluded.asked
            """, logger: logger)
    }
}

/// The endpoint's geofences (``EventStore``) name the places inside them (``PlaceAreaSource``): the
/// set ingest evaluates with, read at the database's geofence generation (one query; the set itself
/// is rebuilt only when the generation moved), so a geofence put or removed, on any instance, names
/// or unnames the visits read after it.
extension PostgresTrackStore: PlaceAreaSource {
    public func areaNames(device: String, containing coordinates: [Coordinate]) async throws -> [[String]] {
        guard !coordinates.isEmpty else { return [] }
        let set = try await withLiveConnection { c in try await self.geofenceSet(c) }
        return coordinates.map { set.names(containing: $0, device: device) }
    }
}
