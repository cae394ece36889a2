import EndpointEvents
import Formats
import Geo
import LocationService
import Logging
import NIOCore
import PostgresNIO
import TrackStore

/// Stops and trips kept at ingest (``StoredStops``) on PostgreSQL, where several `serve` instances
/// share the points: the statement that stores points marks each device dirty from its earliest new
/// location (a trigger appends a row to `stop_marks`, in the statement's own transaction, whichever
/// instance ran it), and the instance that stored them runs the device's detector from there right
/// after, in a transaction that holds the device's `stop_detectors` row (`FOR UPDATE`) and takes
/// its marks: the instances take a device's batches one after the other, and one that stopped
/// before running it leaves the marks for the next batch or query to run. A query runs it first
/// when the device is marked.
extension PostgresTrackStore: StopStore {
    static let storedStopsMigration = [
        """
        CREATE TABLE stop_detectors (
            device text COLLATE "C" PRIMARY KEY, state text, checkpointed float8, dirty_from float8
        )
        """,
        """
        CREATE TABLE stop_checkpoints (
            device text COLLATE "C" NOT NULL, time float8 NOT NULL, state text NOT NULL, PRIMARY KEY (device, time)
        )
        """,
        """
        CREATE TABLE stops (
            device text COLLATE "C" NOT NULL, decided float8 NOT NULL, arrival float8 NOT NULL,
            departure float8 NOT NULL, lat float8 NOT NULL, lon float8 NOT NULL, radius float8 NOT NULL,
            fixes bigint NOT NULL, PRIMARY KEY (device, decided)
        )
        """,
        """
        CREATE TABLE trips (
            device text COLLATE "C" NOT NULL, decided float8 NOT NULL, trip_start float8 NOT NULL,
            trip_end float8 NOT NULL, start_lat float8 NOT NULL, start_lon float8 NOT NULL, end_lat float8 NOT NULL,
            end_lon float8 NOT NULL, distance float8 NOT NULL, max_speed float8 NOT NULL, PRIMARY KEY (device, decided)
        )
        """,
        "INSERT INTO stop_detectors (device, dirty_from) SELECT id, \(StoredStops.neverComputed) FROM devices",
        """
        CREATE FUNCTION keeptrack_stops_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO stop_detectors AS s (device, dirty_from)
            SELECT device, min(extract(epoch FROM time)::float8) FROM added WHERE kind = 'location' AND valid
            GROUP BY device ORDER BY device
            ON CONFLICT (device) DO UPDATE SET dirty_from = LEAST(s.dirty_from, excluded.dirty_from);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER positions_stops AFTER INSERT ON positions REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION keeptrack_stops_after_insert()
        """,
    ]

    /// Batches mark their devices without waiting for a catch-up: the trigger appends one row per
    /// device to `stop_marks` (no key: no conflict, no row lock to wait for), where it upserted the
    /// device's `stop_detectors` row, which a catch-up transaction holds `FOR UPDATE` (a batch of the
    /// device waited for the whole catch-up: `transactionid ShareLock` in pg_locks). A mark is the
    /// device's events, and its stops from its earliest location (`NULL`: no location), made at
    /// `marked` (the sweep leaves young marks to the batch's own instance). The
    /// catch-up takes the marks of the rows it holds (``advanceStoredStopsAndEvents(devices:computingAll:)``);
    /// the marks kept on the rows (`dirty_from`, `events_dirty`: "never computed", and those left
    /// before this migration) still count.
    static let stopMarksMigration = [
        """
        CREATE TABLE stop_marks (
            device text COLLATE "C" NOT NULL, dirty_from float8, marked timestamptz NOT NULL DEFAULT now()
        )
        """,
        "CREATE INDEX stop_marks_device ON stop_marks (device)",
        """
        CREATE OR REPLACE FUNCTION keeptrack_stops_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO stop_marks (device, dirty_from)
            SELECT device, min(extract(epoch FROM time)::float8) FILTER (WHERE kind = 'location' AND valid)
            FROM added GROUP BY device;
            RETURN NULL;
        END
        $$
        """,
    ]

    static let pointColumns = """
        SELECT extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry), h_acc, speed
        FROM positions WHERE device = $1 AND kind = 'location' AND valid
        """

    /// A device's valid locations after `after` (and up to `through`), by time, as a query.
    static func points(device: String, after: Double, through: Double = .infinity, from: Double? = nil, limit: Int?)
        -> PostgresQuery
    {
        var binds = PostgresBindings()
        binds.append(device)
        var sql = pointColumns
        // Bounds beyond ±1e11 s (years -1200 and 5100) are none: stored times lie between 1980 and a
        // day ahead, and to_timestamp takes no time beyond PostgreSQL's range.
        if let from, from > -1e11 {
            binds.append(from)
            sql += " AND time >= to_timestamp($\(binds.count))"
        } else if after > -1e11 {
            binds.append(after)
            sql += " AND time > to_timestamp($\(binds.count))"
        }
        if through < 1e11 {
            binds.append(through)
            sql += " AND time <= to_timestamp($\(binds.count))"
        }
        sql += " ORDER BY time"
        if let limit { sql += " LIMIT \(limit)" }
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }

