import EndpointEvents
import Formats
import Logging
import NIOCore
import PostgresNIO
import TrackStore

/// The events facet (``EventStore``) on PostgreSQL, where several instances share the records.
///
/// A batch's statement (its `COPY` or `INSERT`) marks each of its devices (a row in `stop_marks`,
/// by the stops trigger, in the batch's own transaction, whichever instance ran it). The device's
/// catch-up transaction, which holds its `stop_detectors` row (`FOR UPDATE`: the instances take a
/// device one after the other) and takes its marks, runs the stop detector and then the events:
/// the device's saved ``DeviceEventState``, its records from the state's settled time on (the
/// reorder window's again, known by their keys), the events not stored yet (by id) and one delivery
/// entry per hook that wants each, and the new state; one commit for a group of devices. An instance killed between the
/// batch's commit and the catch-up leaves the mark, which the device's next batch or stops query
/// runs, on any instance: an event exists exactly when its record is stored, once the device's
/// catch-up ran.
///
/// The queue's claims are one statement each, `FOR UPDATE SKIP LOCKED` over the heads of the
/// devices (docs/events.md).
extension PostgresTrackStore: EventStore {
    static let eventsMigration = [
        """
        ALTER TABLE stop_detectors ADD COLUMN events_dirty boolean NOT NULL DEFAULT false,
            ADD COLUMN events_state bytea
        """,
        """
        CREATE OR REPLACE FUNCTION keeptrack_stops_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO stop_detectors AS s (device, dirty_from, events_dirty)
            SELECT device, min(extract(epoch FROM time)::float8) FILTER (WHERE kind = 'location' AND valid), true
            FROM added GROUP BY device ORDER BY device
            ON CONFLICT (device) DO UPDATE SET dirty_from = LEAST(s.dirty_from, excluded.dirty_from),
                events_dirty = true;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TABLE geofences (
            name text COLLATE "C" PRIMARY KEY, feature bytea NOT NULL, revision bigint NOT NULL
        )
        """,
        "CREATE TABLE geofence_generation (id int PRIMARY KEY CHECK (id = 1), generation bigint NOT NULL)",
        "INSERT INTO geofence_generation (id, generation) VALUES (1, 0)",
        """
        CREATE TABLE events (
            seq bigserial UNIQUE, id text COLLATE "C" PRIMARY KEY, device text COLLATE "C" NOT NULL,
            kind text NOT NULL, time float8 NOT NULL, body text NOT NULL
        )
        """,
        "CREATE INDEX events_device ON events (device, time, id)",
        "CREATE INDEX events_time ON events (time, id)",
        """
        CREATE TABLE hooks (
            name text COLLATE "C" PRIMARY KEY, kinds text[], devices text[], settings text NOT NULL
        )
        """,
        """
        CREATE TABLE deliveries (
            hook text COLLATE "C" NOT NULL, event text COLLATE "C" NOT NULL, device text COLLATE "C" NOT NULL,
            seq bigint NOT NULL, queued float8 NOT NULL, due float8 NOT NULL, attempts int NOT NULL DEFAULT 0,
            lease text, lease_until float8, dead text, last_error text, PRIMARY KEY (hook, event)
        )
        """,
        "CREATE INDEX deliveries_head ON deliveries (hook, device, seq) WHERE dead IS NULL",
    ]

    public var deviceEvents: DeviceEventFeed { eventFeed }

    public func setEventRules(_ rules: EventRules) { storedEvents.setRules(rules) }

    var now: Double { clock.now.secondsSince1970 }

