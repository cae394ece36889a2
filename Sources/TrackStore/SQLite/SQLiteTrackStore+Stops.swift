import Formats
import GRDB
import LocationService

extension SQLiteTrackStore {
    /// Visits and trips: a record's ``TrailRecord/Span`` in a column of its own (JSON, as
    /// ``TrailRecord/spanJSON(_:)`` writes it), and an index that holds all a stops query reads of a
    /// device's valid locations, so that the query scans the index in time order and never the table
    /// (`kind` and `valid` in it too: without them SQLite would look each row up in the table to test
    /// the query's terms).
    static func registerStopsMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v7-visits-and-trips") { db in
            try db.execute(
                sql: """
                    ALTER TABLE points ADD COLUMN span TEXT;
                    CREATE INDEX points_locations ON points (device, time, lat, lon, hAcc, speed, kind, valid)
                        WHERE kind = 'location' AND valid = 1;
                    """)
        }
    }

    /// - Complexity: one scan of the `points_locations` index over the range (no table lookups).
    public func streamLocations(device: String, from: Double, to: Double, into accumulator: StopsAccumulator)
        async throws -> StopsAccumulator
    {
        let range: StatementArguments = [device, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]
        return try await pool.read { db in
            var accumulator = accumulator
            let statement = try db.cachedStatement(
                sql: """
                    SELECT time, lat, lon, hAcc, speed FROM points INDEXED BY points_locations
                    WHERE device = ? AND time >= ? AND time <= ? AND kind = 'location' AND valid = 1
                    ORDER BY time
                    """)
            let rows = try Row.fetchCursor(statement, arguments: range)
            while let row = try rows.next() {
                accumulator.add(
                    time: row[0], latitude: row[1], longitude: row[2], accuracy: row[3] as Double?,
                    speed: row[4] as Double?)
            }
            return accumulator
        }
    }
}