    /// Returns once the detectors have run over every batch stored so far.
    public func storedStopsSettled() async {
        await stopsCatchUp.settled()
    }

    /// ``advanceStoredStops(devices:)`` for the catch-up: a failure (the database gone) leaves the
    /// devices marked, for the next batch or query to run them; said at error level.
    func catchUpStoredStops(devices: Set<String>) async {
        do {
            try await advanceStoredStops(devices: devices)
        } catch {
            logger.error(
                "stops and trips not kept for now: the next batch or query runs them",
                metadata: ["devices": "\(devices.count)", "error": "\(String(reflecting: type(of: error)))"])
        }
    }

    /// Runs the detectors of the devices of batches just stored and publishes what they found:
    /// ``devicesPerTransaction`` devices at a time, each group in one transaction
    /// (``advanceStoredStopsAndEvents(devices:computingAll:)``).
    func advanceStoredStops(devices: Set<String>) async throws {
        let sorted = devices.sorted()
        for start in stride(from: 0, to: sorted.count, by: Self.devicesPerTransaction) {
            let group = Array(sorted[start..<min(start + Self.devicesPerTransaction, sorted.count)])
            let (found, events, marks) = try await retryingConflicts {
                try await self.advanceStoredStopsAndEvents(devices: group, computingAll: false)
            }
            // After the commit: only what is stored is told.
            eventFeed.publish(events)
            stopEvents.publish(found)
            if !marks.isEmpty { outlierMarks.publish(marks) }
        }
    }

    /// Runs `device`'s detector over the points after its marks (see the SQLite store's, the same
    /// steps), holding its `stop_detectors` row; `computingAll` for a query, which runs it when
    /// the device was never computed too. Returns the stops and trips found (none when
    /// `computingAll`).
    func advanceStoredStops(device: String, computingAll: Bool) async throws -> [StopEvent] {
        let (found, events, marks) = try await advanceStoredStopsAndEvents(
            devices: [device], computingAll: computingAll)
        // After the commit: only what is stored is told.
        eventFeed.publish(events)
        if !marks.isEmpty { outlierMarks.publish(marks) }
        return found
    }

    /// Devices caught up in one transaction at most: a run of the catch-up takes the devices noted
    /// in groups of this many, one transaction each (about fifteen round trips and one commit for
    /// the group instead of about ten round trips and a commit per device).
    static let devicesPerTransaction = 100

    /// A device's `stop_detectors` row as the catch-up locked it, its marks (`stop_marks`) folded in.
    struct LockedDetector {
        var device: String
        var state: String?
        var checkpointed: Double?
        var dirty: Double?
        var eventsDirty: Bool
        var saved: [UInt8]?
    }

    /// A device's detector run in the catch-up's transaction.
    struct DetectorRun {
        var row: Int
        var advance: StoredStops.Advance
        var dirty: Double
        /// Run again from a checkpoint (a late point): its stops, trips and marks after it deleted.
        var rewound: Bool
        /// The outlier marks this run changed (``OutlierMarks``), told after the commit.
        var changes = OutlierMarks.Changes()
    }

    /// The catch-up's transaction for `devices` (see ``StoredStopsCatchUp``): the stops and trips
    /// found (none when `computingAll`) and the events stored.
    ///
    /// Set-based: the devices' rows are locked by one statement in device order, their marks taken
    /// by another, their records read by one query for both the events and the detectors
    /// (``eventRecords(_:_:)``; a detector run again from before the events' bound reads its
    /// points apart, by another), and what the detectors found written by one statement per
    /// table; the events likewise (``storeEvents(_:_:)``). Only a device whose
    /// detector runs again from a checkpoint (a late point) or whose statistics changed costs
    /// statements of its own.
    ///
    /// Locks, and why no two transactions wait on each other in a cycle: a batch's statement takes
    /// no `stop_detectors` row (its trigger appends marks to `stop_marks`, which has no key: nothing
    /// to wait for), so batches never wait on a catch-up. The rows a device has are made first, in
    /// a statement committed on its own (`ON CONFLICT DO NOTHING`, in device order). A catch-up
    /// transaction then takes its `stop_detectors` rows first, all in one statement, in device
    /// order (`ORDER BY device FOR UPDATE`): two catch-ups (two instances, or a query's) that share
    /// devices wait for each other in that order only, as each holds only rows before the one it
    /// waits for. Every other row it writes belongs to a device whose row it holds (its marks,
    /// points' marks, stops, trips, checkpoints, buckets, events and their delivery entries, which
    /// are new keys): whoever else writes those holds the device's row first, or writes other keys.
    func advanceStoredStopsAndEvents(devices: [String], computingAll: Bool) async throws
        -> ([StopEvent], [DeviceEvent], [OutlierMarks])
    {
        guard !devices.isEmpty else { return ([], [], []) }
        // The rows, made where missing (a device's first batch; a device whose points predate the
        // table, and has no marks, is "never computed"), committed on their own, in device order.
        try await liveQuery(
            """
            INSERT INTO stop_detectors (device, dirty_from)
            SELECT d, CASE WHEN EXISTS (SELECT 1 FROM stop_marks m WHERE m.device = d) THEN NULL
                           ELSE \(StoredStops.neverComputed) END
            FROM unnest(\(PostgresArray.texts(devices))::text[]) AS u(d) ORDER BY d COLLATE "C"
            ON CONFLICT (device) DO NOTHING
            """, logger: logger)
        return try await withLiveConnection { c in
            // One snapshot for the whole transaction: the marks it takes and the points it reads are
            // those of the same batches. (Each statement with a snapshot of its own, a batch committed
            // between the marks' statement and the points' would have its points run and its marks
            // left, and the next run would take them and run the device again from a checkpoint,
            // telling its stops again.) A row another catch-up changed after the snapshot is a
            // serialization failure when locked, which ``retryingConflicts(_:)`` runs again with a
            // snapshot taken after it. Errors are thrown as PostgreSQL's, for it to know them.
            try await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ", logger: self.logger)
            do {
                let result = try await self.advanceStoredStopsAndEvents(c, devices: devices, computingAll: computingAll)
                try await c.query("COMMIT", logger: self.logger)
                return result
            } catch {
                _ = try? await c.query("ROLLBACK", logger: self.logger)
                throw error
            }
        }
    }