    /// The geofence set as of the database's generation (rebuilt only when it moved).
    func geofenceSet(_ c: PostgresConnection) async throws -> GeofenceSet {
        var generation: Int64 = 0
        var limitsGeneration: Int64 = 0
        for try await (g, l) in try await c.query(
            "SELECT generation, overspeed_generation FROM geofence_generation", logger: logger
        ).decode((Int64, Int64).self) { (generation, limitsGeneration) = (g, l) }
        try await loadOverspeedLimits(c, generation: UInt64(limitsGeneration))
        if let set = storedEvents.set(generation: UInt64(generation)) { return set }
        var features: [(feature: [UInt8], revision: UInt64)] = []
        for try await (f, r) in try await c.query(
            "SELECT feature, revision FROM geofences ORDER BY name", logger: logger
        ).decode((ByteBuffer, Int64).self) {
            features.append((Array(f.readableBytesView), UInt64(r)))
        }
        let set = try StoredEvents.set(features: features, generation: UInt64(generation))
        storedEvents.keep(set)
        return set
    }

    /// One device's part of ``storeEvents(_:_:)``: its saved state (read with its row) and its
    /// records from the state's settled time on, both from ``eventRecords(_:_:)``, and the stop
    /// events its detector decided in this transaction.
    struct EventsDue {
        var device: String
        var state: DeviceEventState?
        var records: [KeyedRecord]
        var stops: [StopEvent]
    }

    /// The records each of `devices` (with its saved state) evaluates its events from, in the
    /// catch-up's transaction: from the state's settled time on (the window's records again, told
    /// apart by key); a device without a state from its last day of records, or from its first
    /// when that is within the day (the same records: the bound is then none, ``since``
    /// -1e11). Each device's records by time and key, one statement for all; `since` is each
    /// device's bound, which the detector's run compares with its own; `states` each saved state
    /// decoded (``EventsDue/state``: decoded once).
    func eventRecords(_ c: PostgresConnection, _ devices: [(device: String, saved: [UInt8]?)]) async throws
        -> (since: [Double], records: [[KeyedRecord]], states: [DeviceEventState?])
    {
        guard !devices.isEmpty else { return ([], [], []) }
        var since: [Double] = []
        var states: [DeviceEventState?] = []
        var unsettled: [String] = []
        for d in devices {
            // One that does not read back: its records of the last day from a fresh state.
            let state = d.saved.flatMap { StoredEvents.resumable($0, device: d.device, logger: logger) }
            states.append(state)
            if let t = state?.settledTime {
                since.append(t)
            } else {
                since.append(-1e11)
                unsettled.append(d.device)
            }
        }
        if !unsettled.isEmpty {
            var bounds: [String: (first: Double, last: Double)] = [:]
            for try await (id, first, last) in try await c.query(
                """
                SELECT id, extract(epoch FROM first)::float8, extract(epoch FROM last)::float8 FROM devices
                WHERE id = ANY (\(PostgresArray.texts(unsettled))::text[])
                """, logger: logger
            ).decode((String, Double, Double).self) { bounds[id] = (first, last) }
            for (i, d) in devices.enumerated() where since[i] == -1e11 {
                if let b = bounds[d.device], let fresh = StoredEvents.freshSince(first: b.first, last: b.last) {
                    since[i] = fresh
                }
            }
        }
        var records: [[KeyedRecord]] = Array(repeating: [], count: devices.count)
        // Each device's records by time and key (the lateral subquery's order, device after device).
        for try await row in try await c.query(
            """
            SELECT p.seq, p.kind, p.region, extract(epoch FROM p.time)::float8, ST_Y(p.position::geometry),
                   ST_X(p.position::geometry), p.alt, p.h_acc, p.v_acc, p.speed, p.course, p.valid,
                   p.attributes::text, p.key, p.device, p.span, u.i
            FROM unnest(\(PostgresArray.texts(devices.map(\.device)))::text[], \(PostgresArray.doubles(since))::float8[])
                WITH ORDINALITY AS u(device, since, i)
            CROSS JOIN LATERAL (
                SELECT * FROM positions q WHERE q.device = u.device AND q.time >= to_timestamp(u.since)
                ORDER BY q.time, q.key
            ) p
            """, logger: logger)
        {
            // The trail's 16 columns (``record(_:)``), then the device's place in `devices`.
            var cells = RowCells(row)
            let (r, key, _) = try Self.record(&cells)
            let i = try cells.next(Int64.self)
            records[Int(i) - 1].append(KeyedRecord(key: key, record: r))
        }
        return (since, records, states)
    }

