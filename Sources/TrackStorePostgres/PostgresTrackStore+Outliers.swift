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

    /// Moves the `pending` mark (``StoredStops/pendingMark``) of each device of `moves` from the
    /// point the detector held when it started (`was`, unless the next point marked it a jump) to the
    /// one it holds now (`now`), each named by its time and position: two statements for all. A
    /// detector that holds the point it held (and did not run again from a checkpoint, `rewound`)
    /// leaves the mark as it is.
    static func markPending(
        _ c: PostgresConnection,
        _ moves: [(device: String, was: VisitDetector.Sample?, now: VisitDetector.Sample?, rewound: Bool)],
        logger: Logger
    ) async throws {
        let mark = StoredStops.pendingMark
        let cleared = moves.compactMap { m in m.was.flatMap { $0 != m.now ? (m.device, $0) : nil } }
        let marked = moves.compactMap { m in m.now.flatMap { $0 != m.was || m.rewound ? (m.device, $0) : nil } }
        for (samples, set, condition) in [
            (cleared, "NULL", "outlier = '\(mark)'"), (marked, "'\(mark)'", "outlier IS NULL"),
        ] where !samples.isEmpty {
            var binds = PostgresBindings()
            binds.append(PostgresArray.texts(samples.map(\.0)))
            binds.append(PostgresArray.doubles(samples.map(\.1.time)))
            binds.append(PostgresArray.doubles(samples.map(\.1.coordinate.latitude)))
            binds.append(PostgresArray.doubles(samples.map(\.1.coordinate.longitude)))
            try await c.query(
                PostgresQuery(
                    unsafeSQL: """
                        UPDATE positions p SET outlier = \(set)
                        FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[]) AS u(device, t, lat, lon)
                        WHERE p.device = u.device AND p.time = to_timestamp(u.t) AND p.kind = 'location' AND p.valid
                          AND ST_Y(p.position::geometry) = u.lat AND ST_X(p.position::geometry) = u.lon
                          AND p.\(condition)
                        """, binds: binds), logger: logger)
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