    /// ``advanceStoredStopsAndEvents(devices:computingAll:)``'s transaction, on `c`.
    func advanceStoredStopsAndEvents(_ c: PostgresConnection, devices: [String], computingAll: Bool) async throws
        -> ([StopEvent], [DeviceEvent], [OutlierMarks])
    {
        let configuration = stopsConfiguration
        // Not waited for on disk: what this transaction writes is derived from records whose own
        // (synchronous) transactions left the devices marked, and it takes the marks. Lost in a
        // crash of PostgreSQL, it is lost whole, the marks stay, and it is run again with the
        // same results (events keep their ids); any later synchronous commit (a delivery
        // settled) makes it durable first.
        // The rows, and asynchronous commit for this transaction, in one round trip.
        var locked: [LockedDetector] = []
        for try await r in try await c.query(
            """
            SELECT device, state, checkpointed, dirty_from, events_dirty, events_state,
                   set_config('synchronous_commit', 'off', true)
            FROM stop_detectors WHERE device = ANY (\(PostgresArray.texts(devices))::text[])
            ORDER BY device FOR UPDATE
            """,
            logger: self.logger
        ).decode((String, String?, Double?, Double?, Bool, ByteBuffer?, String).self) {
            locked.append(
                LockedDetector(
                    device: r.0, state: r.1, checkpointed: r.2, dirty: r.3, eventsDirty: r.4,
                    saved: r.5.map { Array($0.readableBytesView) }))
        }
        guard !locked.isEmpty else { return ([], [], []) }
        var row: [String: Int] = [:]
        for (i, d) in locked.enumerated() { row[d.device] = i }
        let names = PostgresArray.texts(locked.map(\.device))
        // The marks batches committed so far: taken (a batch that commits after this leaves its
        // own, for the next run). Every mark is the device's events; those with locations are its
        // stops from their earliest.
        for try await (device, from) in try await c.query(
            "DELETE FROM stop_marks WHERE device = ANY (\(names)::text[]) RETURNING device, dirty_from",
            logger: self.logger
        ).decode((String, Double?).self) {
            guard let i = row[device] else { continue }
            locked[i].eventsDirty = true
            if let from { locked[i].dirty = min(locked[i].dirty ?? from, from) }
        }
        // The detectors: from the state saved where the new points all come after it, else from
        // the checkpoint before the earliest (its stops, trips and marks after it deleted).
        var runs: [DetectorRun] = []
        var after: [Double] = []
        for (i, d) in locked.enumerated() {
            guard let dirty = d.dirty, dirty > StoredStops.neverComputed || computingAll else { continue }
            // A saved state or checkpoint that does not read back is passed over (``StoredStops/resumable(_:device:at:logger:)``).
            let state = StoredStops.resumable(d.state, device: d.device, at: nil, logger: logger)
            if let state, let last = state.lastGiven, dirty > last {
                runs.append(
                    DetectorRun(
                        row: i,
                        advance: StoredStops.Advance(
                            from: state, checkpointed: d.checkpointed ?? -.infinity,
                            configuration: configuration),
                        dirty: dirty, rewound: false))
                after.append(last)
            } else {
                var changes = OutlierMarks.Changes()
                let (advance, from) = try await self.rewind(
                    c, device: d.device, before: dirty, configuration: configuration, changes: &changes)
                runs.append(DetectorRun(row: i, advance: advance, dirty: dirty, rewound: true, changes: changes))
                after.append(from)
            }
        }
        // The records of every device that may have events to evaluate (marked, or its detector
        // about to decide stops), read once (``eventRecords(_:_:)``). A detector whose points all
        // come after the records' bound takes its points from them (the valid locations after its
        // own bound, in the same order of time); the others read theirs from the index.
        let deciding = Set(runs.filter { $0.dirty > StoredStops.neverComputed }.map(\.row))
        let evaluated = locked.indices.filter { locked[$0].eventsDirty || deciding.contains($0) }
        let (since, records, saved) = try await self.eventRecords(
            c, evaluated.map { (locked[$0].device, locked[$0].saved) })
        var read: [Int: Int] = [:]
        for (j, i) in evaluated.enumerated() { read[i] = j }
        var apart: [Int] = []
        for k in runs.indices {
            guard let j = read[runs[k].row], since[j] <= max(after[k], -1e11) else {
                apart.append(k)
                continue
            }
            for keyed in records[j] {
                let r = keyed.record
                guard r.kind == .location, r.valid, r.time > after[k] else { continue }
                runs[k].advance.add(
                    time: r.time, latitude: r.latitude, longitude: r.longitude, accuracy: r.horizontalAccuracy,
                    speed: r.speed)
            }
        }
        if !apart.isEmpty {
            let rows = try await c.query(
                Self.points(devices: apart.map { locked[runs[$0].row].device }, after: apart.map { after[$0] }),
                logger: self.logger)
            for try await row in rows {
                var cells = RowCells(row)
                let n = try cells.next(Int64.self)
                let p = try cells.point()
                runs[apart[Int(n) - 1]].advance.add(
                    time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.accuracy, speed: p.speed)
            }
        }
        for i in runs.indices {
            try await Self.markOutliers(
                c, device: locked[runs[i].row].device, runs[i].advance.outliers, changes: &runs[i].changes,
                logger: self.logger)
        }
        var changes: [String: OutlierMarks.Changes] = [:]
        for run in runs { changes[locked[run.row].device] = run.changes }
        try await Self.markPending(
            c,
            runs.map {
                (locked[$0.row].device, $0.advance.startPending, $0.advance.pending, $0.rewound)
            }, changes: &changes, logger: self.logger)
        try await Self.storeFound(c, runs.map { (locked[$0.row].device, $0.advance) }, logger: self.logger)
        try await Self.rebuildStatistics(c, devices: runs.map { locked[$0.row].device }, logger: self.logger)
        // The events of every device marked, and of those whose detector decided a stop or trip.
        var found: [StopEvent] = []
        var stops: [Int: [StopEvent]] = [:]
        for run in runs where run.dirty > StoredStops.neverComputed {
            let events = run.advance.events(device: locked[run.row].device, since: run.dirty)
            stops[run.row] = events
            found += events
        }
        let due = locked.indices.filter { locked[$0].eventsDirty || !(stops[$0] ?? []).isEmpty }
        let (events, states) = try await self.storeEvents(
            c,
            due.map {
                EventsDue(
                    device: locked[$0].device, state: saved[read[$0]!], records: records[read[$0]!],
                    stops: stops[$0] ?? [])
            })
        // Every instance's delivery worker woken at the commit (one notification for all).
        if !events.isEmpty { try await Self.notifyQueued(c, logger: self.logger) }
        try await Self.saveDetectors(
            c, locked: locked, runs: runs, evented: Array(zip(due, states)), logger: self.logger)
        // The outlier marks changed, but for a device never computed (its whole history at once).
        let marks = runs.compactMap { run -> OutlierMarks? in
            guard run.dirty > StoredStops.neverComputed, let noted = changes[locked[run.row].device] else { return nil }
            return noted.marks(device: locked[run.row].device, time: run.advance.detector.lastGiven ?? run.dirty)
        }
        return (computingAll ? [] : found, events, marks)
    }

