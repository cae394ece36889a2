import Geo
import LocationService
import Logging
import PostgresNIO
import TrackStore

/// Outliers marked, never dropped (see the SQLite store's): the reason in the `outlier` column of a
/// location the device's detector marked, set as the detector runs over the batch that stored it (in
/// the transaction that holds the device's `stop_detectors` row, right after the batch's own).
extension PostgresTrackStore {
    public var stopsConfiguration: VisitDetector.Configuration { stopsSettings.withLock { $0 } }

    public func setMaximumAccuracy(_ metres: Double) {
        stopsSettings.withLock { $0.maximumAccuracy = metres }
    }

    /// The `outlier` column; every device's stored stops computed again by its first query (the
    /// detector's stored state changed form).
    static let outliersMigration = [
        "ALTER TABLE positions ADD COLUMN outlier text",
        // The marked points alone: clearing a device's marks reads this, not its points.
        "CREATE INDEX positions_outliers ON positions (device, time) WHERE outlier IS NOT NULL",
        "DELETE FROM stop_checkpoints",
        "DELETE FROM stops",
        "DELETE FROM trips",
        "UPDATE stop_detectors SET state = NULL, checkpointed = NULL, dirty_from = \(StoredStops.neverComputed)",
    ]

    /// Marks the locations the detector marked, by time (and position, for a point marked on its own).
    static func markOutliers(
        _ c: PostgresConnection, device: String,
        _ outliers: [(time: Double, reason: OutlierFilter.Reason, coordinate: Coordinate?)], logger: Logger
    ) async throws {
        for o in outliers {
            let reason = o.reason.rawValue
            if let p = o.coordinate {
                try await c.query(
                    """
                    UPDATE positions SET outlier = \(reason) WHERE device = \(device)
                        AND time = to_timestamp(\(o.time)) AND kind = 'location' AND valid
                        AND ST_Y(position::geometry) = \(p.latitude) AND ST_X(position::geometry) = \(p.longitude)
                    """, logger: logger)
            } else {
                try await c.query(
                    """
                    UPDATE positions SET outlier = \(reason) WHERE device = \(device)
                        AND time = to_timestamp(\(o.time)) AND kind = 'location' AND valid
                    """, logger: logger)
            }
        }
    }

    /// Moves the `pending` mark (``StoredStops/pendingMark``) from the point the detector held when it
    /// started (`was`, unless the next point marked it a jump) to the one it holds now (`now`), each
    /// named by its time and position.
    static func markPending(
        _ c: PostgresConnection, device: String, was: VisitDetector.Sample?, now: VisitDetector.Sample?,
        logger: Logger
    ) async throws {
        let mark = StoredStops.pendingMark
        if let was, was != now {
            let (lat, lon) = (was.coordinate.latitude, was.coordinate.longitude)
            try await c.query(
                """
                UPDATE positions SET outlier = NULL WHERE device = \(device) AND time = to_timestamp(\(was.time))
                    AND kind = 'location' AND valid AND ST_Y(position::geometry) = \(lat)
                    AND ST_X(position::geometry) = \(lon) AND outlier = \(mark)
                """, logger: logger)
        }
        if let now {
            let (lat, lon) = (now.coordinate.latitude, now.coordinate.longitude)
            try await c.query(
                """
                UPDATE positions SET outlier = \(mark) WHERE device = \(device) AND time = to_timestamp(\(now.time))
                    AND kind = 'location' AND valid AND ST_Y(position::geometry) = \(lat)
                    AND ST_X(position::geometry) = \(lon) AND outlier IS NULL
                """, logger: logger)
        }
    }

    /// Clears the marks after `time` (the detector runs again from a checkpoint there and marks anew).
    static func clearOutliers(_ c: PostgresConnection, device: String, after time: Double, logger: Logger)
        async throws
    {
        var binds = PostgresBindings()
        binds.append(device)
        var sql = "UPDATE positions SET outlier = NULL WHERE device = $1 AND outlier IS NOT NULL"
        if time > -1e11 {
            binds.append(time)
            sql += " AND time > to_timestamp($2)"
        }
        try await c.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    }
}
