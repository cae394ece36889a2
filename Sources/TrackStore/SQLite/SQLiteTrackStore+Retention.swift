import GRDB

/// Retention (`keeptrack serve --retention 90d`): points older than a cutoff are deleted a bounded
/// batch at a time, each batch in its own short write transaction, so ingest waits at most one
/// batch; the devices table (count, first time, latest position; a device with nothing left is
/// removed) changes in the same transaction as its points.
extension SQLiteTrackStore: RetentionStore {
    /// Deletes at most `limit` points whose time is before `cutoff` (seconds since 1970), of one
    /// device (the one with the oldest point), in one transaction; returns how many went (0 when
    /// nothing is older).
    ///
    /// - Complexity: O(`limit` log n): the device comes from the devices table (its `first`), its
    ///   points from the `(device, time)` index.
    public func deleteExpired(before cutoff: Double, limit: Int) async throws -> Int {
        precondition(limit > 0, "a batch deletes at least one point")
        return try await pool.write { db in
            guard
                let device = try String.fetchOne(
                    db, sql: "SELECT id FROM devices WHERE first < ? ORDER BY first LIMIT 1", arguments: [cutoff])
            else { return 0 }
            try db.execute(
                sql: """
                    DELETE FROM points WHERE key IN
                        (SELECT key FROM points WHERE device = ?1 AND time < ?2 ORDER BY time LIMIT ?3)
                    """, arguments: [device, cutoff, limit])
            let deleted = db.changesCount
            try db.execute(sql: "UPDATE devices SET points = points - ? WHERE id = ?", arguments: [deleted, device])
            let remaining =
                try Int.fetchOne(db, sql: "SELECT points FROM devices WHERE id = ?", arguments: [device]) ?? 0
            if remaining <= 0 {
                try db.execute(sql: "DELETE FROM devices WHERE id = ?", arguments: [device])
                try Self.forgetStoredStops(db, device: device, before: nil)
                return deleted
            }
            try db.execute(
                sql: """
                    UPDATE devices SET first = (SELECT MIN(time) FROM points WHERE device = ?1) WHERE id = ?1
                    """, arguments: [device])
            let first = try Double.fetchOne(db, sql: "SELECT first FROM devices WHERE id = ?", arguments: [device])
            try Self.forgetStoredStops(db, device: device, before: first)
            // The latest position goes only when every newer valid point went too.
            let latest = try Double.fetchOne(
                db, sql: "SELECT latestTime FROM devices WHERE id = ?", arguments: [device])
            if let latest, latest < cutoff { try Self.refreshLatest(db, device: device) }
            return deleted
        }
    }
}