    /// Starts `device`'s detector again from its checkpoint before `before` (none: from its first
    /// point), deleting the checkpoints, stops, trips and marks after it (the marks cleared noted in
    /// `changes`); returns the detector and the time its points come after.
    func rewind(
        _ c: PostgresConnection, device: String, before: Double, configuration: VisitDetector.Configuration,
        changes: inout OutlierMarks.Changes
    ) async throws -> (StoredStops.Advance, Double) {
        var cp: (Double, String)?
        for try await r in try await c.query(
            """
            SELECT time, state FROM stop_checkpoints WHERE device = \(device) AND time < \(before)
            ORDER BY time DESC LIMIT 1
            """, logger: logger
        ).decode((Double, String).self) { cp = r }
        let after: Double
        let advance: StoredStops.Advance
        if let cp, let detector = StoredStops.resumable(cp.1, device: device, at: cp.0, logger: logger) {
            after = cp.0
            advance = StoredStops.Advance(from: detector, checkpointed: after, configuration: configuration)
        } else {
            after = -Double.greatestFiniteMagnitude
            advance = StoredStops.Advance(from: nil, checkpointed: -.infinity, configuration: configuration)
        }
        try await c.query("DELETE FROM stop_checkpoints WHERE device = \(device) AND time > \(after)", logger: logger)
        try await c.query("DELETE FROM stops WHERE device = \(device) AND decided > \(after)", logger: logger)
        try await c.query("DELETE FROM trips WHERE device = \(device) AND decided > \(after)", logger: logger)
        try await Self.clearOutliers(c, device: device, after: after, changes: &changes, logger: logger)
        return (advance, after)
    }

