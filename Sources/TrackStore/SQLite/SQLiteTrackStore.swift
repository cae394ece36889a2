import EndpointEvents
import Dispatch
import Formats
import Geo
import GRDB
import LocationService
import Logging
import Synchronization

/// The SQLite store (GRDB): the default for `keeptrack serve --db FILE` and `--upload embedded`.
///
/// A record's key (``TrackStore/key(_:format:)``) is the primary key: `INSERT OR IGNORE` tells new
/// records from duplicates. SQLite in WAL mode with `synchronous=NORMAL`. A `devices` table keeps each
/// device's point count, first and last time and last reception, updated in the transaction that
/// stores its points: listing devices and finding an unknown one read it, never the points. Reads and
/// writes run on GRDB's own queues (its async API), not on the threads that serve connections.
public final class SQLiteTrackStore: TrackStore {
    public let path: String
    let pool: DatabasePool
    /// Where the store says what it could not read back and derived again (at the error level).
    let logger: Logger
    /// What this store stored, batch by batch in commit order (the live stream's source).
    public let storedRecords = RecordFeed()
    /// The stops and trips found in what this store stored, batch by batch in commit order.
    public let stopEvents = StopEventFeed()
    /// The outlier marks its detectors changed, run by run in commit order.
    public let outlierMarks = OutlierMarkFeed()
    /// The events ingest stored (``EventStore``), batch by batch in commit order.
    let eventFeed = DeviceEventFeed()
    /// The geofences as evaluated and the rules (``EventStore``).
    let storedEvents = StoredEvents()
    /// The detector's configuration for stops, trips and outliers (``StopStore/setMaximumAccuracy(_:)``).
    let stopsSettings = Mutex(VisitDetector.Configuration())

    public var location: String { path }

    /// A schema upgrade under way, as ``init(path:progress:)`` reports it.
    public struct Upgrade: Sendable, Hashable {
        /// The store's file.
        public var path: String
        /// The migrations it applies, by name.
        public var migrations: [String]
        /// The points stored, which the migrations go over.
        public var points: Int
        /// Whole seconds spent so far.
        public var seconds: Int

        public init(path: String, migrations: [String], points: Int, seconds: Int) {
            (self.path, self.migrations, self.points, self.seconds) = (path, migrations, points, seconds)
        }
    }

