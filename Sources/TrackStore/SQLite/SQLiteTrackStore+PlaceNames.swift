import EndpointEvents
import GRDB
import Geo

/// The reverse geocoder's names by cell (``PlaceNameStore``).
extension SQLiteTrackStore: PlaceNameStore {
    static func registerPlaceNameMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v13-place-names") { db in
            try db.execute(
                sql: """
                    CREATE TABLE place_names (
                        lat INTEGER NOT NULL, lon INTEGER NOT NULL, name TEXT, asked REAL NOT NULL,
                        PRIMARY KEY (lat, lon)
                    ) WITHOUT ROWID;
                    """)
        }
    }

    public func placeNames(_ cells: [PlaceCell]) async throws -> [PlaceCell: String?] {
        guard !cells.isEmpty else { return [:] }
        return try await pool.read { db in
            var out: [PlaceCell: String?] = [:]
            let statement = try db.cachedStatement(sql: "SELECT name FROM place_names WHERE lat = ? AND lon = ?")
            for cell in Set(cells) {
                if let row = try Row.fetchOne(statement, arguments: [cell.latitude, cell.longitude]) {
                    out[cell] = .some(row[0] as String?)
                }
            }
            return out
        }
    }

    public func setPlaceName(_ name: String?, for cell: PlaceCell, at time: Double) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO place_names (lat, lon, name, asked) VALUES (?, ?, ?, ?)",
                arguments: [cell.latitude, cell.longitude, name, time])
        }
    }
}

/// The endpoint's geofences (``EventStore``) name the places inside them (``PlaceAreaSource``): the
/// set ingest evaluates with, read at the store's geofence generation, so a geofence put or removed
/// names or unnames the visits read after it.
extension SQLiteTrackStore: PlaceAreaSource {
    public func areaNames(device: String, containing coordinates: [Coordinate]) async throws -> [[String]] {
        guard !coordinates.isEmpty else { return [] }
        let engine = storedEvents
        let set = try await pool.read { db in try Self.geofenceSet(db, engine) }
        return coordinates.map { set.names(containing: $0, device: device) }
    }
}