    /// The valid locations of each of `devices` after its time in `after`, by time, each row with
    /// the device's place in `devices` (from 1): device after device, in the order of the lateral
    /// subquery's index scan (as ``points(device:after:through:from:limit:)`` reads them).
    static func points(devices: [String], after: [Double]) -> PostgresQuery {
        var binds = PostgresBindings()
        binds.append(PostgresArray.texts(devices))
        binds.append(PostgresArray.doubles(after))
        // Bounds below -1e11 s are none (see points(device:...)).
        return PostgresQuery(
            unsafeSQL: """
                SELECT u.i, p.t, p.lat, p.lon, p.h_acc, p.speed
                FROM unnest($1::text[], $2::float8[]) WITH ORDINALITY AS u(device, after, i)
                CROSS JOIN LATERAL (
                    SELECT extract(epoch FROM time)::float8 AS t, ST_Y(position::geometry) AS lat,
                           ST_X(position::geometry) AS lon, h_acc, speed
                    FROM positions q WHERE q.device = u.device AND kind = 'location' AND valid
                      AND time > CASE WHEN u.after > -1e11 THEN to_timestamp(u.after) ELSE '-infinity' END
                    ORDER BY time
                ) p
                """, binds: binds)
    }

    /// Stores the stops, trips and checkpoints the detectors of `runs` found, one statement per table.
    static func storeFound(_ c: PostgresConnection, _ runs: [(String, StoredStops.Advance)], logger: Logger)
        async throws
    {
        let stops = runs.flatMap { d, a in a.stops.map { (d, $0.decided, $0.visit) } }
        if !stops.isEmpty {
            try await c.query(
                """
                INSERT INTO stops (device, decided, arrival, departure, lat, lon, radius, fixes)
                SELECT * FROM unnest(\(PostgresArray.texts(stops.map(\.0)))::text[],
                    \(PostgresArray.doubles(stops.map(\.1)))::float8[],
                    \(PostgresArray.doubles(stops.map(\.2.arrival)))::float8[],
                    \(PostgresArray.doubles(stops.map { $0.2.departure ?? $0.2.arrival }))::float8[],
                    \(PostgresArray.doubles(stops.map(\.2.coordinate.latitude)))::float8[],
                    \(PostgresArray.doubles(stops.map(\.2.coordinate.longitude)))::float8[],
                    \(PostgresArray.doubles(stops.map(\.2.horizontalAccuracy)))::float8[],
                    \(PostgresArray.integers(stops.map { Int64($0.2.fixCount) }))::int8[])
                ON CONFLICT (device, decided) DO NOTHING
                """, logger: logger)
        }
        let trips = runs.flatMap { d, a in a.trips.map { (d, $0.decided, $0.trip) } }
        if !trips.isEmpty {
            try await c.query(
                """
                INSERT INTO trips (device, decided, trip_start, trip_end, start_lat, start_lon, end_lat, end_lon,
                                   distance, max_speed)
                SELECT * FROM unnest(\(PostgresArray.texts(trips.map(\.0)))::text[],
                    \(PostgresArray.doubles(trips.map(\.1)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.start)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.end)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.startCoordinate.latitude)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.startCoordinate.longitude)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.endCoordinate.latitude)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.endCoordinate.longitude)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.distance)))::float8[],
                    \(PostgresArray.doubles(trips.map(\.2.maximumSpeed)))::float8[])
                ON CONFLICT (device, decided) DO NOTHING
                """, logger: logger)
        }
        // A checkpoint written twice for one time keeps the last (one statement may not update a row twice).
        var checkpoints: [(String, Double, String)] = []
        var seen: [String: [Double: Int]] = [:]
        for (d, a) in runs {
            for (time, state) in a.checkpoints {
                let text = try StoredStops.encode(state)
                if let i = seen[d]?[time] {
                    checkpoints[i].2 = text
                } else {
                    seen[d, default: [:]][time] = checkpoints.count
                    checkpoints.append((d, time, text))
                }
            }
        }
        if !checkpoints.isEmpty {
            try await c.query(
                """
                INSERT INTO stop_checkpoints (device, time, state)
                SELECT * FROM unnest(\(PostgresArray.texts(checkpoints.map(\.0)))::text[],
                    \(PostgresArray.doubles(checkpoints.map(\.1)))::float8[],
                    \(PostgresArray.texts(checkpoints.map(\.2)))::text[])
                ON CONFLICT (device, time) DO UPDATE SET state = excluded.state
                """, logger: logger)
        }
    }

