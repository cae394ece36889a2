import Geo
import GRDB
import LocationService

/// Outliers marked, never dropped: a location the device's ``OutlierFilter`` marks (no position, an
/// accuracy worse than the threshold, a jump and back) keeps its row, with the reason in its
/// `outlier` column, set as the detector runs over the batch that stored it (in the batch's own
/// transaction). Trails leave marked locations out unless asked (`includeOutliers`); stops and trips
/// leave them out because the detector does.
extension SQLiteTrackStore {
    /// The `outlier` column, and an index of the marked points alone (clearing a device's marks
    /// reads it, not the device's points: a first query computing all would otherwise read every
    /// row of the table). The detector's stored state changed form with the outlier filter and the
    /// smoothed trip figures: every device's stored stops are computed again by its first query, which
    /// marks its outliers (``StoredStops/neverComputed``).
    static func registerOutlierMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v10-outliers") { db in
            try db.execute(
                sql: """
                    ALTER TABLE points ADD COLUMN outlier TEXT;
                    CREATE INDEX points_outliers ON points (device, time) WHERE outlier IS NOT NULL;
                    DELETE FROM stop_checkpoints;
                    DELETE FROM stops;
                    DELETE FROM trips;
                    """)
            try db.execute(
                sql: "UPDATE stop_detectors SET state = NULL, checkpointed = NULL, dirty_from = ?",
                arguments: [StoredStops.neverComputed])
        }
    }

    /// Marks the locations the detector marked, by time (and position, for a point marked on its own),
    /// noting in `changes` each row whose mark it changed.
    static func markOutliers(
        _ db: Database, device: String,
        _ outliers: [(time: Double, reason: OutlierFilter.Reason, coordinate: Coordinate?)],
        changes: inout OutlierMarks.Changes
    ) throws {
        guard !outliers.isEmpty else { return }
        let mark = try db.cachedStatement(
            sql: """
                UPDATE points SET outlier = ? WHERE device = ? AND time = ? AND kind = 'location' AND valid = 1
                    AND (? IS NULL OR (lat = ? AND lon = ?)) AND outlier IS NOT ?
                RETURNING time, lat, lon
                """)
        for o in outliers {
            let lat = o.coordinate?.latitude, lon = o.coordinate?.longitude
            let reason = o.reason.rawValue
            for row in try Row.fetchAll(mark, arguments: [reason, device, o.time, lat, lat, lon, reason]) {
                changes.marked(time: row[0], latitude: row[1], longitude: row[2], as: reason)
            }
        }
    }

    /// Moves the `pending` mark (``StoredStops/pendingMark``) from the point the detector held when it
    /// started (`was`, unless the next point marked it a jump) to the one it holds now (`now`), each
    /// named by its time and position, noting the rows in `changes`.
    static func markPending(
        _ db: Database, device: String, was: VisitDetector.Sample?, now: VisitDetector.Sample?,
        changes: inout OutlierMarks.Changes
    ) throws {
        let mark = StoredStops.pendingMark
        if let was, was != now {
            for row in try Row.fetchAll(
                db,
                sql: """
                    UPDATE points SET outlier = NULL WHERE device = ? AND time = ? AND kind = 'location' AND valid = 1
                        AND lat = ? AND lon = ? AND outlier = ?
                    RETURNING time, lat, lon
                    """,
                arguments: [device, was.time, was.coordinate.latitude, was.coordinate.longitude, mark])
            {
                changes.cleared(time: row[0], latitude: row[1], longitude: row[2], was: mark)
            }
        }
        if let now {
            for row in try Row.fetchAll(
                db,
                sql: """
                    UPDATE points SET outlier = ? WHERE device = ? AND time = ? AND kind = 'location' AND valid = 1
                        AND lat = ? AND lon = ? AND outlier IS NULL
                    RETURNING time, lat, lon
                    """,
                arguments: [mark, device, now.time, now.coordinate.latitude, now.coordinate.longitude])
            {
                changes.marked(time: row[0], latitude: row[1], longitude: row[2], as: mark)
            }
        }
    }

    /// Clears the marks after `time` (the detector runs again from a checkpoint there and marks anew),
    /// noting the rows and their marks in `changes`.
    static func clearOutliers(
        _ db: Database, device: String, after time: Double, changes: inout OutlierMarks.Changes
    ) throws {
        let marked = try Row.fetchAll(
            db,
            sql: """
                SELECT time, lat, lon, outlier FROM points INDEXED BY points_outliers
                WHERE device = ? AND time > ? AND outlier IS NOT NULL
                """,
            arguments: [device, time])
        guard !marked.isEmpty else { return }
        for row in marked {
            changes.cleared(time: row[0], latitude: row[1], longitude: row[2], was: row[3])
        }
        try db.execute(
            sql: """
                UPDATE points SET outlier = NULL WHERE key IN (
                    SELECT key FROM points INDEXED BY points_outliers
                    WHERE device = ? AND time > ? AND outlier IS NOT NULL)
                """,
            arguments: [device, time])
    }
}