    /// In the catch-up's transaction (the devices' `stop_detectors` rows held): evaluates each
    /// device's records from its saved state, stores the new events and their delivery entries,
    /// and returns the events stored and each device's new state (in `due`'s order), which the
    /// caller saves with the row, clearing the mark. Set-based: one statement for the events and
    /// their entries, whatever their number.
    func storeEvents(_ c: PostgresConnection, _ due: [EventsDue]) async throws
        -> (stored: [DeviceEvent], states: [[UInt8]])
    {
        guard !due.isEmpty else { return ([], []) }
        let set = try await geofenceSet(c)
        var found: [DeviceEvent] = []
        var states: [[UInt8]] = []
        for d in due {
            let result = StoredEvents.evaluate(
                state: d.state, records: d.records, stops: d.stops, device: d.device, geofences: set,
                rules: storedEvents.rules(for: d.device))
            found += result.events
            states.append(result.state)
        }
        guard !found.isEmpty else { return ([], states) }
        // One statement: the events not stored yet, numbered in their order (each device's in its
        // own), and one delivery entry per hook that wants each of those.
        let queued = now
        var inserted: Set<String> = []
        for try await id in try await c.query(
            """
            WITH e AS (
                INSERT INTO events (id, device, kind, time, body)
                SELECT id, device, kind, time, body
                FROM unnest(\(PostgresArray.texts(found.map(\.id)))::text[],
                            \(PostgresArray.texts(found.map(\.device)))::text[],
                            \(PostgresArray.texts(found.map(\.kind.rawValue)))::text[],
                            \(PostgresArray.doubles(found.map(\.time)))::float8[],
                            \(PostgresArray.texts(found.map { String(decoding: $0.json, as: UTF8.self) }))::text[])
                    WITH ORDINALITY AS u(id, device, kind, time, body, n)
                -- A stop already told, found again a few seconds off (StoredEvents.sameStopWithin).
                WHERE u.kind <> ALL (\(PostgresArray.texts(StoredEvents.stopKinds.map(\.rawValue).sorted()))::text[])
                   OR NOT EXISTS (
                       SELECT 1 FROM events x WHERE x.device = u.device AND x.kind = u.kind AND x.id <> u.id
                         AND x.time > u.time - \(StoredEvents.sameStopWithin) AND x.time < u.time + \(StoredEvents.sameStopWithin))
                ORDER BY n
                ON CONFLICT (id) DO NOTHING RETURNING id, device, kind, seq
            ), q AS (
                INSERT INTO deliveries (hook, event, device, seq, queued, due)
                SELECT h.name, e.id, e.device, e.seq, \(queued), \(queued) FROM e JOIN hooks h
                    ON (h.kinds IS NULL OR e.kind = ANY (h.kinds)) AND (h.devices IS NULL OR e.device = ANY (h.devices))
                ON CONFLICT DO NOTHING
            )
            SELECT id FROM e
            """, logger: logger
        ).decode(String.self) { inserted.insert(id) }
        // Each stored once, in the order found (an id found twice is stored by its first).
        var stored: [DeviceEvent] = []
        for e in found where inserted.remove(e.id) != nil { stored.append(e) }
        return (stored, states)
    }

    // MARK: Geofences

    public func geofences() async throws -> [Geofence] {
        var features: [[UInt8]] = []
        for try await f in try await liveQuery("SELECT feature FROM geofences ORDER BY name", logger: logger)
            .decode(ByteBuffer.self)
        { features.append(Array(f.readableBytesView)) }
        return try StoredEvents.geofences(features)
    }