    /// Saves the detectors that ran (their state, the stop mark cleared) and the events' states of
    /// the devices evaluated (the events mark cleared), in one statement.
    static func saveDetectors(
        _ c: PostgresConnection, locked: [LockedDetector], runs: [DetectorRun], evented: [(Int, [UInt8])],
        logger: Logger
    ) async throws {
        var ran: [Int: StoredStops.Advance] = [:]
        for run in runs { ran[run.row] = run.advance }
        var events: [Int: [UInt8]] = [:]
        for (i, state) in evented { events[i] = state }
        let rows = locked.indices.filter { ran[$0] != nil || events[$0] != nil }
        guard !rows.isEmpty else { return }
        let states = try rows.map { i in try ran[i].map { try StoredStops.encode($0.detector) } }
        try await c.query(
            """
            UPDATE stop_detectors s SET
                state = CASE WHEN u.ran THEN u.state ELSE s.state END,
                checkpointed = CASE WHEN u.ran THEN u.checkpointed ELSE s.checkpointed END,
                dirty_from = CASE WHEN u.ran THEN NULL ELSE s.dirty_from END,
                events_state = CASE WHEN u.evented THEN u.events_state ELSE s.events_state END,
                events_dirty = CASE WHEN u.evented THEN false ELSE s.events_dirty END
            FROM unnest(\(PostgresArray.texts(rows.map { locked[$0].device }))::text[],
                        \(PostgresArray.bools(rows.map { ran[$0] != nil }))::bool[],
                        \(PostgresArray.texts(states))::text[],
                        \(PostgresArray.doubles(rows.map { ran[$0]?.checkpointed }))::float8[],
                        \(PostgresArray.bools(rows.map { events[$0] != nil }))::bool[],
                        \(PostgresArray.byteas(rows.map { events[$0] }))::bytea[])
                AS u(device, ran, state, checkpointed, evented, events_state)
            WHERE s.device = u.device
            """, logger: logger)
    }

    /// Whether a query must run `device`'s catch-up before it reads: never computed (no row: points
    /// stored before the table), or marked (by a batch whose catch-up has not run yet, or left so).
    func stopsMarked(device: String) async throws -> Bool {
        var marked = true
        for try await (row, dirty, marks) in try await liveQuery(
            """
            SELECT s.device IS NOT NULL, s.dirty_from, EXISTS (SELECT 1 FROM stop_marks WHERE device = \(device))
            FROM (SELECT 1) one LEFT JOIN stop_detectors s ON s.device = \(device)
            """, logger: logger
        ).decode((Bool, Double?, Bool).self) { marked = !row || dirty != nil || marks }
        return marked
    }

