import Formats
import LocationService
import PostgresNIO
import TrackServer

extension PostgresTrackStore: StopsStreaming {
    /// Visits and trips (issue 27): a record's span in a column of its own (JSON text, as
    /// `TrailRecord.spanJSON` writes it), and an index that holds all a stops query reads of a
    /// device's valid locations (an index-only scan in time order).
    static let visitsMigration = [
        "ALTER TABLE positions ADD COLUMN span text",
        """
        CREATE INDEX positions_locations ON positions (device, time) INCLUDE (position, h_acc, speed)
            WHERE kind = 'location' AND valid
        """,
    ]

    /// - Complexity: one scan of the `positions_locations` index over the range, streamed (rows are
    ///   decoded as they arrive, never all held).
    public func streamLocations(device: String, from: Double, to: Double, into accumulator: StopsAccumulator)
        async throws -> StopsAccumulator
    {
        var accumulator = accumulator
        guard !device.utf8.contains(0) else { return accumulator }
        var binds = PostgresBindings()
        binds.append(device)
        var sql = """
            SELECT extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry), h_acc, speed
            FROM positions WHERE device = $1 AND kind = 'location' AND valid
            """
        // Bounds beyond ±1e11 s (years -1200 and 5100) are none: stored times lie between 1980 and a day
        // ahead, and to_timestamp takes no time beyond PostgreSQL's range.
        if from > -1e11 {
            binds.append(from)
            sql += " AND time >= to_timestamp($\(binds.count))"
        }
        if to < 1e11 {
            binds.append(to)
            sql += " AND time <= to_timestamp($\(binds.count))"
        }
        sql += " ORDER BY time"
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        let rows = try await client.query(query, logger: logger)
        for try await (time, lat, lon, hAcc, speed) in rows.decode((Double, Double, Double, Double?, Double?).self) {
            accumulator.add(time: time, latitude: lat, longitude: lon, accuracy: hAcc, speed: speed)
        }
        return accumulator
    }
}