    func nextGeofenceGeneration(_ c: PostgresConnection) async throws -> Int64 {
        var g: Int64 = 1
        for try await n in try await c.query(
            "UPDATE geofence_generation SET generation = generation + 1 RETURNING generation", logger: logger
        ).decode(Int64.self) { g = n }
        return g
    }

    public func replaceGeofences(_ geofences: [Geofence]) async throws {
        try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                let generation = try await self.nextGeofenceGeneration(c)
                try await c.query("DELETE FROM geofences", logger: self.logger)
                _ = try await self.upsertGeofences(c, geofences, generation: generation)
            }
        }
    }

    public func putGeofences(_ geofences: [Geofence]) async throws -> Int {
        guard !geofences.isEmpty else { return 0 }
        return try await withLiveConnection { connection in
            do {
                return try await self.putGeofences(geofences, on: connection)
            } catch let error as PostgresTransactionError {
                // The refusal as thrown, not wrapped in the transaction's error.
                if let refusal = error.closureError as? EventsError { throw refusal }
                throw error
            }
        }
    }

    func putGeofences(_ geofences: [Geofence], on connection: PostgresConnection) async throws -> Int {
        try await connection.withTransaction(logger: self.logger) { c in
            let generation = try await self.nextGeofenceGeneration(c)
            let added = try await self.upsertGeofences(c, geofences, generation: generation)
            // The whole set within a document's bound, or nothing stored (the transaction rolls back).
            var total: Int64 = 0
            for try await n in try await c.query("SELECT count(*)::int8 FROM geofences", logger: self.logger)
                .decode(Int64.self)
            { total = n }
            if total > GeofenceDocument.Limits().geofences { throw StoredEvents.tooManyGeofences(Int(total)) }
            return added
        }
    }

    /// In the caller's transaction: adds `geofences` at revision `generation`, or replaces those of
    /// their names, 1,000 a statement; returns how many were new.
    func upsertGeofences(_ c: PostgresConnection, _ geofences: [Geofence], generation: Int64) async throws -> Int {
        var added = 0
        for chunk in stride(from: 0, to: geofences.count, by: 1000) {
            let part = geofences[chunk..<min(chunk + 1000, geofences.count)]
            var binds = PostgresBindings()
            binds.append(PostgresArray.texts(part.map(\.name)))
            binds.append(
                PostgresArray.texts(part.map { String(decoding: GeofenceDocument.feature($0), as: UTF8.self) }))
            binds.append(generation)
            // `xmax = 0`: a row inserted, not one updated.
            for try await inserted in try await c.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO geofences (name, feature, revision)
                        SELECT n, convert_to(f, 'UTF8'), $3 FROM unnest($1::text[], $2::text[]) AS t(n, f)
                        ON CONFLICT (name) DO UPDATE SET feature = excluded.feature, revision = excluded.revision
                        RETURNING (xmax = 0)
                        """, binds: binds), logger: logger
            ).decode(Bool.self) where inserted { added += 1 }
        }
        return added
    }

    public func removeGeofence(_ name: String) async throws -> Bool {
        try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                var removed = false
                for try await _ in try await c.query(
                    "DELETE FROM geofences WHERE name = \(name) RETURNING 1", logger: self.logger
                ).decode(Int32.self) { removed = true }
                if removed { _ = try await self.nextGeofenceGeneration(c) }
                return removed
            }
        }
    }

    // MARK: Events

    public func events(_ query: EventQuery, after cursor: EventCursor?, limit: Int) async throws
        -> (events: [StoredEvent], next: EventCursor?)
    {
        precondition(limit > 0, "a page holds at least one event")
        var binds = PostgresBindings()
        func parameter(_ value: some PostgresNonThrowingEncodable) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
        var sql = "SELECT id, device, kind, time, body FROM events WHERE true"
        if query.from.isFinite { sql += " AND time >= \(parameter(query.from))" }
        if query.to.isFinite { sql += " AND time <= \(parameter(query.to))" }
        if let device = query.device { sql += " AND device = \(parameter(device))" }
        if let kinds = query.kinds {
            sql += " AND kind = ANY (\(parameter(PostgresArray.texts(kinds.map(\.rawValue)))))"
        }
        if let cursor {
            let t = parameter(cursor.time)
            sql += " AND time >= \(t) AND (time > \(t) OR (time = \(t) AND id > \(parameter(cursor.id))))"
        }
        sql += " ORDER BY time, id LIMIT \(parameter(Int64(limit + 1)))"
        var events: [StoredEvent] = []
        var more = false
        for try await (id, device, kind, time, body) in try await liveQuery(
            PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger
        ).decode((String, String, String, Double, String).self) {
            if events.count == limit {
                more = true
                continue
            }
            guard let k = EventKind(rawValue: kind) else { continue }
            events.append(StoredEvent(id: id, device: device, kind: k, time: time, body: Array(body.utf8)))
        }
        return (events, more ? events.last.map { EventCursor(time: $0.time, id: $0.id) } : nil)
    }

    // MARK: Hooks

    public func storedHooks() async throws -> [StoredHook] {
        var out: [StoredHook] = []
        for try await (name, kinds, devices, settings) in try await liveQuery(
            "SELECT name, kinds, devices, settings FROM hooks ORDER BY name", logger: logger
        ).decode((String, [String]?, [String]?, String).self) {
            out.append(
                StoredHook(
                    name: name, kinds: kinds.map { Set($0.compactMap(EventKind.init(rawValue:))) },
                    devices: devices.map(Set.init), settings: settings))
        }
        return out
    }

    public func putHook(_ hook: StoredHook) async throws -> Bool {
        var binds = PostgresBindings()
        binds.append(hook.name)
        if let kinds = hook.kinds {
            binds.append(PostgresArray.texts(kinds.map(\.rawValue).sorted()))
        } else {
            binds.appendNull()
        }
        if let devices = hook.devices {
            binds.append(PostgresArray.texts(devices.sorted()))
        } else {
            binds.appendNull()
        }
        binds.append(hook.settings)
        var inserted = false
        for try await i in try await liveQuery(
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO hooks (name, kinds, devices, settings) VALUES ($1, $2::text[], $3::text[], $4)
                    ON CONFLICT (name) DO UPDATE SET kinds = excluded.kinds, devices = excluded.devices,
                        settings = excluded.settings
                    RETURNING (xmax = 0)
                    """, binds: binds), logger: logger
        ).decode(Bool.self) { inserted = i }
        return inserted
    }

    public func removeHook(_ name: String) async throws -> Bool {
        try await withLiveConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                try await c.query("DELETE FROM deliveries WHERE hook = \(name)", logger: self.logger)
                var removed = false
                for try await _ in try await c.query(
                    "DELETE FROM hooks WHERE name = \(name) RETURNING 1", logger: self.logger
                ).decode(Int32.self) { removed = true }
                return removed
            }
        }
    }

    public func retryDeadDeliveries(hook name: String, now: Double) async throws -> Int {
        var n = 0
        for try await _ in try await liveQuery(
            """
            UPDATE deliveries SET dead = NULL, attempts = 0, due = \(now), lease = NULL, lease_until = NULL
            WHERE hook = \(name) AND dead IS NOT NULL RETURNING 1
            """, logger: logger
        ).decode(Int32.self) { n += 1 }
        return n
    }

    public func deliveryCounts() async throws -> [String: DeliveryCounts] {
        var out: [String: DeliveryCounts] = [:]
        for try await (hook, pending, dead, lastError) in try await liveQuery(
            """
            SELECT d.hook, count(*) FILTER (WHERE d.dead IS NULL), count(*) FILTER (WHERE d.dead IS NOT NULL),
                (SELECT e.last_error FROM deliveries e WHERE e.hook = d.hook AND e.last_error IS NOT NULL
                 ORDER BY e.dead IS NOT NULL, e.attempts DESC LIMIT 1)
            FROM deliveries d GROUP BY d.hook
            """, logger: logger
        ).decode((String, Int64, Int64, String?).self) {
            out[hook] = DeliveryCounts(pending: Int(pending), dead: Int(dead), lastError: lastError)
        }
        return out
    }

    // MARK: The queue

    /// One statement: the head entry of each device for the hook (the lowest sequence not dead),
    /// those due and not leased, locked `FOR UPDATE SKIP LOCKED` (the conditions repeated on the
    /// locked row, which PostgreSQL checks again on its newest version), leased.
    public func claimDeliveries(hook: String, limit: Int, now: Double, leaseUntil: Double, token: String)
        async throws -> [QueuedDelivery]
    {
        var out: [QueuedDelivery] = []
        for try await (event, device, attempts, queued, kind, time, body) in try await liveQuery(
            """
            WITH heads AS (
                SELECT DISTINCT ON (device) event FROM deliveries WHERE hook = \(hook) AND dead IS NULL
                ORDER BY device, seq
            ), due AS (
                SELECT d.hook, d.event FROM deliveries d JOIN heads h ON h.event = d.event
                WHERE d.hook = \(hook) AND d.dead IS NULL AND d.due <= \(now)
                  AND (d.lease_until IS NULL OR d.lease_until <= \(now))
                ORDER BY d.queued, d.seq LIMIT \(Int64(limit))
                FOR UPDATE OF d SKIP LOCKED
            )
            UPDATE deliveries d SET lease = \(token), lease_until = \(leaseUntil)
            FROM due, events e
            WHERE d.hook = due.hook AND d.event = due.event AND e.id = d.event
            RETURNING d.event, d.device, d.attempts, d.queued, e.kind, e.time, e.body
            """, logger: logger
        ).decode((String, String, Int32, Double, String, Double, String).self) {
            guard let k = EventKind(rawValue: kind) else { continue }
            out.append(
                QueuedDelivery(
                    hook: hook,
                    event: StoredEvent(id: event, device: device, kind: k, time: time, body: Array(body.utf8)),
                    attempts: Int(attempts), queued: queued, token: token))
        }
        return out.sorted { $0.queued < $1.queued }
    }

    public func settleDelivery(
        hook: String, event: String, token: String, outcome: DeliverySettlement, now: Double
    ) async throws -> Bool {
        let query: PostgresQuery
        switch outcome {
        case .delivered:
            query = "DELETE FROM deliveries WHERE hook = \(hook) AND event = \(event) AND lease = \(token) RETURNING 1"
        case .retry(let at, let reason):
            query = """
                UPDATE deliveries SET attempts = attempts + 1, due = \(at), lease = NULL, lease_until = NULL,
                    last_error = \(reason)
                WHERE hook = \(hook) AND event = \(event) AND lease = \(token) RETURNING 1
                """
        case .dead(let reason):
            query = """
                UPDATE deliveries SET attempts = attempts + 1, dead = \(reason), lease = NULL, lease_until = NULL,
                    last_error = \(reason)
                WHERE hook = \(hook) AND event = \(event) AND lease = \(token) RETURNING 1
                """
        }
        var settled = false
        for try await _ in try await liveQuery(query, logger: logger).decode(Int32.self) { settled = true }
        return settled
    }

    public func nextDeliveryDue(hook: String, after now: Double) async throws -> Double? {
        var next: Double?
        for try await n in try await liveQuery(
            """
            WITH heads AS (
                SELECT DISTINCT ON (device) due, lease_until FROM deliveries WHERE hook = \(hook) AND dead IS NULL
                ORDER BY device, seq
            )
            SELECT min(CASE WHEN lease_until > \(now) THEN GREATEST(lease_until, due) ELSE due END) FROM heads
            WHERE due > \(now) OR lease_until > \(now)
            """, logger: logger
        ).decode(Double?.self) { next = n }
        return next
    }
}