    /// Retention deleted `device`'s points before `first` (`nil`: all of them), in `c`'s transaction,
    /// which holds the device's summary: the checkpoints, stops and trips before it go too.
    static func forgetStoredStops(_ c: PostgresConnection, device: String, logger: Logger) async throws {
        try await c.query("SELECT 1 FROM stop_detectors WHERE device = \(device) FOR UPDATE", logger: logger)
        var first: Double?
        for try await t in try await c.query(
            "SELECT extract(epoch FROM min(time))::float8 FROM positions WHERE device = \(device)", logger: logger
        ).decode(Double?.self) { first = t }
        guard let first else {
            for table in ["stop_detectors", "stop_marks", "stop_checkpoints", "stops", "trips"] {
                var binds = PostgresBindings()
                binds.append(device)
                try await c.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE device = $1", binds: binds),
                    logger: logger)
            }
            return
        }
        try await c.query("DELETE FROM stop_checkpoints WHERE device = \(device) AND time < \(first)", logger: logger)
        try await c.query("DELETE FROM stops WHERE device = \(device) AND decided < \(first)", logger: logger)
        try await c.query("DELETE FROM trips WHERE device = \(device) AND decided < \(first)", logger: logger)
        // A visit kept that began before the first point left begins with it, as a query from there
        // finds it (the statistics' trigger marks its span).
        try await c.query(
            "UPDATE stops SET arrival = \(first) WHERE device = \(device) AND arrival < \(first)", logger: logger)
    }

    public func storedStops(device: String, from: Double, to: Double) async throws -> StopsReport {
        guard !device.utf8.contains(0) else { return StopsReport() }
        // Never computed (no row: points stored before the table, or filled behind the store's
        // back), or marked by a batch whose instance has not run it yet.
        if try await stopsMarked(device: device) {
            _ = try await retryingConflicts { try await self.advanceStoredStops(device: device, computingAll: true) }
        }
        return try await withLiveConnection { c in
            try await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: self.logger)
            do {
                let report = try await self.storedStops(c, device: device, from: from, to: to)
                try await c.query("COMMIT", logger: self.logger)
                return report
            } catch {
                _ = try? await c.query("ROLLBACK", logger: self.logger)
                throw error
            }
        }
    }

    /// The query of ``StoredStops/Query`` in one snapshot (the points read a page at a time, so that
    /// it stops at the checkpoint it meets).
    func storedStops(_ c: PostgresConnection, device: String, from: Double, to: Double) async throws -> StopsReport {
        let hi = to < 1e11 ? to : .infinity
        var meta: (String?, Double?)?
        for try await r in try await c.query(
            "SELECT state, dirty_from FROM stop_detectors WHERE device = \(device)", logger: logger
        ).decode((String?, Double?).self) { meta = r }
        let horizon = meta == nil ? -Double.greatestFiniteMagnitude : meta?.1 ?? .greatestFiniteMagnitude
        let lo = from > -1e11 ? from : -1e11
        var times: [Double] = []
        for try await t in try await c.query(
            """
            SELECT time FROM stop_checkpoints WHERE device = \(device) AND time >= \(lo)
                AND time <= \(min(hi, 1e18)) AND time < \(horizon) ORDER BY time
            """, logger: logger
        ).decode(Double.self) { times.append(t) }
        // The detector starts with the threshold the first checkpoint it can meet judged with.
        var firstState: (Double, String)?
        if let t = times.first {
            for try await s in try await c.query(
                "SELECT state FROM stop_checkpoints WHERE device = \(device) AND time = \(t)", logger: logger
            ).decode(String.self) { firstState = (t, s) }
        }
        let configuration = stopsConfiguration
        var query = StoredStops.Query(
            checkpointTimes: times,
            configuration: try firstState.map { try StoredStops.decode($0.1, device: device, at: $0.0).configuration }
                ?? configuration)
        var met: Double?
        var after = -Double.greatestFiniteMagnitude
        var page = 1000
        var first = true
        pages: while true {
            var n = 0
            let rows = try await c.query(
                Self.points(device: device, after: after, through: hi, from: first ? from : nil, limit: page),
                logger: logger)
            var reached: [Double] = []
            for try await row in rows {
                var cells = RowCells(row)
                let p = try cells.point()
                n += 1
                after = p.time
                guard met == nil, reached.isEmpty else { continue }
                if let cp = query.add(
                    time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.accuracy, speed: p.speed)
                {
                    reached.append(cp)
                }
            }
            first = false
            // A checkpoint reached: compare (the rest of the page is not the detector's any more).
            if let cp = reached.first {
                var state: String?
                for try await s in try await c.query(
                    "SELECT state FROM stop_checkpoints WHERE device = \(device) AND time = \(cp)", logger: logger
                ).decode(String.self) { state = s }
                if let state {
                    let checkpoint = try StoredStops.decode(state, device: device, at: cp)
                    if query.meets(checkpoint) {
                        met = cp
                        break pages
                    }
                    query.missed(checkpoint)
                }
                // Not met: go on after the checkpoint's point.
                after = cp
                continue
            }
            if n < page { break }
            page = min(page * 4, 50_000)
        }
        var end = to
        if !to.isFinite {
            end = -.infinity
            for try await last in try await c.query(
                "SELECT extract(epoch FROM last)::float8 FROM devices WHERE id = \(device)", logger: logger
            ).decode(Double.self) { end = last }
        }
        guard let met else {
            var alone = query.accumulator
            return alone.finish(at: end)
        }
        let upper = min(min(hi, 1e18), horizon.nextDown)
        var stops: [Visit] = []
        for try await r in try await c.query(
            """
            SELECT arrival, departure, lat, lon, radius, fixes FROM stops
            WHERE device = \(device) AND decided > \(met) AND decided <= \(upper) ORDER BY decided
            """, logger: logger
        ).decode((Double, Double, Double, Double, Double, Int64).self) {
            stops.append(
                Visit(
                    coordinate: Coordinate(latitude: r.2, longitude: r.3), horizontalAccuracy: r.4, arrival: r.0,
                    departure: r.1, fixCount: Int(r.5)))
        }
        var trips: [Trip] = []
        for try await r in try await c.query(
            """
            SELECT trip_start, trip_end, start_lat, start_lon, end_lat, end_lon, distance, max_speed FROM trips
            WHERE device = \(device) AND decided > \(met) AND decided <= \(upper) ORDER BY decided
            """, logger: logger
        ).decode((Double, Double, Double, Double, Double, Double, Double, Double).self) {
            trips.append(
                Trip(
                    start: r.0, end: r.1, startCoordinate: Coordinate(latitude: r.2, longitude: r.3),
                    endCoordinate: Coordinate(latitude: r.4, longitude: r.5), distance: r.6, maximumSpeed: r.7))
        }
        var final: VisitDetector
        if meta?.1 == nil, let text = meta?.0, let state = try? StoredStops.decode(text),
            (state.lastGiven ?? -.infinity) <= hi
        {
            final = state
        } else {
            var cp: (Double, String)?
            for try await r in try await c.query(
                """
                SELECT time, state FROM stop_checkpoints WHERE device = \(device) AND time <= \(min(hi, 1e18))
                    AND time < \(horizon) ORDER BY time DESC LIMIT 1
                """, logger: logger
            ).decode((Double, String).self) { cp = r }
            guard let cp else { preconditionFailure("the checkpoint met is one") }
            var replay = StoredStops.Advance(
                from: try StoredStops.decode(cp.1, device: device, at: cp.0), checkpointed: cp.0,
                configuration: configuration)
            let rows = try await c.query(
                Self.points(device: device, after: cp.0, through: hi, limit: nil), logger: logger)
            for try await row in rows {
                var cells = RowCells(row)
                let p = try cells.point()
                replay.add(
                    time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.accuracy, speed: p.speed)
            }
            final = replay.detector
        }
        return query.report(stops: stops, trips: trips, final: final, end: end)
    }
}

