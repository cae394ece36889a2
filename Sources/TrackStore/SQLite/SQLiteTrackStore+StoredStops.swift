import Formats
import Geo
import GRDB
import LocationService
import Logging

/// Stops and trips kept at ingest (``StoredStops``): the detector runs in the transaction that stores
/// a batch's points (SQLite has one writer: the batches of a device are taken one after the other).
extension SQLiteTrackStore: StopStore {
    /// The tables of ``StoredStops``. A store upgraded from v7 marks its devices never computed: the
    /// first stops or trips query of each computes them (as long as a read-time query, once).
    static func registerStoredStopsMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v8-stored-stops") { db in
            try db.execute(
                sql: """
                    CREATE TABLE stop_detectors (
                        device TEXT PRIMARY KEY, state TEXT, checkpointed REAL, dirty_from REAL
                    ) WITHOUT ROWID;
                    CREATE TABLE stop_checkpoints (
                        device TEXT NOT NULL, time REAL NOT NULL, state TEXT NOT NULL, PRIMARY KEY (device, time)
                    ) WITHOUT ROWID;
                    CREATE TABLE stops (
                        device TEXT NOT NULL, decided REAL NOT NULL, arrival REAL NOT NULL, departure REAL NOT NULL,
                        lat REAL NOT NULL, lon REAL NOT NULL, radius REAL NOT NULL, fixes INTEGER NOT NULL,
                        PRIMARY KEY (device, decided)
                    ) WITHOUT ROWID;
                    CREATE TABLE trips (
                        device TEXT NOT NULL, decided REAL NOT NULL, tripStart REAL NOT NULL, tripEnd REAL NOT NULL,
                        startLat REAL NOT NULL, startLon REAL NOT NULL, endLat REAL NOT NULL, endLon REAL NOT NULL,
                        distance REAL NOT NULL, maxSpeed REAL NOT NULL, PRIMARY KEY (device, decided)
                    ) WITHOUT ROWID;
                    """)
            try db.execute(
                sql: "INSERT INTO stop_detectors (device, dirty_from) SELECT id, ? FROM devices",
                arguments: [StoredStops.neverComputed])
        }
    }

    public var stopsConfiguration: VisitDetector.Configuration { stopsSettings.withLock { $0 } }

    public func setMaximumAccuracy(_ metres: Double) {
        stopsSettings.withLock { $0.maximumAccuracy = metres }
    }

    /// After a batch's points are in (same transaction): marks each device dirty from its earliest new
    /// location and runs its detector from there (with `configuration`); returns what it found, and
    /// the outlier marks it changed.
    static func advanceStoredStops(
        _ db: Database, earliest: [String: Double], configuration: VisitDetector.Configuration, logger: Logger
    ) throws -> (stops: [StopEvent], outliers: [OutlierMarks]) {
        var events: [StopEvent] = []
        var outliers: [OutlierMarks] = []
        for (device, time) in earliest.sorted(by: { $0.key < $1.key }) {
            try db.execute(
                sql: """
                    INSERT INTO stop_detectors (device, dirty_from) VALUES (?, ?) ON CONFLICT (device) DO UPDATE
                        SET dirty_from = min(coalesce(dirty_from, excluded.dirty_from), excluded.dirty_from)
                    """, arguments: [device, time])
            let run = try advanceStoredStopsAndMarks(
                db, device: device, computingAll: false, configuration: configuration, logger: logger)
            events += run.stops
            if let marks = run.outliers { outliers.append(marks) }
        }
        return (events, outliers)
    }

    /// Runs `device`'s detector over the points after its `dirty_from`, from its state (points in time
    /// order) or from the latest checkpoint before that time (a late point), and stores what it decided.
    /// A device never computed is left alone unless `computingAll`. The points it runs over are
    /// judged with `configuration` (the store's: ``stopsConfiguration``).
    static func advanceStoredStops(
        _ db: Database, device: String, computingAll: Bool, configuration: VisitDetector.Configuration,
        logger: Logger
    ) throws -> [StopEvent] {
        try advanceStoredStopsAndMarks(
            db, device: device, computingAll: computingAll, configuration: configuration, logger: logger
        ).stops
    }

    /// ``advanceStoredStops(_:device:computingAll:configuration:)``, with the outlier marks it changed
    /// (`nil`: none, or a device never computed, whose whole history it marks).
    static func advanceStoredStopsAndMarks(
        _ db: Database, device: String, computingAll: Bool, configuration: VisitDetector.Configuration,
        logger: Logger
    ) throws -> (stops: [StopEvent], outliers: OutlierMarks?) {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT state, checkpointed, dirty_from FROM stop_detectors WHERE device = ?",
                arguments: [device]),
            let dirty = row[2] as Double?
        else { return ([], nil) }
        if dirty <= StoredStops.neverComputed && !computingAll { return ([], nil) }
        var changes = OutlierMarks.Changes()
        var advance: StoredStops.Advance
        var after: Double
        // A saved state or checkpoint that does not read back is passed over (``StoredStops/resumable(_:device:at:logger:)``).
        let state = StoredStops.resumable(row[0] as String?, device: device, at: nil, logger: logger)
        if let state, let last = state.lastGiven, dirty > last {
            advance = StoredStops.Advance(
                from: state, checkpointed: row[1] as Double? ?? -.infinity, configuration: configuration)
            after = last
        } else {
            if let cp = try Row.fetchOne(
                db,
                sql:
                    "SELECT time, state FROM stop_checkpoints WHERE device = ? AND time < ? ORDER BY time DESC LIMIT 1",
                arguments: [device, dirty]),
                let detector = StoredStops.resumable(cp[1] as String, device: device, at: cp[0], logger: logger)
            {
                after = cp[0]
                advance = StoredStops.Advance(from: detector, checkpointed: after, configuration: configuration)
            } else {
                after = -Double.greatestFiniteMagnitude
                advance = StoredStops.Advance(from: nil, checkpointed: -.infinity, configuration: configuration)
            }
            for table in [
                "stop_checkpoints WHERE device = ? AND time > ?", "stops WHERE device = ? AND decided > ?",
                "trips WHERE device = ? AND decided > ?",
            ] {
                try db.execute(sql: "DELETE FROM " + table, arguments: [device, after])
            }
            try clearOutliers(db, device: device, after: after, changes: &changes)
        }
        let points = try Row.fetchCursor(
            db,
            sql: """
                SELECT time, lat, lon, hAcc, speed FROM points INDEXED BY points_locations
                WHERE device = ? AND time > ? AND kind = 'location' AND valid = 1 ORDER BY time
                """, arguments: [device, after])
        while let p = try points.next() {
            advance.add(time: p[0], latitude: p[1], longitude: p[2], accuracy: p[3] as Double?, speed: p[4] as Double?)
        }
        try markOutliers(db, device: device, advance.outliers, changes: &changes)
        try markPending(db, device: device, was: advance.startPending, now: advance.pending, changes: &changes)
        let insertStop = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO stops (device, decided, arrival, departure, lat, lon, radius, fixes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for (decided, v) in advance.stops {
            try insertStop.execute(arguments: [
                device, decided, v.arrival, v.departure, v.coordinate.latitude, v.coordinate.longitude,
                v.horizontalAccuracy, v.fixCount,
            ])
        }
        let insertTrip = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO trips (device, decided, tripStart, tripEnd, startLat, startLon, endLat, endLon,
                    distance, maxSpeed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for (decided, t) in advance.trips {
            try insertTrip.execute(arguments: [
                device, decided, t.start, t.end, t.startCoordinate.latitude, t.startCoordinate.longitude,
                t.endCoordinate.latitude, t.endCoordinate.longitude, t.distance, t.maximumSpeed,
            ])
        }
        let insertCheckpoint = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO stop_checkpoints (device, time, state) VALUES (?, ?, ?)")
        for (time, state) in advance.checkpoints {
            try insertCheckpoint.execute(arguments: [device, time, try StoredStops.encode(state)])
        }
        try db.execute(
            sql: "UPDATE stop_detectors SET state = ?, checkpointed = ?, dirty_from = NULL WHERE device = ?",
            arguments: [try StoredStops.encode(advance.detector), advance.checkpointed, device])
        try rebuildStatistics(db, device: device)
        let marks =
            dirty <= StoredStops.neverComputed
            ? nil : changes.marks(device: device, time: advance.detector.lastGiven ?? dirty)
        return (computingAll ? [] : advance.events(device: device, since: dirty), marks)
    }

    /// Retention deleted `device`'s points before `first` (its first remaining point; `nil`: none
    /// left): the checkpoints, stops and trips before it go too (a query meets no checkpoint before
    /// its first point; one before points that went would no longer hold).
    static func forgetStoredStops(_ db: Database, device: String, before first: Double?) throws {
        guard let first else {
            for table in ["stop_detectors", "stop_checkpoints", "stops", "trips"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE device = ?", arguments: [device])
            }
            return
        }
        try db.execute(sql: "DELETE FROM stop_checkpoints WHERE device = ? AND time < ?", arguments: [device, first])
        try db.execute(sql: "DELETE FROM stops WHERE device = ? AND decided < ?", arguments: [device, first])
        try db.execute(sql: "DELETE FROM trips WHERE device = ? AND decided < ?", arguments: [device, first])
        // A visit kept that began before the first point left begins with it, as a query from there
        // finds it (no query uses the stored one: it was decided before any checkpoint a query meets);
        // its statistics are rebuilt.
        try db.execute(
            sql: "INSERT INTO stat_dirty SELECT device, arrival, departure FROM stops WHERE device = ? AND arrival < ?",
            arguments: [device, first])
        try db.execute(
            sql: "UPDATE stops SET arrival = ? WHERE device = ? AND arrival < ?", arguments: [first, device, first])
    }

    public func storedStops(device: String, from: Double, to: Double) async throws -> StopsReport {
        let pending = try await pool.read { db -> Bool in
            let dirty = try Row.fetchOne(
                db, sql: "SELECT dirty_from FROM stop_detectors WHERE device = ?", arguments: [device])
            guard let dirty else {
                return try Bool.fetchOne(db, sql: "SELECT 1 FROM devices WHERE id = ?", arguments: [device]) ?? false
            }
            return dirty[0] as Double? != nil
        }
        let configuration = stopsConfiguration
        if pending {
            try await pool.write { db in
                try db.execute(
                    sql: "INSERT OR IGNORE INTO stop_detectors (device, dirty_from) VALUES (?, ?)",
                    arguments: [device, StoredStops.neverComputed])
                _ = try Self.advanceStoredStops(
                    db, device: device, computingAll: true, configuration: configuration, logger: self.logger)
            }
        }
        return try await pool.read { db in
            try Self.storedStops(db, device: device, from: from, to: to, configuration: configuration)
        }
    }

    /// The query of ``StoredStops/Query`` in one read transaction (one snapshot); `configuration` is
    /// the store's (for a range without checkpoints, and the end's replay).
    static func storedStops(
        _ db: Database, device: String, from: Double, to: Double, configuration: VisitDetector.Configuration
    ) throws -> StopsReport {
        let lo = from.isFinite ? from : -1e18
        let hi = to.isFinite ? to : 1e18
        let meta = try Row.fetchOne(
            db, sql: "SELECT state, dirty_from FROM stop_detectors WHERE device = ?", arguments: [device])
        // Stored checkpoints, stops and trips hold before a dirty mark (none: nothing stored holds).
        let horizon = meta == nil ? -Double.greatestFiniteMagnitude : meta?[1] as Double? ?? .greatestFiniteMagnitude
        let times = try Double.fetchAll(
            db,
            sql: """
                SELECT time FROM stop_checkpoints WHERE device = ? AND time >= ? AND time <= ? AND time < ?
                ORDER BY time
                """,
            arguments: [device, lo, hi, horizon])
        // The detector starts with the threshold the first checkpoint it can meet judged with.
        let first = try times.first.flatMap { t in
            try String.fetchOne(
                db, sql: "SELECT state FROM stop_checkpoints WHERE device = ? AND time = ?", arguments: [device, t]
            ).map { (t, $0) }
        }
        var query = StoredStops.Query(
            checkpointTimes: times,
            configuration: try first.map { try StoredStops.decode($0.1, device: device, at: $0.0).configuration }
                ?? configuration)
        var met: Double?
        let points = try Row.fetchCursor(
            db,
            sql: """
                SELECT time, lat, lon, hAcc, speed FROM points INDEXED BY points_locations
                WHERE device = ? AND time >= ? AND time <= ? AND kind = 'location' AND valid = 1 ORDER BY time
                """, arguments: [device, lo, hi])
        while let p = try points.next() {
            guard
                let c = query.add(
                    time: p[0], latitude: p[1], longitude: p[2], accuracy: p[3] as Double?, speed: p[4] as Double?)
            else { continue }
            let state = try String.fetchOne(
                db, sql: "SELECT state FROM stop_checkpoints WHERE device = ? AND time = ?", arguments: [device, c])
            guard let state else { continue }
            let checkpoint = try StoredStops.decode(state, device: device, at: c)
            if query.meets(checkpoint) {
                met = c
                break
            }
            query.missed(checkpoint)
        }
        let end =
            to.isFinite
            ? to
            : try Double.fetchOne(db, sql: "SELECT last FROM devices WHERE id = ?", arguments: [device]) ?? -.infinity
        guard let met else {
            var alone = query.accumulator
            return alone.finish(at: end)
        }
        let upper = min(hi, horizon.nextDown)
        let stops = try Row.fetchAll(
            db,
            sql: """
                SELECT arrival, departure, lat, lon, radius, fixes FROM stops
                WHERE device = ? AND decided > ? AND decided <= ? ORDER BY decided
                """, arguments: [device, met, upper]
        ).map {
            Visit(
                coordinate: Coordinate(latitude: $0[2], longitude: $0[3]), horizontalAccuracy: $0[4], arrival: $0[0],
                departure: $0[1] as Double, fixCount: $0[5])
        }
        let trips = try Row.fetchAll(
            db,
            sql: """
                SELECT tripStart, tripEnd, startLat, startLon, endLat, endLon, distance, maxSpeed FROM trips
                WHERE device = ? AND decided > ? AND decided <= ? ORDER BY decided
                """, arguments: [device, met, upper]
        ).map {
            Trip(
                start: $0[0], end: $0[1], startCoordinate: Coordinate(latitude: $0[2], longitude: $0[3]),
                endCoordinate: Coordinate(latitude: $0[4], longitude: $0[5]), distance: $0[6], maximumSpeed: $0[7])
        }
        // The detector's state at the query's end: the stored one when it has seen nothing after it,
        // else the latest checkpoint before it (at or after `met`) run on to it.
        var final: VisitDetector
        if meta?[1] as Double? == nil, let text = meta?[0] as String?, let state = try? StoredStops.decode(text),
            (state.lastGiven ?? -.infinity) <= hi
        {
            final = state
        } else {
            let cp = try Row.fetchOne(
                db,
                sql: """
                    SELECT time, state FROM stop_checkpoints WHERE device = ? AND time <= ? AND time < ?
                    ORDER BY time DESC LIMIT 1
                    """, arguments: [device, hi, horizon])
            guard let cp else { preconditionFailure("the checkpoint met is one") }
            var replay = StoredStops.Advance(
                from: try StoredStops.decode(cp[1], device: device, at: cp[0]), checkpointed: cp[0],
                configuration: configuration)
            let rest = try Row.fetchCursor(
                db,
                sql: """
                    SELECT time, lat, lon, hAcc, speed FROM points INDEXED BY points_locations
                    WHERE device = ? AND time > ? AND time <= ? AND kind = 'location' AND valid = 1 ORDER BY time
                    """, arguments: [device, cp[0] as Double, hi])
            while let p = try rest.next() {
                replay.add(
                    time: p[0], latitude: p[1], longitude: p[2], accuracy: p[3] as Double?, speed: p[4] as Double?)
            }
            final = replay.detector
        }
        return query.report(stops: stops, trips: trips, final: final, end: end)
    }
}
