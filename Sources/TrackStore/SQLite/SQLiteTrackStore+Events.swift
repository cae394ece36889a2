import EndpointEvents
import Formats
import Foundation
import GRDB
import Logging

/// The events facet (``EventStore``) on SQLite: a batch's events and their delivery entries are
/// written in the batch's own transaction (``storeEvents(_:records:stops:received:)``), after its
/// points and its stops; one writer, so a device's batches are evaluated one after the other.
extension SQLiteTrackStore: EventStore {
    static func registerEventsMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v9-events") { db in
            try db.execute(
                sql: """
                    CREATE TABLE geofences (name TEXT PRIMARY KEY, feature BLOB NOT NULL, revision INTEGER NOT NULL)
                        WITHOUT ROWID;
                    CREATE TABLE geofence_generation (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
                    INSERT INTO geofence_generation (id, generation) VALUES (1, 0);
                    CREATE TABLE event_states (device TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID;
                    CREATE TABLE events (
                        seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, device TEXT NOT NULL, kind TEXT NOT NULL,
                        time REAL NOT NULL, body BLOB NOT NULL
                    );
                    CREATE INDEX events_device ON events (device, time, id);
                    CREATE INDEX events_time ON events (time, id);
                    CREATE TABLE hooks (name TEXT PRIMARY KEY, kinds TEXT, devices TEXT, settings TEXT NOT NULL)
                        WITHOUT ROWID;
                    CREATE TABLE deliveries (
                        hook TEXT NOT NULL, event TEXT NOT NULL, device TEXT NOT NULL, seq INTEGER NOT NULL,
                        queued REAL NOT NULL, due REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
                        lease TEXT, lease_until REAL, dead TEXT, last_error TEXT,
                        PRIMARY KEY (hook, event)
                    ) WITHOUT ROWID;
                    CREATE INDEX deliveries_head ON deliveries (hook, device, seq) WHERE dead IS NULL;
                    """)
        }
    }

    public var deviceEvents: DeviceEventFeed { eventFeed }

    public func setEventRules(_ rules: EventRules) { storedEvents.setRules(rules) }

    /// The geofence set as of the store's generation (rebuilt only when it moved).
    static func geofenceSet(_ db: Database, _ engine: StoredEvents) throws -> GeofenceSet {
        let generations = try Row.fetchOne(
            db, sql: "SELECT generation, overspeed_generation FROM geofence_generation")
        let generation = UInt64(generations.map { $0[0] as Int64 } ?? 0)
        try loadOverspeedLimits(db, engine, generation: UInt64(generations.map { $0[1] as Int64 } ?? 0))
        if let set = engine.set(generation: generation) { return set }
        let rows = try Row.fetchAll(db, sql: "SELECT feature, revision FROM geofences ORDER BY name")
        let set = try StoredEvents.set(
            features: rows.map { (Array($0[0] as Data), UInt64($0[1] as Int64)) }, generation: generation)
        engine.keep(set)
        return set
    }

    /// After a batch's points and stops (same transaction): evaluates each device's new records
    /// from its saved state (one that does not read back: its records of the last day from a fresh
    /// one, ``StoredEvents/resumable(_:device:logger:)``), stores the events not stored yet and
    /// queues each for the hooks that want it; returns the events stored.
    static func storeEvents(
        _ db: Database, records: [String: [KeyedRecord]], stops: [StopEvent], received: Double, engine: StoredEvents,
        logger: Logger
    ) throws -> [DeviceEvent] {
        let stopsByDevice = Dictionary(grouping: stops, by: \.device)
        let devices = Set(records.keys).union(stopsByDevice.keys)
        guard !devices.isEmpty else { return [] }
        let set = try geofenceSet(db, engine)
        let readState = try db.cachedStatement(sql: "SELECT state FROM event_states WHERE device = ?")
        let writeState = try db.cachedStatement(
            sql: """
                INSERT INTO event_states (device, state) VALUES (?, ?)
                ON CONFLICT (device) DO UPDATE SET state = excluded.state
                """)
        let insertEvent = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO events (id, device, kind, time, body) VALUES (?, ?, ?, ?, ?)")
        let sameStop = try db.cachedStatement(
            sql: "SELECT 1 FROM events WHERE device = ? AND time > ? AND time < ? AND kind = ? AND id <> ? LIMIT 1")
        let queue = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO deliveries (hook, event, device, seq, queued, due)
                SELECT name, ?, ?, ?, ?, ? FROM hooks
                WHERE (kinds IS NULL OR EXISTS (SELECT 1 FROM json_each(hooks.kinds) WHERE value = ?))
                  AND (devices IS NULL OR EXISTS (SELECT 1 FROM json_each(hooks.devices) WHERE value = ?))
                """)
        var stored: [DeviceEvent] = []
        for device in devices.sorted() {
            let saved = try Data.fetchOne(readState, arguments: [device]).map { Array($0) }
            var state: DeviceEventState?
            var evaluated = records[device] ?? []
            if let saved {
                state = StoredEvents.resumable(saved, device: device, logger: logger)
                if state == nil { evaluated = try recentRecords(db, device: device) }
            }
            let result = StoredEvents.evaluate(
                state: state, records: evaluated, stops: stopsByDevice[device] ?? [], device: device,
                geofences: set, rules: engine.rules(for: device))
            if saved != result.state { try writeState.execute(arguments: [device, Data(result.state)]) }
            for e in result.events {
                // A stop already told, found again a few seconds off (``StoredEvents/sameStopWithin``).
                if StoredEvents.stopKinds.contains(e.kind) {
                    let within = StoredEvents.sameStopWithin
                    let told = try Bool.fetchOne(
                        sameStop, arguments: [device, e.time - within, e.time + within, e.kind.rawValue, e.id])
                    if told != nil { continue }
                }
                try insertEvent.execute(arguments: [e.id, device, e.kind.rawValue, e.time, Data(e.json)])
                guard db.changesCount > 0 else { continue }
                try queue.execute(arguments: [
                    e.id, device, db.lastInsertedRowID, received, received, e.kind.rawValue, device,
                ])
                stored.append(e)
            }
        }
        return stored
    }

    /// `device`'s records of its last day (``StoredEvents/freshLookback`` before its newest; all of
    /// them when it has less), by time and key: what a fresh event state is evaluated over.
    static func recentRecords(_ db: Database, device: String) throws -> [KeyedRecord] {
        var since = -1e18
        if let bounds = try Row.fetchOne(db, sql: "SELECT first, last FROM devices WHERE id = ?", arguments: [device]),
            let fresh = StoredEvents.freshSince(first: bounds[0], last: bounds[1])
        {
            since = fresh
        }
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, valid, attributes, key, span
                FROM points WHERE device = ? AND time >= ? ORDER BY time, key
                """, arguments: [device, since])
        var out: [KeyedRecord] = []
        while let row = try rows.next() {
            out.append(KeyedRecord(key: row[13], record: record(row, device: device)))
        }
        return out
    }

    // MARK: Geofences

    public func geofences() async throws -> [Geofence] {
        let features = try await pool.read { db in
            try Data.fetchAll(db, sql: "SELECT feature FROM geofences ORDER BY name").map { Array($0) }
        }
        return try StoredEvents.geofences(features)
    }

    public func replaceGeofences(_ geofences: [Geofence]) async throws {
        try await pool.write { db in
            let generation = try Self.nextGeofenceGeneration(db)
            try db.execute(sql: "DELETE FROM geofences")
            let insert = try db.cachedStatement(
                sql: "INSERT INTO geofences (name, feature, revision) VALUES (?, ?, ?)")
            for g in geofences {
                try insert.execute(arguments: [g.name, Data(GeofenceDocument.feature(g)), generation])
            }
        }
    }

    public func putGeofences(_ geofences: [Geofence]) async throws -> Int {
        guard !geofences.isEmpty else { return 0 }
        return try await pool.write { db in
            let generation = try Self.nextGeofenceGeneration(db)
            let exists = try db.cachedStatement(sql: "SELECT 1 FROM geofences WHERE name = ?")
            let put = try db.cachedStatement(
                sql: """
                    INSERT INTO geofences (name, feature, revision) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET feature = excluded.feature, revision = excluded.revision
                    """)
            var added = 0
            for g in geofences {
                if try Bool.fetchOne(exists, arguments: [g.name]) == nil { added += 1 }
                try put.execute(arguments: [g.name, Data(GeofenceDocument.feature(g)), generation])
            }
            // The whole set within a document's bound, or nothing stored (the transaction rolls back).
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM geofences") ?? 0
            if total > GeofenceDocument.Limits().geofences { throw StoredEvents.tooManyGeofences(total) }
            return added
        }
    }

    public func removeGeofence(_ name: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM geofences WHERE name = ?", arguments: [name])
            guard db.changesCount > 0 else { return false }
            _ = try Self.nextGeofenceGeneration(db)
            return true
        }
    }

    static func nextGeofenceGeneration(_ db: Database) throws -> Int64 {
        try db.execute(sql: "UPDATE geofence_generation SET generation = generation + 1")
        return try Int64.fetchOne(db, sql: "SELECT generation FROM geofence_generation") ?? 1
    }

    // MARK: Events

    public func events(_ query: EventQuery, after cursor: EventCursor?, limit: Int) async throws
        -> (events: [StoredEvent], next: EventCursor?)
    {
        precondition(limit > 0, "a page holds at least one event")
        var sql = "SELECT id, device, kind, time, body FROM events WHERE time >= ? AND time <= ?"
        var arguments: StatementArguments = [
            query.from.isFinite ? query.from : -1e18, query.to.isFinite ? query.to : 1e18,
        ]
        if let device = query.device {
            sql += " AND device = ?"
            arguments += [device]
        }
        if let kinds = query.kinds {
            sql += " AND kind IN (\(kinds.map { _ in "?" }.joined(separator: ",")))"
            for k in kinds.sorted() { arguments += [k.rawValue] }
        }
        if let cursor {
            sql += " AND time >= ? AND (time > ? OR (time = ? AND id > ?))"
            arguments += [cursor.time, cursor.time, cursor.time, cursor.id]
        }
        sql += " ORDER BY time, id LIMIT ?"
        arguments += [limit + 1]
        let (events, more) = try await pool.read { [sql, arguments] db -> ([StoredEvent], Bool) in
            let rows = try Row.fetchAll(db, sql: sql, arguments: arguments)
            var events: [StoredEvent] = []
            for row in rows.prefix(limit) {
                guard let kind = EventKind(rawValue: row[2]) else { continue }
                events.append(
                    StoredEvent(id: row[0], device: row[1], kind: kind, time: row[3], body: Array(row[4] as Data)))
            }
            return (events, rows.count > limit)
        }
        let next = more ? events.last.map { EventCursor(time: $0.time, id: $0.id) } : nil
        return (events, next)
    }

    // MARK: Hooks

    public func storedHooks() async throws -> [StoredHook] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT name, kinds, devices, settings FROM hooks ORDER BY name").map {
                StoredHook(
                    name: $0[0], kinds: Self.jsonSet($0[1]).map { Set($0.compactMap(EventKind.init(rawValue:))) },
                    devices: Self.jsonSet($0[2]), settings: $0[3])
            }
        }
    }

    public func putHook(_ hook: StoredHook) async throws -> Bool {
        try await pool.write { db in
            let existed =
                try Bool.fetchOne(db, sql: "SELECT 1 FROM hooks WHERE name = ?", arguments: [hook.name])
                ?? false
            try db.execute(
                sql: """
                    INSERT INTO hooks (name, kinds, devices, settings) VALUES (?, ?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET kinds = excluded.kinds, devices = excluded.devices,
                        settings = excluded.settings
                    """,
                arguments: [
                    hook.name, Self.json(hook.kinds.map { Set($0.map(\.rawValue)) }), Self.json(hook.devices),
                    hook.settings,
                ])
            return !existed
        }
    }

    public func removeHook(_ name: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM deliveries WHERE hook = ?", arguments: [name])
            try db.execute(sql: "DELETE FROM hooks WHERE name = ?", arguments: [name])
            return db.changesCount > 0
        }
    }

    public func retryDeadDeliveries(hook name: String, now: Double) async throws -> Int {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE deliveries SET dead = NULL, attempts = 0, due = ?, lease = NULL, lease_until = NULL
                    WHERE hook = ? AND dead IS NOT NULL
                    """, arguments: [now, name])
            return db.changesCount
        }
    }

    public func deliveryCounts() async throws -> [String: DeliveryCounts] {
        try await pool.read { db in
            var out: [String: DeliveryCounts] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT d.hook, sum(d.dead IS NULL), sum(d.dead IS NOT NULL),
                        (SELECT e.last_error FROM deliveries e WHERE e.hook = d.hook AND e.last_error IS NOT NULL
                         ORDER BY e.dead IS NOT NULL, e.attempts DESC LIMIT 1)
                    FROM deliveries d GROUP BY d.hook
                    """)
            {
                out[row[0]] = DeliveryCounts(pending: row[1], dead: row[2], lastError: row[3])
            }
            return out
        }
    }

    // MARK: The queue

    static let headCondition = """
        d.seq = (SELECT min(h.seq) FROM deliveries h WHERE h.hook = d.hook AND h.device = d.device AND h.dead IS NULL)
        """

    public func claimDeliveries(hook: String, limit: Int, now: Double, leaseUntil: Double, token: String)
        async throws -> [QueuedDelivery]
    {
        try await pool.write { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT d.event, d.device, d.attempts, d.queued, e.kind, e.time, e.body
                    FROM deliveries d JOIN events e ON e.id = d.event
                    WHERE d.hook = ? AND d.dead IS NULL AND d.due <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
                      AND \(Self.headCondition)
                    ORDER BY d.queued, d.seq LIMIT ?
                    """, arguments: [hook, now, now, limit])
            var out: [QueuedDelivery] = []
            for row in rows {
                guard let kind = EventKind(rawValue: row[4]) else { continue }
                try db.execute(
                    sql: "UPDATE deliveries SET lease = ?, lease_until = ? WHERE hook = ? AND event = ?",
                    arguments: [token, leaseUntil, hook, row[0] as String])
                out.append(
                    QueuedDelivery(
                        hook: hook,
                        event: StoredEvent(
                            id: row[0], device: row[1], kind: kind, time: row[5], body: Array(row[6] as Data)),
                        attempts: row[2], queued: row[3], token: token))
            }
            return out
        }
    }

    public func settleDelivery(
        hook: String, event: String, token: String, outcome: DeliverySettlement, now: Double
    ) async throws -> Bool {
        try await pool.write { db in
            switch outcome {
            case .delivered:
                try db.execute(
                    sql: "DELETE FROM deliveries WHERE hook = ? AND event = ? AND lease = ?",
                    arguments: [hook, event, token])
            case .retry(let at, let reason):
                try db.execute(
                    sql: """
                        UPDATE deliveries SET attempts = attempts + 1, due = ?, lease = NULL, lease_until = NULL,
                            last_error = ? WHERE hook = ? AND event = ? AND lease = ?
                        """, arguments: [at, reason, hook, event, token])
            case .dead(let reason):
                try db.execute(
                    sql: """
                        UPDATE deliveries SET attempts = attempts + 1, dead = ?, lease = NULL, lease_until = NULL,
                            last_error = ? WHERE hook = ? AND event = ? AND lease = ?
                        """, arguments: [reason, reason, hook, event, token])
            }
            return db.changesCount > 0
        }
    }

    public func nextDeliveryDue(hook: String, after now: Double) async throws -> Double? {
        try await pool.read { db in
            try Double.fetchOne(
                db,
                sql: """
                    SELECT min(CASE WHEN d.lease_until IS NOT NULL AND d.lease_until > ? THEN max(d.lease_until, d.due)
                                    ELSE d.due END)
                    FROM deliveries d WHERE d.hook = ? AND d.dead IS NULL
                      AND (d.due > ? OR (d.lease_until IS NOT NULL AND d.lease_until > ?)) AND \(Self.headCondition)
                    """, arguments: [now, hook, now, now])
        }
    }

    // MARK: Lists as JSON

    static func json(_ set: Set<String>?) -> String? {
        guard let set else { return nil }
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, s) in set.sorted().enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendJSONString(s, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    static func jsonSet(_ text: String?) -> Set<String>? {
        guard let text, let list = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else { return nil }
        return Set(list)
    }
}