/// The detectors of the devices batches stored, run after the batches' answers, in ``lanes`` at
/// once: a device always in the same lane (by its id's hash), each lane one run at a time, the
/// devices noted while a run is under way together in the lane's next one. Under load, a device's
/// detector then runs once over the points of many batches (one state read and written, one
/// transaction) instead of once per batch in the batch's request; when idle, right after the batch.
/// Nothing is lost in between: the statement that stored the points marked the device dirty in its
/// own transaction, and a query runs what is still marked before it reads (as after a crash).
///
/// Storing comes first, briefly: while this instance is storing other batches (``storingBegan()``,
/// ``storingEnded(noting:)``), a run waits before it starts, until none is being stored or
/// ``gatherLimit`` more have been, whichever comes first. Under load a run then covers more
/// devices in fewer transactions (two instances on one database made 5,269 commits for 200,000
/// records, and about 3,350 with this; docs/performance.md), and the batches being stored get the
/// cores first; the events stay at most ``gatherLimit`` batches behind. Counted in batches, not
/// time: the rule needs no clock, and a test that holds a batch open decides exactly when the
/// run starts.
///
/// A run takes its devices ``PostgresTrackStore/devicesPerTransaction`` at a time, one transaction
/// each, set-based (``PostgresTrackStore/advanceStoredStopsAndEvents(devices:computingAll:)``): a
/// device noted while a run is under way waits for that run and its own, not for a transaction per
/// device noted before it (an event's latency to its webhook was mostly that wait,
/// docs/performance.md). A device in one lane only, its instance never waits on its own row.
actor StoredStopsCatchUp {
    /// Runs at once. One: three lanes (a transaction per device then) were measured to make two
    /// instances slower (their commits more than doubled, docs/performance.md) without a clear
    /// gain in latency.
    static let lanes = 1
    /// Batches stored while a run waits, at most, before it starts (see the type's description).
    /// 32: at 1,000 locations/s in batches of 10, a third of a second; 256 kept two instances'
    /// gain and doubled an event's latency at that load (docs/performance.md).
    static let gatherLimit = 32

    private var pending: [Set<String>]
    private var workers: [Task<Void, Never>?]
    private var run: (@Sendable (Set<String>) async -> Void)?
    private let gatherLimit: Int
    /// This instance's batches being stored now.
    private var storing = 0
    /// The runs waiting for storing to pause, each with the batches stored since it began to.
    private var waiting: [(stored: Int, resume: CheckedContinuation<Void, Never>)] = []
    /// Tasks in ``runWaits()``.
    private var watchers: [CheckedContinuation<Void, Never>] = []

    init(lanes: Int = StoredStopsCatchUp.lanes, gatherLimit: Int = StoredStopsCatchUp.gatherLimit) {
        pending = Array(repeating: [], count: max(1, lanes))
        workers = Array(repeating: nil, count: max(1, lanes))
        self.gatherLimit = max(1, gatherLimit)
    }

    func attach(_ run: @escaping @Sendable (Set<String>) async -> Void) {
        self.run = run
    }

    /// The lane of `device` among `count`: its id's FNV-1a hash (the same in every process).
    static func lane(of device: String, among count: Int) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in device.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(hash % UInt64(count))
    }

    /// A batch's storing begins: runs wait for it (``storingEnded(noting:)``).
    func storingBegan() {
        storing += 1
    }

    /// A batch's storing ended, committed or not; `devices`, those it stored for, are noted
    /// (``note(_:)``). Wakes the runs waiting when no batch is being stored any more, or when
    /// ``gatherLimit`` have been since one began to wait.
    func storingEnded(noting devices: Set<String>) {
        precondition(storing > 0, "a batch's storing ended that never began")
        storing -= 1
        note(devices)
        var still: [(stored: Int, resume: CheckedContinuation<Void, Never>)] = []
        for var w in waiting {
            w.stored += 1
            if storing == 0 || w.stored >= gatherLimit { w.resume.resume() } else { still.append(w) }
        }
        waiting = still
    }

    /// Runs `devices`' detectors soon: at once in a lane that is idle and while storing pauses,
    /// else after its run under way.
    func note(_ devices: Set<String>) {
        guard !devices.isEmpty, run != nil else { return }
        for device in devices { pending[Self.lane(of: device, among: pending.count)].insert(device) }
        for lane in pending.indices where workers[lane] == nil && !pending[lane].isEmpty {
            workers[lane] = Task { await self.drain(lane) }
        }
    }

    private func drain(_ lane: Int) async {
        while !pending[lane].isEmpty, run != nil {
            if storing > 0 {
                await withCheckedContinuation {
                    waiting.append((stored: 0, resume: $0))
                    for w in watchers { w.resume() }
                    watchers = []
                }
            }
            guard let run else { break }
            let devices = pending[lane]
            pending[lane] = []
            await run(devices)
        }
        workers[lane] = nil
    }

    /// Returns once a run waits for storing to pause (at once if one does): how a test knows that
    /// the batches it ends from then on count toward ``gatherLimit``, without polling.
    func runWaits() async {
        guard waiting.isEmpty else { return }
        await withCheckedContinuation { watchers.append($0) }
    }

    /// Returns once every device noted so far has been run.
    func settled() async {
        while let worker = workers.lazy.compactMap({ $0 }).first { await worker.value }
    }

    /// Stops: the runs under way are cancelled and nothing more is run (the store closes).
    func cancel() {
        run = nil
        for w in waiting { w.resume.resume() }
        waiting = []
        for lane in pending.indices {
            pending[lane] = []
            workers[lane]?.cancel()
        }
    }
}
