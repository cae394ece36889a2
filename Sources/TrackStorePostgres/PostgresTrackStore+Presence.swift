import EndpointEvents
import Logging
import PostgresNIO
import TrackStore

/// Presence (`offline`, `online`), the devices' own overspeed limits and the events' retention on
/// PostgreSQL (``EventStore``).
///
/// `presence` holds a row per device declared offline: `since`, the receipt time its silence
/// started at (`devices.last_received` then, in seconds), which the events' ids are derived from.
/// Instances reconcile one at a time (a transaction-level advisory lock); each event is stored once
/// by id (`ON CONFLICT DO NOTHING`), so however many instances reconcile, a silence is one
/// `offline` and one `online`. `device_overspeed` holds the devices' own limits; a change counts up
/// `geofence_generation.overspeed_generation`, read with the geofences' generation in the catch-up.
extension PostgresTrackStore {
    static let presenceMigration = [
        #"CREATE TABLE presence (device text COLLATE "C" PRIMARY KEY, since float8 NOT NULL)"#,
        // The events' retention asks whether a hook still waits for an event.
        "CREATE INDEX deliveries_event ON deliveries (event)",
    ]

    static let overspeedMigration = [
        #"CREATE TABLE device_overspeed (device text COLLATE "C" PRIMARY KEY, speed float8 NOT NULL)"#,
        "ALTER TABLE geofence_generation ADD COLUMN overspeed_generation bigint NOT NULL DEFAULT 0",
    ]

    /// The devices' own limits of `generation` into the events' cache, unless it has them.
    func loadOverspeedLimits(_ c: PostgresConnection, generation: UInt64) async throws {
        guard !storedEvents.hasLimits(generation: generation) else { return }
        storedEvents.keepLimits(try await overspeedLimits(c), generation: generation)
    }

    func overspeedLimits(_ c: PostgresConnection) async throws -> [String: Double] {
        var limits: [String: Double] = [:]
        for try await (device, speed) in try await c.query(
            "SELECT device, speed FROM device_overspeed", logger: logger
        ).decode((String, Double).self) { limits[device] = speed }
        return limits
    }

    /// Stores `event` unless one of its id is, and queues it for the hooks that want it (queued at
    /// `now`); `true` when it is new.
    func storeEvent(_ c: PostgresConnection, _ e: DeviceEvent, now: Double) async throws -> Bool {
        var seq: Int64?
        let body = String(decoding: e.json, as: UTF8.self)
        for try await s in try await c.query(
            """
            INSERT INTO events (id, device, kind, time, body) VALUES (\(e.id), \(e.device), \(e.kind.rawValue),
                \(e.time), \(body)) ON CONFLICT (id) DO NOTHING RETURNING seq
            """, logger: logger
        ).decode(Int64.self) { seq = s }
        guard let seq else { return false }
        try await c.query(
            """
            INSERT INTO deliveries (hook, event, device, seq, queued, due)
            SELECT name, \(e.id), \(e.device), \(seq), \(now), \(now) FROM hooks
            WHERE (kinds IS NULL OR \(e.kind.rawValue) = ANY (kinds))
              AND (devices IS NULL OR \(e.device) = ANY (devices))
            ON CONFLICT DO NOTHING
            """, logger: logger)
        return true
    }

    public func reconcilePresence(now: Double, offlineAfter: Double) async throws -> [DeviceEvent] {
        let stored = try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c -> [DeviceEvent] in
                try await c.query("SELECT pg_advisory_xact_lock(7152037)", logger: self.logger)
                var events: [DeviceEvent] = []
                // Back: declared offline, received since (a device retention removed has no row left).
                for try await (device, since, last) in try await c.query(
                    """
                    DELETE FROM presence p USING devices d
                    WHERE d.id = p.device AND extract(epoch FROM d.last_received)::float8 > p.since
                    RETURNING p.device, p.since, extract(epoch FROM d.last)::float8
                    """, logger: self.logger
                ).decode((String, Double, Double).self) {
                    events.append(.online(device: device, time: last, lastSeen: since))
                }
                events.sort { $0.device < $1.device }
                try await c.query(
                    "DELETE FROM presence p WHERE NOT EXISTS (SELECT 1 FROM devices d WHERE d.id = p.device)",
                    logger: self.logger)
                // Gone: silent for offlineAfter, not declared yet.
                var gone: [DeviceEvent] = []
                for try await (device, since) in try await c.query(
                    """
                    INSERT INTO presence (device, since)
                    SELECT d.id, extract(epoch FROM d.last_received)::float8 FROM devices d
                    WHERE extract(epoch FROM d.last_received)::float8 <= \(now - offlineAfter)
                      AND NOT EXISTS (SELECT 1 FROM presence p WHERE p.device = d.id)
                    RETURNING device, since
                    """, logger: self.logger
                ).decode((String, Double).self) {
                    gone.append(.offline(device: device, time: since + offlineAfter, lastSeen: since))
                }
                events += gone.sorted { ($0.time, $0.device) < ($1.time, $1.device) }
                var stored: [DeviceEvent] = []
                for e in events where try await self.storeEvent(c, e, now: now) { stored.append(e) }
                return stored
            }
        }
        eventFeed.publish(stored)
        return stored
    }

    public func overspeedLimits() async throws -> [String: Double] {
        try await withLiveConnection { c in try await self.overspeedLimits(c) }
    }

    public func setOverspeedLimit(device: String, limit: Double?) async throws -> Bool {
        if let limit { precondition(limit > 0 && limit.isFinite, "an overspeed limit is a speed above 0") }
        return try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                if let limit {
                    try await c.query(
                        """
                        INSERT INTO device_overspeed (device, speed) VALUES (\(device), \(limit))
                        ON CONFLICT (device) DO UPDATE SET speed = excluded.speed
                        """, logger: self.logger)
                } else {
                    var removed = false
                    for try await _ in try await c.query(
                        "DELETE FROM device_overspeed WHERE device = \(device) RETURNING 1", logger: self.logger
                    ).decode(Int32.self) { removed = true }
                    guard removed else { return false }
                }
                try await c.query(
                    "UPDATE geofence_generation SET overspeed_generation = overspeed_generation + 1",
                    logger: self.logger)
                return true
            }
        }
    }

    public func deleteExpiredEvents(before cutoff: Double, limit: Int) async throws -> Int {
        precondition(limit > 0, "a retention batch holds at least one event")
        return try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                var ids: [String] = []
                for try await id in try await c.query(
                    """
                    SELECT e.id FROM events e WHERE e.time < \(cutoff)
                      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event = e.id AND d.dead IS NULL)
                    ORDER BY e.time LIMIT \(Int64(limit)) FOR UPDATE OF e SKIP LOCKED
                    """, logger: self.logger
                ).decode(String.self) { ids.append(id) }
                guard !ids.isEmpty else { return 0 }
                var binds = PostgresBindings()
                binds.append(PostgresArray.texts(ids))
                try await c.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM deliveries WHERE event = ANY ($1::text[])", binds: binds),
                    logger: self.logger)
                try await c.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM events WHERE id = ANY ($1::text[])", binds: binds),
                    logger: self.logger)
                return ids.count
            }
        }
    }
}
