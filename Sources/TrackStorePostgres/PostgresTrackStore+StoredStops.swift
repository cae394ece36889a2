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
/// location (a trigger, in the statement's own transaction, whichever instance ran it), and the
/// instance that stored them runs the device's detector from there right after, in a transaction
/// that holds the device's `stop_detectors` row (`FOR UPDATE`): the instances take a device's
/// batches one after the other, and one that stopped before running it leaves the mark for the next
/// batch or query to run. A query runs it first when the device is marked.
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

    /// Runs the detectors of the devices of a batch just stored and publishes what they found.
    func advanceStoredStops(devices: Set<String>) async throws {
        // One device after the other within a run (a lane; ``StoredStopsCatchUp`` runs its lanes at once).
        var found: [StopEvent] = []
        for device in devices.sorted() {
            found += try await retryingConflicts {
                try await self.advanceStoredStops(device: device, computingAll: false)
            }
        }
        stopEvents.publish(found)
    }

    /// Runs `device`'s detector over the points after its dirty mark (see the SQLite store's, the same
    /// steps), holding its `stop_detectors` row.
    func advanceStoredStops(device: String, computingAll: Bool) async throws -> [StopEvent] {
        let (found, events, marks) = try await advanceStoredStopsAndEvents(device: device, computingAll: computingAll)
        // After the commit: only what is stored is told.
        eventFeed.publish(events)
        if let marks { outlierMarks.publish([marks]) }
        return found
    }

    /// ``advanceStoredStops(device:computingAll:)``'s transaction: the stops and trips found (none
    /// when `computingAll`), the events stored (``storeEvents(_:device:saved:stops:)``) and the outlier
    /// marks changed (none for a device never computed: its whole history).
    func advanceStoredStopsAndEvents(device: String, computingAll: Bool) async throws
        -> ([StopEvent], [DeviceEvent], OutlierMarks?)
    {
        let configuration = stopsConfiguration
        return try await client.withConnection { connection in
            try await connection.withTransaction(logger: self.logger) { c in
                // Not waited for on disk: what this transaction writes is derived from records whose own
                // (synchronous) transactions left the device marked, and it clears the mark. Lost in a
                // crash of PostgreSQL, it is lost whole, the mark stays, and it is run again with the
                // same results (events keep their ids); any later synchronous commit (a delivery
                // settled) makes it durable first. Its commit then does not wait for a WAL flush while
                // it holds the device's row, which the device's next batch waits on.
                if computingAll {
                    try await c.query(
                        """
                        INSERT INTO stop_detectors (device, dirty_from) VALUES (\(device), \(StoredStops.neverComputed))
                        ON CONFLICT (device) DO NOTHING
                        """, logger: self.logger)
                }
                // The row, and asynchronous commit for this transaction, in one round trip.
                var row: (String?, Double?, Double?, Bool, ByteBuffer?)?
                for try await r in try await c.query(
                    """
                    SELECT state, checkpointed, dirty_from, events_dirty, events_state,
                           set_config('synchronous_commit', 'off', true)
                    FROM stop_detectors WHERE device = \(device) FOR UPDATE
                    """,
                    logger: self.logger
                ).decode((String?, Double?, Double?, Bool, ByteBuffer?, String).self) {
                    row = (r.0, r.1, r.2, r.3, r.4)
                }
                let saved = row?.4.map { Array($0.readableBytesView) }
                guard let row else { return ([], [], nil) }
                // The events of a device marked (any record) with no stops to run (no new location, or
                // never computed): its events alone.
                guard let dirty = row.2, dirty > StoredStops.neverComputed || computingAll else {
                    guard row.3 else { return ([], [], nil) }
                    let events = try await self.storeEvents(c, device: device, saved: saved, stops: [])
                    if !events.isEmpty { try await Self.notifyQueued(c, logger: self.logger) }
                    return ([], events, nil)
                }
                var advance: StoredStops.Advance
                var after: Double
                var changes = OutlierMarks.Changes()
                let state = try row.0.map(StoredStops.decode)
                if let state, let last = state.lastGiven, dirty > last {
                    advance = StoredStops.Advance(
                        from: state, checkpointed: row.1 ?? -.infinity, configuration: configuration)
                    after = last
                } else {
                    var cp: (Double, String)?
                    for try await r in try await c.query(
                        """
                        SELECT time, state FROM stop_checkpoints WHERE device = \(device) AND time < \(dirty)
                        ORDER BY time DESC LIMIT 1
                        """, logger: self.logger
                    ).decode((Double, String).self) { cp = r }
                    if let cp {
                        after = cp.0
                        advance = StoredStops.Advance(
                            from: try StoredStops.decode(cp.1), checkpointed: after, configuration: configuration)
                    } else {
                        after = -Double.greatestFiniteMagnitude
                        advance = StoredStops.Advance(
                            from: nil, checkpointed: -.infinity, configuration: configuration)
                    }
                    try await c.query(
                        "DELETE FROM stop_checkpoints WHERE device = \(device) AND time > \(after)", logger: self.logger
                    )
                    try await c.query(
                        "DELETE FROM stops WHERE device = \(device) AND decided > \(after)", logger: self.logger)
                    try await c.query(
                        "DELETE FROM trips WHERE device = \(device) AND decided > \(after)", logger: self.logger)
                    try await Self.clearOutliers(
                        c, device: device, after: after, changes: &changes, logger: self.logger)
                }
                let rows = try await c.query(Self.points(device: device, after: after, limit: nil), logger: self.logger)
                for try await (t, lat, lon, acc, speed) in rows.decode((Double, Double, Double, Double?, Double?).self)
                {
                    advance.add(time: t, latitude: lat, longitude: lon, accuracy: acc, speed: speed)
                }
                try await Self.markOutliers(c, device: device, advance.outliers, changes: &changes, logger: self.logger)
                try await Self.markPending(
                    c, device: device, was: advance.startPending, now: advance.pending, changes: &changes,
                    logger: self.logger)
                for (decided, v) in advance.stops {
                    try await c.query(
                        """
                        INSERT INTO stops (device, decided, arrival, departure, lat, lon, radius, fixes)
                        VALUES (\(device), \(decided), \(v.arrival), \(v.departure ?? v.arrival),
                                \(v.coordinate.latitude), \(v.coordinate.longitude), \(v.horizontalAccuracy),
                                \(Int64(v.fixCount)))
                        ON CONFLICT (device, decided) DO NOTHING
                        """, logger: self.logger)
                }
                for (decided, t) in advance.trips {
                    try await c.query(
                        """
                        INSERT INTO trips (device, decided, trip_start, trip_end, start_lat, start_lon, end_lat,
                                           end_lon, distance, max_speed)
                        VALUES (\(device), \(decided), \(t.start), \(t.end), \(t.startCoordinate.latitude),
                                \(t.startCoordinate.longitude), \(t.endCoordinate.latitude),
                                \(t.endCoordinate.longitude), \(t.distance), \(t.maximumSpeed))
                        ON CONFLICT (device, decided) DO NOTHING
                        """, logger: self.logger)
                }
                for (time, state) in advance.checkpoints {
                    let text = try StoredStops.encode(state)
                    try await c.query(
                        """
                        INSERT INTO stop_checkpoints (device, time, state) VALUES (\(device), \(time), \(text))
                        ON CONFLICT (device, time) DO UPDATE SET state = excluded.state
                        """, logger: self.logger)
                }
                let text = try StoredStops.encode(advance.detector)
                try await c.query(
                    """
                    UPDATE stop_detectors SET state = \(text), checkpointed = \(advance.checkpointed), dirty_from = NULL
                    WHERE device = \(device)
                    """, logger: self.logger)
                try await Self.rebuildStatistics(c, device: device, logger: self.logger)
                let found = dirty <= StoredStops.neverComputed ? [] : advance.events(device: device, since: dirty)
                var events: [DeviceEvent] = []
                if row.3 || !found.isEmpty {
                    events = try await self.storeEvents(c, device: device, saved: saved, stops: found)
                    // Every instance's delivery worker woken at the commit (one notification for all).
                    if !events.isEmpty { try await Self.notifyQueued(c, logger: self.logger) }
                }
                let marks =
                    dirty <= StoredStops.neverComputed
                    ? nil : changes.marks(device: device, time: advance.detector.lastGiven ?? dirty)
                return (computingAll ? [] : found, events, marks)
            }
        }
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
            for table in ["stop_detectors", "stop_checkpoints", "stops", "trips"] {
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
        var marked: Double?? = .none
        for try await d in try await client.query(
            "SELECT dirty_from FROM stop_detectors WHERE device = \(device)", logger: logger
        ).decode(Double?.self) { marked = .some(d) }
        // Never computed (no row: points stored before the table, or filled behind the store's
        // back), or marked by a batch whose instance has not run it yet.
        if marked == .none || marked! != nil {
            _ = try await retryingConflicts { try await self.advanceStoredStops(device: device, computingAll: true) }
        }
        return try await client.withConnection { c in
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
        var firstState: String?
        if let t = times.first {
            for try await s in try await c.query(
                "SELECT state FROM stop_checkpoints WHERE device = \(device) AND time = \(t)", logger: logger
            ).decode(String.self) { firstState = s }
        }
        let configuration = stopsConfiguration
        var query = StoredStops.Query(
            checkpointTimes: times,
            configuration: try firstState.map { try StoredStops.decode($0).configuration } ?? configuration)
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
            for try await (t, lat, lon, acc, speed) in rows.decode((Double, Double, Double, Double?, Double?).self) {
                n += 1
                after = t
                guard met == nil, reached.isEmpty else { continue }
                if let cp = query.add(time: t, latitude: lat, longitude: lon, accuracy: acc, speed: speed) {
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
                    let checkpoint = try StoredStops.decode(state)
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
                from: try StoredStops.decode(cp.1), checkpointed: cp.0, configuration: configuration)
            let rows = try await c.query(
                Self.points(device: device, after: cp.0, through: hi, limit: nil), logger: logger)
            for try await (t, lat, lon, acc, speed) in rows.decode((Double, Double, Double, Double?, Double?).self) {
                replay.add(time: t, latitude: lat, longitude: lon, accuracy: acc, speed: speed)
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
/// Lanes, not one run: a run takes each device's transaction in turn (about ten round trips each),
/// so with one lane a device noted at the start of a run waited for the whole run of every other
/// device before its own (100 devices a second: a second and more; an event's latency to its
/// webhook is mostly that wait, docs/performance.md). A device in one lane only, its instance never
/// waits on its own row.
actor StoredStopsCatchUp {
    /// Runs at once (each a device's transaction at a time). One: three lanes were measured to make
    /// two instances slower (their commits more than doubled, docs/performance.md) without a clear
    /// gain in latency; the lanes stay for the next measurement.
    static let lanes = 1

    private var pending: [Set<String>]
    private var workers: [Task<Void, Never>?]
    private var run: (@Sendable (Set<String>) async -> Void)?

    init(lanes: Int = StoredStopsCatchUp.lanes) {
        pending = Array(repeating: [], count: max(1, lanes))
        workers = Array(repeating: nil, count: max(1, lanes))
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

    /// Runs `devices`' detectors soon: at once in a lane that is idle, else after its run under way.
    func note(_ devices: Set<String>) {
        guard !devices.isEmpty, run != nil else { return }
        for device in devices { pending[Self.lane(of: device, among: pending.count)].insert(device) }
        for lane in pending.indices where workers[lane] == nil && !pending[lane].isEmpty {
            workers[lane] = Task { await self.drain(lane) }
        }
    }

    private func drain(_ lane: Int) async {
        while !pending[lane].isEmpty, let run {
            let devices = pending[lane]
            pending[lane] = []
            await run(devices)
        }
        workers[lane] = nil
    }

    /// Returns once every device noted so far has been run.
    func settled() async {
        while let worker = workers.lazy.compactMap({ $0 }).first { await worker.value }
    }

    /// Stops: the runs under way are cancelled and nothing more is run (the store closes).
    func cancel() {
        run = nil
        for lane in pending.indices {
            pending[lane] = []
            workers[lane]?.cancel()
        }
    }
}