    /// Opens (creating and migrating) the store at `path`. An existing store whose schema needs
    /// migrations says so through `progress`: an ``Upgrade`` at once and every quarter second
    /// until done (one migration over millions of points takes minutes), then `nil`.
    public init(
        path: String, logger: Logger = Logger(label: "keeptrack.store"), progress: (@Sendable (Upgrade?) -> Void)? = nil
    ) throws {
        self.path = path
        self.logger = logger
        var config = Configuration()
        // Another process writing the file (a `keeptrack serve geofences add` of 91,000 geofences
        // beside a running serve) is waited for, not answered SQLITE_BUSY at once: uploads meanwhile
        // were 500s ("database is locked").
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Reads through a memory map (up to 1 GiB of the file): a page costs no system call, which
            // matters to a box query's thousands of lookups by key (docs/performance.md, "Fleet
            // queries: speed"). Writes go through the journal.
            try db.execute(sql: "PRAGMA mmap_size = 1073741824")
            Self.addFleetFunctions(db)
        }
        pool = try DatabasePool(path: path, configuration: config)
        var m = DatabaseMigrator()
        m.registerMigration("v1-points") { db in
            try db.execute(
                sql: """
                    CREATE TABLE points (
                        key TEXT PRIMARY KEY,
                        device TEXT NOT NULL,
                        seq INTEGER,
                        kind TEXT NOT NULL,
                        region TEXT,
                        time REAL NOT NULL,
                        lat REAL NOT NULL,
                        lon REAL NOT NULL,
                        alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                        format TEXT NOT NULL,
                        received REAL NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX points_trail ON points (device, time);
                    """)
        }
        m.registerMigration("v2-devices-and-pages") { db in
            // Filled once from the points already stored; kept up to date by `insert`.
            try db.execute(
                sql: """
                    CREATE TABLE devices (
                        id TEXT PRIMARY KEY,
                        points INTEGER NOT NULL,
                        first REAL NOT NULL,
                        last REAL NOT NULL,
                        lastReceived REAL NOT NULL
                    ) WITHOUT ROWID;
                    INSERT INTO devices (id, points, first, last, lastReceived)
                        SELECT device, COUNT(*), MIN(time), MAX(time), MAX(received) FROM points GROUP BY device;
                    CREATE INDEX points_page ON points (device, time, seq);
                    DROP INDEX points_trail;
                    """)
        }
        m.registerMigration("v3-validity-and-attributes") { db in
            // What senders say besides the position (OsmAnd's hdop, batt...), and whether they say
            // the position is valid (kept, and left out of trails by default).
            try db.execute(
                sql: """
                    ALTER TABLE points ADD COLUMN valid INTEGER NOT NULL DEFAULT 1;
                    ALTER TABLE points ADD COLUMN attributes TEXT;
                    """)
        }
        Self.registerCredentialMigrations(&m)
        Self.registerFleetMigrations(&m)
        Self.registerSecretMigrations(&m)
        Self.registerStopsMigrations(&m)
        Self.registerStoredStopsMigrations(&m)
        Self.registerEventsMigrations(&m)
        Self.registerOutlierMigrations(&m)
        Self.registerStatisticsMigrations(&m)
        Self.registerShareMigrations(&m)
        Self.registerPlaceNameMigrations(&m)
        Self.registerHomeAssistantMigrations(&m)
        Self.registerPresenceMigrations(&m)
        Self.registerLatestMigrations(&m)
        try Self.migrate(m, pool, path: path, progress: progress)
    }

    /// Applies `migrator`'s pending migrations; for a store that had points, with `progress`.
    static func migrate(
        _ migrator: DatabaseMigrator, _ pool: DatabasePool, path: String,
        progress: (@Sendable (Upgrade?) -> Void)?
    ) throws {
        let (pending, points) = try pool.read { db -> ([String], Int) in
            let applied = try migrator.appliedIdentifiers(db)
            let points =
                try applied.contains("v2-devices-and-pages")
                ? Int.fetchOne(db, sql: "SELECT COALESCE(SUM(points), 0) FROM devices") ?? 0
                : applied.contains("v1-points") ? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM points") ?? 0 : 0
            return (migrator.migrations.filter { !applied.contains($0) }, points)
        }
        guard let progress, !pending.isEmpty, points > 0 else {
            try migrator.migrate(pool)
            return
        }
        let upgrade = Upgrade(path: path, migrations: pending, points: points, seconds: 0)
        progress(upgrade)
        let started = DispatchTime.now().uptimeNanoseconds
        let queue = DispatchQueue(label: "keeptrack.store.progress")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250))
        timer.setEventHandler {
            var now = upgrade
            now.seconds = Int(Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
            progress(now)
        }
        timer.resume()
        defer {
            timer.cancel()
            queue.sync { progress(nil) }
        }
        try migrator.migrate(pool)
    }

    public func insert(_ records: [TrailRecord], format: String, received: Double) async throws
        -> (accepted: Int, duplicates: Int)
    {
        try await pool.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT OR IGNORE INTO points
                    (key, device, seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, format, received,
                     valid, attributes, span)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            var accepted = 0
            let feed = storedRecords.hasSubscribers ? storedRecords : nil
            var stored: [TrailRecord] = []
            var added: [String: (points: Int, first: Double, last: Double)] = [:]
            var latest: [String: TrailRecord] = [:]
            var earliestLocation: [String: Double] = [:]
            var new: [String: [KeyedRecord]] = [:]
            for r in records {
                // GRDB binds text NUL-terminated (sqlite3_bind_text with -1): a NUL would cut the key
                // short and make distinct records one. Readers refuse control characters in ids; this
                // is the store's own guard, whoever calls it.
                guard !r.device.utf8.contains(0), !(r.region?.utf8.contains(0) ?? false) else {
                    throw TrackStoreError(.nulByte, "refusing to store an id with a NUL byte")
                }
                let key = Self.key(r, format: format)
                try statement.execute(arguments: [
                    key, r.device, format == "json" && r.sequence > 0 ? r.sequence : nil, r.kind.rawValue,
                    r.region, r.time, r.latitude, r.longitude, r.altitude, r.horizontalAccuracy, r.verticalAccuracy,
                    r.speed, r.course, format, received, r.valid, TrailRecord.attributesJSON(r.attributes),
                    TrailRecord.spanJSON(r),
                ])
                guard db.changesCount > 0 else { continue }
                accepted += 1
                new[r.device, default: []].append(KeyedRecord(key: key, record: r))
                if feed != nil { stored.append(Self.asStored(r, format: format)) }
                // 0,0 is no position (a phone's "null island"): never a device's latest.
                if r.valid, r.latitude != 0 || r.longitude != 0, latest[r.device].map({ $0.time <= r.time }) ?? true {
                    latest[r.device] = r
                }
                if r.valid, r.kind == .location {
                    earliestLocation[r.device] = min(earliestLocation[r.device] ?? r.time, r.time)
                }
                if let d = added[r.device] {
                    added[r.device] = (d.points + 1, min(d.first, r.time), max(d.last, r.time))
                } else {
                    added[r.device] = (1, r.time, r.time)
                }
            }
            let device = try db.cachedStatement(
                sql: """
                    INSERT INTO devices (id, points, first, last, lastReceived) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET points = points + excluded.points, first = min(first, excluded.first),
                        last = max(last, excluded.last), lastReceived = max(lastReceived, excluded.lastReceived)
                    """)
            for (id, d) in added {
                try device.execute(arguments: [id, d.points, d.first, d.last, received])
                if let r = latest[id] { try Self.noteLatest(db, r) }
            }
            let (found, marks) = try Self.advanceStoredStops(
                db, earliest: earliestLocation, configuration: self.stopsConfiguration, logger: logger)
            let events = try Self.storeEvents(
                db, records: new, stops: found, received: received, engine: storedEvents, logger: logger)
            // On the writer, after the commit: batches reach the feed in the order they were stored.
            if let feed, !stored.isEmpty { db.afterNextTransaction { [stored] _ in feed.publish(stored) } }
            if !found.isEmpty { db.afterNextTransaction { [stopEvents] _ in stopEvents.publish(found) } }
            // After the records: a live client has the points the marks name.
            if !marks.isEmpty { db.afterNextTransaction { [outlierMarks] _ in outlierMarks.publish(marks) } }
            if !events.isEmpty { db.afterNextTransaction { [eventFeed] _ in eventFeed.publish(events) } }
            return (accepted, records.count - accepted)
        }
    }

    public func devices() async throws -> [DeviceSummary] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, points, first, last, lastReceived FROM devices ORDER BY id")
                .map { DeviceSummary(id: $0[0], points: $0[1], first: $0[2], last: $0[3], lastReceived: $0[4]) }
        }
    }

    public func device(_ id: String) async throws -> DeviceSummary? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT id, points, first, last, lastReceived FROM devices WHERE id = ?",
                arguments: [id]
            )
            .map { DeviceSummary(id: $0[0], points: $0[1], first: $0[2], last: $0[3], lastReceived: $0[4]) }
        }
    }

    /// - Complexity: O(`limit` log n) (keyset pagination over the `(device, time, seq)` index, no
    ///   OFFSET).
    public func trail(
        device: String, from: Double, to: Double, after cursor: TrailCursor?, limit: Int,
        includeInvalid: Bool, includeOutliers: Bool
    ) async throws -> (records: [TrailRecord], next: TrailCursor?) {
        precondition(limit > 0, "a page holds at least one record")
        var sql = """
            SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, valid, attributes, key, span,
                outlier
            FROM points
            WHERE device = ? AND time >= ? AND time <= ?\(includeInvalid ? "" : " AND valid = 1")\(
                includeOutliers ? "" : " AND outlier IS NULL")
            """
        var arguments: StatementArguments = [device, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]
        if let cursor {
            // After (time, seq, key) in the order SQLite sorts them (a NULL seq first).
            if let seq = cursor.sequence {
                sql += " AND time >= ? AND (time > ? OR (time = ? AND (seq > ? OR (seq = ? AND key > ?))))"
                arguments += [cursor.time, cursor.time, cursor.time, seq, seq, cursor.key]
            } else {
                sql += " AND time >= ? AND (time > ? OR (time = ? AND (seq IS NOT NULL OR key > ?)))"
                arguments += [cursor.time, cursor.time, cursor.time, cursor.key]
            }
        }
        sql += " ORDER BY time, seq, key LIMIT ?"
        arguments += [limit + 1]
        return try await pool.read { [sql, arguments] db in
            try Self.page(db, sql: sql, arguments: arguments, limit: limit) { row in
                (Self.record(row, device: device), TrailCursor(time: row[3], sequence: row[0], key: row[13]))
            }
        }
    }

    /// One page of records: the query asks for `limit + 1` rows; the extra one says whether a next
    /// page exists, which then starts after the last record's cursor.
    static func page(
        _ db: Database, sql: String, arguments: StatementArguments, limit: Int,
        _ read: (Row) -> (TrailRecord, TrailCursor)
    ) throws -> (records: [TrailRecord], next: TrailCursor?) {
        var records: [TrailRecord] = []
        var last: TrailCursor?
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try rows.next() {
            if records.count == limit { return (records, last) }
            let (record, cursor) = read(row)
            records.append(record)
            last = cursor
        }
        return (records, nil)
    }

    /// A record from a row of `seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course,
    /// valid, attributes` (and a column `span`).
    static func record(_ row: Row, device: String) -> TrailRecord {
        var r = TrailRecord(
            device: device, sequence: row[0] ?? 0, kind: TrailRecord.Kind(rawValue: row[1]) ?? .location,
            region: row[2], time: row[3], latitude: row[4], longitude: row[5], altitude: row[6],
            horizontalAccuracy: row[7], verticalAccuracy: row[8], speed: row[9], course: row[10])
        r.valid = row[11]
        r.attributes = TrailRecord.attributes(fromJSON: row[12])
        if r.kind.isVisitOrTrip { r.span = TrailRecord.span(fromJSON: row["span"]) }
        if row.hasColumn("outlier") { r.outlier = row["outlier"] }
        return r
    }

    public func count() async throws -> Int {
        try await pool.read { db in try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(points), 0) FROM devices") ?? 0 }
    }
}

extension SQLiteTrackStore: StoredRecordsSource {
    /// One process writes a SQLite store: its feed is complete without following anything.
    public func followStored(clock: any EpochClock) async throws {}

    /// `r` as a trail reads it back: a sequence only for our JSON batch.
    static func asStored(_ r: TrailRecord, format: String) -> TrailRecord {
        var r = r
        if format != "json" { r.sequence = 0 }
        return r
    }
}
