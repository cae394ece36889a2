import PostgresNIO
import TrackStore

/// Retention on PostgreSQL (``RetentionStore``): bounded delete batches, each its own short
/// transaction.
extension PostgresTrackStore: RetentionStore {
    /// One transaction: the device with the oldest point is locked (its summary row, as ingest's
    /// upsert locks it), at most `limit` of its points before `cutoff` deleted through the
    /// `(device, time)` index, and its summary corrected.
    public func deleteExpired(before cutoff: Double, limit: Int) async throws -> Int {
        precondition(limit > 0, "a batch deletes at least one point")
        return try await retryingConflicts {
            try await self.withLiveConnection { connection in
                try await connection.withTransaction(logger: self.logger) { c in
                    var device: String?
                    for try await id in try await c.query(
                        """
                        SELECT id FROM devices WHERE first < to_timestamp(\(cutoff)) ORDER BY first LIMIT 1 FOR UPDATE
                        """, logger: self.logger
                    ).decode(String.self) { device = id }
                    guard let device else { return 0 }
                    var deleted = 0
                    for try await n in try await c.query(
                        """
                        WITH gone AS (
                            DELETE FROM positions WHERE key IN (SELECT key FROM positions
                                WHERE device = \(device) AND time < to_timestamp(\(cutoff)) ORDER BY time LIMIT \(Int64(limit)))
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """, logger: self.logger
                    ).decode(Int64.self) { deleted = Int(n) }
                    var remaining: Int64 = 0
                    var stale = false
                    for try await (points, old) in try await c.query(
                        """
                        UPDATE devices SET points = points - \(Int64(deleted)),
                            first = COALESCE((SELECT min(time) FROM positions WHERE device = \(device)), first)
                        WHERE id = \(device)
                        RETURNING points, COALESCE(latest_time < to_timestamp(\(cutoff)), false)
                        """, logger: self.logger
                    ).decode((Int64, Bool).self) { (remaining, stale) = (points, old) }
                    try await Self.forgetStoredStops(c, device: device, logger: self.logger)
                    if remaining <= 0 {
                        try await c.query("DELETE FROM devices WHERE id = \(device)", logger: self.logger)
                    } else if stale {
                        var binds = PostgresBindings()
                        binds.append(device)
                        try await c.query(
                            PostgresQuery(unsafeSQL: Self.refreshLatestSQL(where: "d.id = $1"), binds: binds),
                            logger: self.logger)
                    }
                    return deleted
                }
            }
        }
    }
}
