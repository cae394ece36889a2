import Formats
import LocationService
import PostgresNIO
import TrackStore

extension PostgresTrackStore {
    /// Visits and trips: a record's span in a column of its own (JSON text, as
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
        // The time bounds as the stored stops read them (none beyond ±1e11 s).
        let query = Self.points(device: device, after: -.infinity, through: to, from: from, limit: nil)
        let rows = try await liveQuery(query, logger: logger)
        for try await row in rows {
            var cells = RowCells(row)
            let p = try cells.point()
            accumulator.add(
                time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.accuracy, speed: p.speed)
        }
        return accumulator
    }
}
