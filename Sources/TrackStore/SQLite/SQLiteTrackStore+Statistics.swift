import Formats
import Geo
import GRDB
import LocationService

/// The statistics of ``Statistics``: buckets of a quarter hour per device (`stat_buckets`), rebuilt
/// from the stored trips and visits over the spans that triggers on `stops` and `trips` mark
/// (`stat_dirty`), in the transaction that changed them (the batch's, at ingest) or, for spans marked
/// by retention or an upgrade, before the next statistics query of the device.
extension SQLiteTrackStore: StatisticsStore {
    static func registerStatisticsMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v11-statistics") { db in
            try db.execute(
                sql: """
                    CREATE TABLE stat_buckets (
                        device TEXT NOT NULL, bucket INTEGER NOT NULL, distance REAL NOT NULL, moving REAL NOT NULL,
                        stopped REAL NOT NULL, trip_starts INTEGER NOT NULL, trip_carried INTEGER NOT NULL,
                        max_speed REAL, PRIMARY KEY (device, bucket)
                    ) WITHOUT ROWID;
                    CREATE TABLE stat_dirty (device TEXT NOT NULL, lo REAL NOT NULL, hi REAL NOT NULL);
                    CREATE INDEX stat_dirty_device ON stat_dirty (device);
                    CREATE INDEX stops_departure ON stops (device, departure);
                    CREATE INDEX trips_end ON trips (device, tripEnd);
                    CREATE TRIGGER stops_stat_replaced BEFORE INSERT ON stops BEGIN
                        INSERT INTO stat_dirty SELECT device, arrival, departure FROM stops
                        WHERE device = NEW.device AND decided = NEW.decided;
                    END;
                    CREATE TRIGGER stops_stat_inserted AFTER INSERT ON stops BEGIN
                        INSERT INTO stat_dirty VALUES (NEW.device, NEW.arrival, NEW.departure);
                    END;
                    CREATE TRIGGER stops_stat_deleted AFTER DELETE ON stops BEGIN
                        INSERT INTO stat_dirty VALUES (OLD.device, OLD.arrival, OLD.departure);
                    END;
                    CREATE TRIGGER trips_stat_replaced BEFORE INSERT ON trips BEGIN
                        INSERT INTO stat_dirty SELECT device, tripStart, tripEnd FROM trips
                        WHERE device = NEW.device AND decided = NEW.decided;
                    END;
                    CREATE TRIGGER trips_stat_inserted AFTER INSERT ON trips BEGIN
                        INSERT INTO stat_dirty VALUES (NEW.device, NEW.tripStart, NEW.tripEnd);
                    END;
                    CREATE TRIGGER trips_stat_deleted AFTER DELETE ON trips BEGIN
                        INSERT INTO stat_dirty VALUES (OLD.device, OLD.tripStart, OLD.tripEnd);
                    END;
                    INSERT INTO stat_dirty SELECT device, min(arrival), max(departure) FROM stops GROUP BY device;
                    INSERT INTO stat_dirty SELECT device, min(tripStart), max(tripEnd) FROM trips GROUP BY device;
                    """)
        }
    }

    /// Rebuilds the buckets of the spans marked for `device` and clears its marks.
    static func rebuildStatistics(_ db: Database, device: String) throws {
        let spans = try Row.fetchAll(
            db, sql: "SELECT lo, hi FROM stat_dirty WHERE device = ?", arguments: [device]
        ).map { (Statistics.bucket($0[0]), Statistics.bucket($0[1]) + 1) }
        guard !spans.isEmpty else { return }
        let delete = try db.cachedStatement(
            sql: "DELETE FROM stat_buckets WHERE device = ? AND bucket >= ? AND bucket < ?")
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO stat_buckets (device, bucket, distance, moving, stopped, trip_starts, trip_carried, max_speed)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for range in Statistics.merged(spans) {
            let lo = Double(range.lowerBound) * Statistics.bucketSeconds
            let hi = Double(range.upperBound) * Statistics.bucketSeconds
            try delete.execute(arguments: [device, range.lowerBound, range.upperBound])
            let visits = try Row.fetchAll(
                db, sql: "SELECT arrival, departure FROM stops WHERE device = ? AND departure >= ? AND arrival < ?",
                arguments: [device, lo, hi]
            ).map { (arrival: $0[0] as Double, departure: $0[1] as Double) }
            let trips = try Row.fetchAll(
                db,
                sql: """
                    SELECT tripStart, tripEnd, distance, maxSpeed FROM trips
                    WHERE device = ? AND tripEnd >= ? AND tripStart < ?
                    """, arguments: [device, lo, hi]
            ).map {
                Trip(
                    start: $0[0], end: $0[1], startCoordinate: Coordinate(latitude: 0, longitude: 0),
                    endCoordinate: Coordinate(latitude: 0, longitude: 0), distance: $0[2], maximumSpeed: $0[3])
            }
            for b in Statistics.buckets(range, visits: visits, trips: trips) {
                try insert.execute(arguments: [
                    device, b.index, b.distance, b.moving, b.stopped, b.tripStarts, b.tripCarried, b.maxSpeed,
                ])
            }
        }
        try db.execute(sql: "DELETE FROM stat_dirty WHERE device = ?", arguments: [device])
    }

    public func statisticsSource(device: String, from: Double, to: Double) async throws -> Statistics.Source {
        let (stops, marked) = try await pool.read { db -> (Bool, Bool) in
            let dirty = try Row.fetchOne(
                db, sql: "SELECT dirty_from FROM stop_detectors WHERE device = ?", arguments: [device])
            let stops =
                dirty == nil
                ? try Bool.fetchOne(db, sql: "SELECT 1 FROM devices WHERE id = ?", arguments: [device]) ?? false
                : dirty?[0] as Double? != nil
            let marked =
                try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM stat_dirty WHERE device = ? LIMIT 1", arguments: [device]) ?? false
            return (stops, marked)
        }
        if stops || marked {
            try await pool.write { db in
                if stops {
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO stop_detectors (device, dirty_from) VALUES (?, ?)",
                        arguments: [device, StoredStops.neverComputed])
                    _ = try Self.advanceStoredStops(
                        db, device: device, computingAll: true, configuration: self.stopsConfiguration,
                        logger: self.logger)
                }
                try Self.rebuildStatistics(db, device: device)
            }
        }
        return try await pool.read { db in
            let first = Statistics.bucket(from), past = Statistics.bucket(to)
            let buckets = try Row.fetchAll(
                db,
                sql: """
                    SELECT bucket, distance, moving, stopped, trip_starts, trip_carried, max_speed FROM stat_buckets
                    WHERE device = ? AND bucket >= ? AND bucket < ? ORDER BY bucket
                    """, arguments: [device, first, past]
            ).map {
                Statistics.Bucket(
                    index: $0[0], distance: $0[1], moving: $0[2], stopped: $0[3], tripStarts: $0[4],
                    tripCarried: $0[5], maxSpeed: $0[6])
            }
            var visits = try Row.fetchAll(
                db,
                sql: """
                    SELECT arrival, departure, lat, lon FROM stops INDEXED BY stops_departure
                    WHERE device = ? AND departure >= ? AND arrival < ? ORDER BY arrival
                    """, arguments: [device, from, to]
            ).map {
                Statistics.VisitSpan(
                    arrival: $0[0], end: $0[1], coordinate: Coordinate(latitude: $0[2], longitude: $0[3]))
            }
            if let text = try String.fetchOne(
                db, sql: "SELECT state FROM stop_detectors WHERE device = ?", arguments: [device]),
                let open = Statistics.openVisit(
                    try StoredStops.decode(text, device: device, at: nil), from: from, to: to)
            {
                visits.append(open)
            }
            return Statistics.Source(buckets: buckets, visits: visits)
        }
    }
}
