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

    /// The columns a mark's `RETURNING` reads: the row's time and position.
    static let markedRow = "extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry)"

    /// Marks the locations the detector marked, by time (and position, for a point marked on its own),
    /// noting in `changes` each row whose mark it changed.
    static func markOutliers(
        _ c: PostgresConnection, device: String,
        _ outliers: [(time: Double, reason: OutlierFilter.Reason, coordinate: Coordinate?)],
        changes: inout OutlierMarks.Changes, logger: Logger
    ) async throws {
        for o in outliers {
            let reason = o.reason.rawValue
            var binds = PostgresBindings()
            binds.append(reason)
            binds.append(device)
            binds.append(o.time)
            var sql = """
                UPDATE positions SET outlier = $1 WHERE device = $2 AND time = to_timestamp($3)
                    AND kind = 'location' AND valid AND outlier IS DISTINCT FROM $1
                """
            if let p = o.coordinate {
                binds.append(p.latitude)
                binds.append(p.longitude)
                sql += " AND ST_Y(position::geometry) = $4 AND ST_X(position::geometry) = $5"
            }
            sql += " RETURNING " + markedRow
            for try await (t, lat, lon) in try await c.query(
                PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger
            ).decode((Double, Double, Double).self) {
                changes.marked(time: t, latitude: lat, longitude: lon, as: reason)
            }
        }
    }

    /// Moves the `pending` mark (``StoredStops/pendingMark``) of each device of `moves` from the
    /// point the detector held when it started (`was`, unless the next point marked it a jump) to the
    /// one it holds now (`now`), each named by its time and position: two statements for all. A
    /// detector that holds the point it held (and did not run again from a checkpoint, `rewound`)
    /// leaves the mark as it is. Each row whose mark changed is noted in its device's `changes`.
    static func markPending(
        _ c: PostgresConnection,
        _ moves: [(device: String, was: VisitDetector.Sample?, now: VisitDetector.Sample?, rewound: Bool)],
        changes: inout [String: OutlierMarks.Changes], logger: Logger
    ) async throws {
        let mark = StoredStops.pendingMark
        let cleared = moves.compactMap { m in m.was.flatMap { $0 != m.now ? (m.device, $0) : nil } }
        let marked = moves.compactMap { m in m.now.flatMap { $0 != m.was || m.rewound ? (m.device, $0) : nil } }
        for (samples, set, condition) in [
            (cleared, false, "outlier = '\(mark)'"), (marked, true, "outlier IS NULL"),
        ] where !samples.isEmpty {
            var binds = PostgresBindings()
            binds.append(PostgresArray.texts(samples.map(\.0)))
            binds.append(PostgresArray.doubles(samples.map(\.1.time)))
            binds.append(PostgresArray.doubles(samples.map(\.1.coordinate.latitude)))
            binds.append(PostgresArray.doubles(samples.map(\.1.coordinate.longitude)))
            let rows = try await c.query(
                PostgresQuery(
                    unsafeSQL: """
                        UPDATE positions p SET outlier = \(set ? "'\(mark)'" : "NULL")
                        FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[]) AS u(device, t, lat, lon)
                        WHERE p.device = u.device AND p.time = to_timestamp(u.t) AND p.kind = 'location' AND p.valid
                          AND ST_Y(p.position::geometry) = u.lat AND ST_X(p.position::geometry) = u.lon
                          AND p.\(condition)
                        RETURNING p.device, extract(epoch FROM p.time)::float8, ST_Y(p.position::geometry),
                                  ST_X(p.position::geometry)
                        """, binds: binds), logger: logger)
            for try await (device, t, lat, lon) in rows.decode((String, Double, Double, Double).self) {
                if set {
                    changes[device, default: .init()].marked(time: t, latitude: lat, longitude: lon, as: mark)
                } else {
                    changes[device, default: .init()].cleared(time: t, latitude: lat, longitude: lon, was: mark)
                }
            }
        }
    }

    /// Clears the marks after `time` (the detector runs again from a checkpoint there and marks anew),
    /// noting the rows and their marks in `changes`.
    static func clearOutliers(
        _ c: PostgresConnection, device: String, after time: Double, changes: inout OutlierMarks.Changes,
        logger: Logger
    ) async throws {
        var binds = PostgresBindings()
        binds.append(device)
        var sql = """
            UPDATE positions p SET outlier = NULL FROM positions o
            WHERE o.key = p.key AND p.device = $1 AND p.outlier IS NOT NULL
            """
        if time > -1e11 {
            binds.append(time)
            sql += " AND p.time > to_timestamp($2)"
        }
        // The mark each row had: the joined row's, as it was before the update.
        sql += """
             RETURNING extract(epoch FROM p.time)::float8, ST_Y(p.position::geometry), ST_X(p.position::geometry),
                o.outlier
            """
        for try await (t, lat, lon, was) in try await c.query(
            PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger
        ).decode((Double, Double, Double, String).self) {
            changes.cleared(time: t, latitude: lat, longitude: lon, was: was)
        }
    }
}
