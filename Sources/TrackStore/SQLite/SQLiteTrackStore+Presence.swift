import EndpointEvents
import Foundation
import GRDB

/// Presence (`offline`, `online`), the devices' own overspeed limits and the events' retention on
/// SQLite (``EventStore``).
///
/// `presence` holds a row per device declared offline: `since`, the receipt time its silence
/// started at (`devices.lastReceived` then), which the events' ids are derived from. A device that
/// sent since gets its `online` and loses its row; a device silent long enough without a row gets
/// its `offline` and a row. `device_overspeed` holds the devices' own limits; a change counts up
/// `geofence_generation.overspeed_generation`, which ingest reads with the geofences' generation.
extension SQLiteTrackStore {
    static func registerPresenceMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v15-events-presence") { db in
            try db.execute(
                sql: """
                    CREATE TABLE presence (device TEXT PRIMARY KEY, since REAL NOT NULL) WITHOUT ROWID;
                    CREATE INDEX deliveries_event ON deliveries (event);
                    """)
        }
        m.registerMigration("v16-device-overspeed") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_overspeed (device TEXT PRIMARY KEY, speed REAL NOT NULL) WITHOUT ROWID;
                    ALTER TABLE geofence_generation ADD COLUMN overspeed_generation INTEGER NOT NULL DEFAULT 0;
                    """)
        }
    }

    /// The devices' own limits of `generation` into `engine`, unless it has them.
    static func loadOverspeedLimits(_ db: Database, _ engine: StoredEvents, generation: UInt64) throws {
        guard !engine.hasLimits(generation: generation) else { return }
        var limits: [String: Double] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT device, speed FROM device_overspeed") { limits[row[0]] = row[1] }
        engine.keepLimits(limits, generation: generation)
    }

    /// Stores `event` unless one of its id is, and queues it for the hooks that want it (queued at
    /// `now`); `true` when it is new.
    static func storeEvent(_ db: Database, _ event: DeviceEvent, now: Double) throws -> Bool {
        try db.execute(
            sql: "INSERT OR IGNORE INTO events (id, device, kind, time, body) VALUES (?, ?, ?, ?, ?)",
            arguments: [event.id, event.device, event.kind.rawValue, event.time, Data(event.json)])
        guard db.changesCount > 0 else { return false }
        try db.execute(
            sql: """
                INSERT OR IGNORE INTO deliveries (hook, event, device, seq, queued, due)
                SELECT name, ?, ?, ?, ?, ? FROM hooks
                WHERE (kinds IS NULL OR EXISTS (SELECT 1 FROM json_each(hooks.kinds) WHERE value = ?))
                  AND (devices IS NULL OR EXISTS (SELECT 1 FROM json_each(hooks.devices) WHERE value = ?))
                """,
            arguments: [
                event.id, event.device, db.lastInsertedRowID, now, now, event.kind.rawValue, event.device,
            ])
        return true
    }

    public func reconcilePresence(now: Double, offlineAfter: Double) async throws -> [DeviceEvent] {
        let feed = eventFeed
        return try await pool.write { db in
            var events: [DeviceEvent] = []
            // Back: declared offline, received since (a device retention removed has no row left).
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT p.device, p.since, d.last FROM presence p JOIN devices d ON d.id = p.device
                    WHERE d.lastReceived > p.since ORDER BY p.device
                    """)
            {
                let device: String = row[0]
                events.append(.online(device: device, time: row[2], lastSeen: row[1]))
                try db.execute(sql: "DELETE FROM presence WHERE device = ?", arguments: [device])
            }
            try db.execute(sql: "DELETE FROM presence WHERE device NOT IN (SELECT id FROM devices)")
            // Gone: silent for offlineAfter, not declared yet.
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT d.id, d.lastReceived FROM devices d
                    WHERE d.lastReceived <= ? AND NOT EXISTS (SELECT 1 FROM presence p WHERE p.device = d.id)
                    ORDER BY d.lastReceived, d.id
                    """, arguments: [now - offlineAfter])
            {
                let (device, since): (String, Double) = (row[0], row[1])
                events.append(.offline(device: device, time: since + offlineAfter, lastSeen: since))
                try db.execute(sql: "INSERT INTO presence (device, since) VALUES (?, ?)", arguments: [device, since])
            }
            var stored: [DeviceEvent] = []
            for e in events where try Self.storeEvent(db, e, now: now) { stored.append(e) }
            if !stored.isEmpty { db.afterNextTransaction { [stored] _ in feed.publish(stored) } }
            return stored
        }
    }

    public func overspeedLimits() async throws -> [String: Double] {
        try await pool.read { db in
            var limits: [String: Double] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT device, speed FROM device_overspeed") {
                limits[row[0]] = row[1]
            }
            return limits
        }
    }

    public func setOverspeedLimit(device: String, limit: Double?) async throws -> Bool {
        if let limit { precondition(limit > 0 && limit.isFinite, "an overspeed limit is a speed above 0") }
        return try await pool.write { db in
            if let limit {
                try db.execute(
                    sql: """
                        INSERT INTO device_overspeed (device, speed) VALUES (?, ?)
                        ON CONFLICT (device) DO UPDATE SET speed = excluded.speed
                        """, arguments: [device, limit])
            } else {
                try db.execute(sql: "DELETE FROM device_overspeed WHERE device = ?", arguments: [device])
                guard db.changesCount > 0 else { return false }
            }
            try db.execute(sql: "UPDATE geofence_generation SET overspeed_generation = overspeed_generation + 1")
            return true
        }
    }

    public func deleteExpiredEvents(before cutoff: Double, limit: Int) async throws -> Int {
        precondition(limit > 0, "a retention batch holds at least one event")
        return try await pool.write { db in
            let ids = try String.fetchAll(
                db,
                sql: """
                    SELECT e.id FROM events e WHERE e.time < ?
                      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event = e.id AND d.dead IS NULL)
                    ORDER BY e.time LIMIT ?
                    """, arguments: [cutoff, limit])
            guard !ids.isEmpty else { return 0 }
            let marks = ids.map { _ in "?" }.joined(separator: ",")
            try db.execute(
                sql: "DELETE FROM deliveries WHERE event IN (\(marks))", arguments: StatementArguments(ids))
            try db.execute(sql: "DELETE FROM events WHERE id IN (\(marks))", arguments: StatementArguments(ids))
            return ids.count
        }
    }
}
