import Formats
import Geo
import LocationService
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization
import TrackStore

/// The endpoint's store on PostgreSQL with PostGIS: `keeptrack serve --db postgres://USER@HOST:PORT/DB`.
///
/// Schema (``migrations``, applied once, in order, under an advisory lock so that instances starting
/// together don't race): `positions` with the record's key as its primary key, a `geography(Point,4326)`
/// column under a GiST index, a `(device, time)` index and the attributes as JSONB; `devices`, each
/// device's summary.
///
/// A batch is one statement, so one transaction: its columns are bound as arrays and read back with
/// `unnest`, inserted (`ORDER BY key`, so that two transactions never wait on each other's keys in
/// opposite orders) with `ON CONFLICT (key) DO NOTHING RETURNING`, which tells new records from
/// duplicates, and the summary of the devices it added to is upserted (`GREATEST`/`LEAST`, added
/// counts) in the same statement. It returns once committed. Nothing is kept in the process: any
/// number of instances can share the database, and the same batch sent to two of them at once is
/// stored once, one of them counting it accepted and the other duplicates (the second waits on the
/// first's uncommitted keys, then finds them).
public final class PostgresTrackStore: TrackStore {
    public let url: PostgresURL
    /// This instance's `application_name` on its connections: ``applicationPrefix`` and a random id.
    public let name: String
    let client: PostgresClient
    let logger: Logger
    let runner: Task<Void, Never>
    let coalescer: CopyCoalescer
    /// Answers work whose connection ends under it (``withLiveConnection(_:)``).
    let connectionEnds = ConnectionEnds()
    /// What any instance stored, batch by batch in commit order (``followStored()``).
    public let storedRecords = RecordFeed()
    /// The stops and trips found in what this instance stored, batch by batch.
    public let stopEvents = StopEventFeed()
    /// The outlier marks its detectors changed, run by run after each commit.
    public let outlierMarks = OutlierMarkFeed()
    /// Runs the detectors of the devices batches stored, after their answers (see ``StoredStopsCatchUp``).
    let stopsCatchUp = StoredStopsCatchUp()
    /// The events this instance's catch-ups stored (``EventStore``).
    let eventFeed = DeviceEventFeed()
    /// The geofences as evaluated and the rules (``EventStore``).
    let storedEvents = StoredEvents()
    /// The detector's configuration for stops, trips and outliers (``StopStore/setMaximumAccuracy(_:)``).
    let stopsSettings = Mutex(VisitDetector.Configuration())
    /// The clock of the connect deadline, the `COPY` budget's recounts, the delivery queue's times
    /// and the sweeps for devices left marked.
    let clock: any EpochClock
    /// Runs, every ``sweepInterval``, the catch-up of the devices a batch marked and nobody caught up
    /// (an instance killed between a batch's commit and its catch-up; ``sweepMarked(olderThan:)``).
    let sweeper = Mutex<Task<Void, Never>?>(nil)
    static let sweepInterval: Duration = .seconds(10)
    /// The highest storage number when the store opened: the live stream publishes what was stored
    /// after it (``followStored(clock:)``), whenever its listener is in place.
    let openedStored: Int64

    public var location: String { url.description }

    /// Connects to the database `url` names, creates PostGIS when missing and allowed, and migrates
    /// the schema.
    ///
    /// - Parameters:
    ///   - maxConnections: the pool's size. The default is 10.
    ///   - connectTimeout: how long to wait for the database to answer at the start (the migrations that
    ///     follow have no deadline). The default is 30 s.
    ///   - clock: the clock of that deadline and of the `COPY` budget's recounts (the one the server
    ///     takes). The default is the wall clock.
    /// - Throws: ``TrackStoreError`` naming what is wrong (unreachable, PostGIS missing, a migration
    ///   failing).
    public init(
        url: PostgresURL, maxConnections: Int = 10, connectTimeout: Duration = .seconds(30),
        clock: any EpochClock = WallClock(), logger: Logger = Logger(label: "keeptrack.postgres")
    ) async throws {
        self.url = url
        self.logger = logger
        self.clock = clock
        // One connection first, so that a refused connection, a wrong password or a missing database
        // is said at once, in PostgreSQL's words (the pool would retry it quietly until the deadline).
        // The deadline is for reaching the database; the migrations then run on this connection
        // without one: on a large database one may rewrite a table for minutes, and another instance
        // migrating at the same time is waited for (an advisory lock), neither of which is "no answer".
        let first: PostgresConnection
        do {
            first = try await withDeadline(
                connectTimeout, "no answer from PostgreSQL at \(url) within \(connectTimeout)", clock: clock
            ) {
                // PostgresNIO's own connect timeout (10 s by default, on the wall clock) would race
                // this deadline and win it on a busy machine: it is set past the deadline, which
                // names the failure on the clock the store was given.
                var connection = try Self.connectionConfiguration(url)
                connection.options.connectTimeout = .init(connectTimeout + .seconds(30))
                return try await PostgresConnection.connect(configuration: connection, id: 0, logger: logger)
            }
        } catch {
            throw Self.storeError(error, .unreachable, doing: "cannot connect to \(url)")
        }
        do {
            try await Self.migrate(first, logger: logger)
            var highest: Int64 = 0
            for try await value in try await first.query(
                "SELECT coalesce(max(stored), 0)::int8 FROM positions", logger: logger
            ).decode(Int64.self) { highest = value }
            openedStored = highest
            try await first.close()
        } catch {
            try? await first.close()
            throw Self.storeError(error, .cannotOpen, doing: "opening \(url)")
        }
        let name = Self.applicationPrefix + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        self.name = name
        let client = PostgresClient(
            configuration: try Self.poolConfiguration(url, maxConnections: maxConnections, name: name),
            backgroundLogger: logger)
        self.client = client
        let ends = connectionEnds
        coalescer = CopyCoalescer(
            run: { buffer in try await Self.copy(buffer, client: client, ends: ends, logger: logger) },
            countInstances: { try await Self.instances(client: client, ends: ends, name: name, logger: logger) },
            clock: clock, logger: logger)
        // Started at once, up to its first suspension: `run()` has begun before the first lease, which
        // postgres-nio would otherwise warn about ("`PostgresClient.run()` hasn't been called yet",
        // printed by a short command such as `serve geofences add` on PostgreSQL).
        runner = Task.immediate { await client.run() }
        await stopsCatchUp.attach { [weak self] devices in await self?.catchUpStoredStops(devices: devices) }
        let task = Task { [weak self, clock] in
            var age: Duration?
            while !Task.isCancelled {
                await self?.sweepMarked(olderThan: age)
                age = Self.sweepInterval
                do { try await clock.sleep(for: Self.sweepInterval) } catch { return }
            }
        }
        sweeper.withLock { $0 = task }
    }

    /// Notes for the catch-up every device still marked (its events or its stops not run): at the
    /// start all of them, and every ``sweepInterval`` those whose marks in `stop_marks` are older
    /// than `age` (the database's clock): under load, a mark younger than that is the batch's own
    /// instance's to run, and another instance that took it would wait for that instance's
    /// transaction of up to ``devicesPerTransaction`` devices. A device an instance is catching up
    /// now is run again after it, finding nothing to do.
    func sweepMarked(olderThan age: Duration?) async {
        var devices: Set<String> = []
        let seconds = age.map { Double($0.components.seconds) } ?? 0
        do {
            for try await d in try await liveQuery(
                """
                SELECT device FROM stop_detectors WHERE events_dirty OR dirty_from > \(StoredStops.neverComputed / 10)
                UNION SELECT device FROM stop_marks WHERE marked <= now() - make_interval(secs => \(seconds))
                """,
                logger: logger
            ).decode(String.self) { devices.insert(d) }
        } catch {
            return
        }
        await stopsCatchUp.note(devices)
    }

    /// The pool's settings: at most `maxConnections`, none kept open idle, each carrying the
    /// instance's `name` (so that the instances can count each other), and no keep-alive.
    ///
    /// postgres-nio's keep-alive (`SELECT 1` on a connection idle for 30 s) is off: with it, the
    /// pool's `run()` could hold for ever after its cancellation, so the store's close never ended
    /// (a bare `PostgresClient` with a keep-alive every millisecond hung at 7 of 600 closes,
    /// 2026-11-30, and at none of 400 without one), most likely a keep-alive issued on a connection
    /// that had just closed, never answered (the statement lost in a closed channel,
    /// docs/endpoint.md). An idle connection here lives 60 s at most (postgres-nio's idle timeout),
    /// and one that ends meanwhile is seen closing (PostgreSQL stopping or killing its backend closes
    /// the socket) or answered `unreachable` at its next statement (``withLiveConnection(_:)``),
    /// which the uploader retries.
    static func poolConfiguration(_ url: PostgresURL, maxConnections: Int, name: String) throws
        -> PostgresClient.Configuration
    {
        var configuration: PostgresClient.Configuration
        if let socket = url.socketPath {
            configuration = .init(
                unixSocketPath: socket, username: url.user, password: url.password, database: url.database)
        } else {
            configuration = .init(
                host: url.host ?? "localhost", port: url.port, username: url.user,
                password: url.password, database: url.database, tls: try Self.tls(url))
        }
        configuration.options.maximumConnections = max(1, maxConnections)
        configuration.options.minimumConnections = 0
        configuration.options.additionalStartupParameters = [("application_name", name)]
        configuration.options.keepAliveBehavior = nil
        return configuration
    }

    /// The TLS settings `sslmode` stands for (`nil`: disable).
    static func tlsConfiguration(_ url: PostgresURL) -> TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch url.sslMode {
        case .disable: return nil
        case .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let root = url.rootCertificate { tls.trustRoots = .file(root) }
        return tls
    }

    static func tls(_ url: PostgresURL) throws -> PostgresClient.Configuration.TLS {
        guard let tls = tlsConfiguration(url) else { return .disable }
        return url.sslMode == .prefer ? .prefer(tls) : .require(tls)
    }

    /// The same settings for one connection.
    static func connectionConfiguration(_ url: PostgresURL) throws -> PostgresConnection.Configuration {
        if let socket = url.socketPath {
            return .init(unixSocketPath: socket, username: url.user, password: url.password, database: url.database)
        }
        var tls = PostgresConnection.Configuration.TLS.disable
        if let configuration = tlsConfiguration(url) {
            let context = try NIOSSLContext(configuration: configuration)
            tls = url.sslMode == .prefer ? .prefer(context) : .require(context)
        }
        return .init(
            host: url.host ?? "localhost", port: url.port, username: url.user, password: url.password,
            database: url.database, tls: tls)
    }

    public func close() async {
        // A catch-up under way is cancelled, not waited for (the database may be gone): its devices
        // stay marked, and the next instance's batch or query runs them.
        sweeper.withLock { $0?.cancel() }
        await stopsCatchUp.cancel()
        // Cancelling postgres-nio's pool closes its connections; it ends when the last has closed
        // and every task it started has ended. A keep-alive lost on a closed connection held it for
        // ever (off now: ``poolConfiguration(_:maxConnections:name:)``); in case anything else
        // does, the close stops waiting after `closeLimit`, and says so, instead of holding the
        // process's exit until it is killed. What the pool holds is left to the process's end.
        runner.cancel()
        guard await waitForEnd(of: runner, atMost: Self.closeLimit, clock: clock) else {
            logger.warning(
                "PostgreSQL connection pool did not end after the close: no longer waited for",
                metadata: [
                    "store.close.limit": "\(Self.closeLimit)",
                    "store.connections.open": "\(connectionEnds.connectionsWatched)",
                ])
            return
        }
    }

    /// How long ``close()`` waits for the connection pool to end: its connections that were still
    /// connecting end within postgres-nio's connect timeout (10 s).
    static let closeLimit: Duration = .seconds(30)

    /// Runs `work` on a connection of the pool, and is answered even when that connection ends under
    /// it, which postgres-nio may never answer (``ConnectionEnds``): `unreachable` then. What holds a
    /// connection goes through here.
    func withLiveConnection<T: Sendable>(
        _ work: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await Self.withLiveConnection(client: client, ends: connectionEnds, work)
    }

    /// Runs `query` on a connection of the pool and reads its rows whole, answered even when that
    /// connection ends under it (``withLiveConnection(_:)``): every statement not run on a connection
    /// already held goes through here.
    @discardableResult
    func liveQuery(_ query: PostgresQuery, logger: Logger? = nil) async throws -> LiveRows {
        try await Self.liveQuery(query, client: client, ends: connectionEnds, logger: logger ?? self.logger)
    }

    @discardableResult
    static func liveQuery(_ query: PostgresQuery, client: PostgresClient, ends: ConnectionEnds, logger: Logger)
        async throws -> LiveRows
    {
        try await withLiveConnection(client: client, ends: ends) { connection in
            var rows: [PostgresRow] = []
            for try await row in try await connection.query(query, logger: logger) { rows.append(row) }
            return LiveRows(rows: rows)
        }
    }

    static func withLiveConnection<T: Sendable>(
        client: PostgresClient, ends: ConnectionEnds, _ work: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await client.withConnection { connection in
            try await ends.run(on: connection) { try await work(connection) }
        }
    }

    // MARK: - Instances

    /// What every instance's `application_name` begins with.
    public static let applicationPrefix = "keeptrack "

    /// How long after its last statement an idle instance still counts as loading the database.
    static let activeWithin = 10.0

    /// How many instances load this database now, this one included: those whose connections are
    /// in a statement or were within ``activeWithin`` seconds (`pg_stat_activity`). An instance
    /// connected as another role is seen only by a role with `pg_read_all_stats` (PostgreSQL shows
    /// others no session state), and is otherwise not counted.
    public func instances() async throws -> Int {
        try await Self.instances(client: client, ends: connectionEnds, name: name, logger: logger)
    }

    static func instances(client: PostgresClient, ends: ConnectionEnds, name: String, logger: Logger) async throws
        -> Int
    {
        let others = try await liveQuery(
            """
            SELECT count(DISTINCT application_name)::int8 FROM pg_stat_activity
            WHERE datname = current_database() AND application_name LIKE \(applicationPrefix + "%")
              AND application_name <> \(name)
              AND (state <> 'idle' OR state_change > clock_timestamp() - make_interval(secs => \(activeWithin)))
            """, client: client, ends: ends, logger: logger)
        var n: Int64 = 0
        for try await count in others.decode(Int64.self) { n = count }
        return 1 + Int(n)
    }

    // MARK: - Writing

    public func insert(_ records: [TrailRecord], format: String, received: Double) async throws
        -> (accepted: Int, duplicates: Int)
    {
        guard !records.isEmpty else { return (0, 0) }
        // PostgreSQL's text can't hold NUL; readers refuse control characters in ids already.
        guard !records.contains(where: { $0.device.utf8.contains(0) || ($0.region?.utf8.contains(0) ?? false) }) else {
            throw TrackStoreError(.nulByte, "refusing to store an id with a NUL byte")
        }
        // Every device of the batch is caught up after it: its stops (when it has new locations) and
        // its events; the catch-up waits while batches are being stored (``StoredStopsCatchUp``).
        await stopsCatchUp.storingBegan()
        let accepted: Int
        do {
            accepted = try await store(records, format: format, received: received)
        } catch {
            await stopsCatchUp.storingEnded(noting: [])
            throw error
        }
        await stopsCatchUp.storingEnded(noting: accepted > 0 ? Set(records.lazy.map(\.device)) : [])
        return (accepted, records.count - accepted)
    }

    /// ``insert(_:format:received:)``'s statement: the records accepted.
    func store(_ records: [TrailRecord], format: String, received: Double) async throws -> Int {
        let keys = records.map { Self.key($0, format: format) }
        // Visits and trips (rare) go through the statement: the COPY's rows have no span.
        if !records.contains(where: { $0.span != nil }),
            try await copyBatch(records, keys: keys, format: format, received: received)
        {
            return records.count
        }
        var binds = PostgresBindings(capacity: 18)
        binds.append(PostgresArray.texts(keys))
        binds.append(PostgresArray.texts(records.map(\.device)))
        binds.append(PostgresArray.integers(records.map { format == "json" && $0.sequence > 0 ? $0.sequence : nil }))
        binds.append(PostgresArray.texts(records.map(\.kind.rawValue)))
        binds.append(PostgresArray.texts(records.map(\.region)))
        binds.append(PostgresArray.doubles(records.map(\.time)))
        binds.append(PostgresArray.doubles(records.map(\.latitude)))
        binds.append(PostgresArray.doubles(records.map(\.longitude)))
        binds.append(PostgresArray.doubles(records.map(\.altitude)))
        binds.append(PostgresArray.doubles(records.map(\.horizontalAccuracy)))
        binds.append(PostgresArray.doubles(records.map(\.verticalAccuracy)))
        binds.append(PostgresArray.doubles(records.map(\.speed)))
        binds.append(PostgresArray.doubles(records.map(\.course)))
        binds.append(PostgresArray.bools(records.map(\.valid)))
        binds.append(PostgresArray.texts(records.map { TrailRecord.attributesJSON($0.attributes) }))
        binds.append(format)
        binds.append(received)
        binds.append(PostgresArray.texts(records.map { TrailRecord.spanJSON($0) }))
        // Prepared once per connection (postgres-nio keeps it by name): no parse or plan per batch.
        let statement = InsertBatch(bindings: binds)
        return try await retryingConflicts {
            try await self.withLiveConnection { connection in
                var n = 0
                for try await count in try await connection.execute(statement, logger: self.logger) { n = Int(count) }
                await Self.notifyStored(connection, logger: self.logger)
                return n
            }
        }
    }

    /// A batch's insert, as a statement prepared once per connection.
    struct InsertBatch: PostgresPreparedStatement {
        typealias Row = Int64
        static let name = "keeptrack_insert_batch_v3"
        static var sql: String { PostgresTrackStore.insertSQL }
        let bindings: PostgresBindings
        func makeBindings() -> PostgresBindings { bindings }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
    }

    /// How a batch's summary of a device joins the one stored: counts added, first and last widened,
    /// the latest position replaced by one as new or newer.
    static let devicesConflictSQL = """
        ON CONFLICT (id) DO UPDATE SET points = d.points + excluded.points, first = LEAST(d.first, excluded.first),
            last = GREATEST(d.last, excluded.last), last_received = GREATEST(d.last_received, excluded.last_received),
            latest_time = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_time ELSE d.latest_time END,
            latest_lat = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_lat ELSE d.latest_lat END,
            latest_lon = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_lon ELSE d.latest_lon END,
            latest_alt = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_alt ELSE d.latest_alt END,
            latest_h_acc = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_h_acc ELSE d.latest_h_acc END,
            latest_speed = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_speed ELSE d.latest_speed END,
            latest_course = CASE WHEN excluded.latest_time >= d.latest_time OR d.latest_time IS NULL THEN excluded.latest_course ELSE d.latest_course END
        """

    static let insertSQL = """
        WITH input AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::text[], $6::float8[], $7::float8[],
                                 $8::float8[], $9::float8[], $10::float8[], $11::float8[], $12::float8[], $13::float8[],
                                 $14::bool[], $15::text[], $18::text[])
                AS t(key, device, seq, kind, region, time, lat, lon, alt, h_acc, v_acc, speed, course, valid, attributes,
                     span)
        ), new AS (
            INSERT INTO positions (key, device, seq, kind, region, time, position, alt, h_acc, v_acc, speed, course,
                                   format, received, valid, attributes, span)
            SELECT key, device, seq, kind, region, to_timestamp(time),
                   ST_SetSRID(ST_MakePoint(lon, lat), 4326)::geography, alt, h_acc, v_acc, speed, course,
                   $16, to_timestamp($17), valid, attributes::jsonb, span
            FROM input ORDER BY key
            ON CONFLICT (key) DO NOTHING
            RETURNING 1
        )
        SELECT count(*) FROM new
        """

    /// Runs `work` again when PostgreSQL chose it as a deadlock's victim or a serialization failure
    /// (a few times; both mean nothing was committed), however postgres-nio reports it
    /// (``isConflict(_:)``).
    func retryingConflicts<T: Sendable>(_ work: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await work()
            } catch let error where attempt < 5 && Self.isConflict(error) {
                attempt += 1
            }
        }
    }

    /// Whether `error` is a deadlock's victim or a serialization failure: a statement's error as
    /// is, or inside the error of `withTransaction`, which wraps what its closure or its commit
    /// threw (retention's and the statistics' transactions).
    static func isConflict(_ error: any Error) -> Bool {
        switch error {
        case let error as PSQLError:
            [.deadlockDetected, .serializationFailure].contains(error.condition)
        case let error as PostgresTransactionError:
            [error.closureError, error.commitError].contains { $0.map(isConflict) ?? false }
        default:
            false
        }
    }

    // MARK: - Reading

    public func devices() async throws -> [DeviceSummary] {
        try await summaries(PostgresQuery(unsafeSQL: Self.deviceSQL + " ORDER BY id"))
    }

    public func device(_ id: String) async throws -> DeviceSummary? {
        guard !id.utf8.contains(0) else { return nil }
        var binds = PostgresBindings()
        binds.append(id)
        return try await summaries(PostgresQuery(unsafeSQL: Self.deviceSQL + " WHERE id = $1", binds: binds)).first
    }

    static let deviceSQL = """
        SELECT id, points, extract(epoch FROM first)::float8, extract(epoch FROM last)::float8,
               extract(epoch FROM last_received)::float8 FROM devices
        """

    func summaries(_ query: PostgresQuery) async throws -> [DeviceSummary] {
        var out: [DeviceSummary] = []
        let rows = try await liveQuery(query, logger: logger)
        for try await (id, points, first, last, received) in rows.decode((String, Int64, Double, Double, Double).self) {
            out.append(DeviceSummary(id: id, points: Int(points), first: first, last: last, lastReceived: received))
        }
        return out
    }

    public func trail(
        device: String, from: Double, to: Double, after cursor: TrailCursor?, limit: Int,
        includeInvalid: Bool, includeOutliers: Bool
    ) async throws -> (records: [TrailRecord], next: TrailCursor?) {
        precondition(limit > 0, "a page holds at least one record")
        guard !device.utf8.contains(0) else { return ([], nil) }
        var binds = PostgresBindings()
        binds.append(device)
        var bound = 1
        var sql = """
            SELECT seq, kind, region, extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry),
                   alt, h_acc, v_acc, speed, course, valid, attributes::text, key, device, span, outlier
            FROM positions WHERE device = $1
            """
        func parameter(_ value: some PostgresNonThrowingEncodable) -> String {
            binds.append(value)
            bound += 1
            return "$\(bound)"
        }
        if from.isFinite { sql += " AND time >= to_timestamp(\(parameter(from)))" }
        if to.isFinite { sql += " AND time <= to_timestamp(\(parameter(to)))" }
        if !includeInvalid { sql += " AND valid" }
        if !includeOutliers { sql += " AND outlier IS NULL" }
        if let cursor {
            // After (time, seq, key) in the order of ORDER BY (a NULL seq first, as SQLite sorts).
            let t = "to_timestamp(\(parameter(cursor.time)))"
            let k = parameter(cursor.key)
            if let seq = cursor.sequence {
                let s = parameter(seq)
                sql +=
                    " AND time >= \(t) AND (time > \(t) OR (time = \(t) AND (seq > \(s) OR (seq = \(s) AND key > \(k)))))"
            } else {
                sql += " AND time >= \(t) AND (time > \(t) OR (time = \(t) AND (seq IS NOT NULL OR key > \(k))))"
            }
        }
        sql += " ORDER BY time, seq NULLS FIRST, key LIMIT \(parameter(Int64(limit + 1)))"
        return try await page(PostgresQuery(unsafeSQL: sql, binds: binds), limit: limit, cursorSequence: true)
    }

    /// Runs a query for `limit + 1` rows of (seq, kind, region, time, lat, lon, alt, h_acc, v_acc,
    /// speed, course, valid, attributes, key, device, span) and returns the first `limit` as records, and
    /// where the next page starts (the last record's time, key and, with `cursorSequence`, sequence)
    /// when there are more: the page reader of trails and of fleet positions.
    func page(_ query: PostgresQuery, limit: Int, cursorSequence: Bool) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        var records: [TrailRecord] = []
        var last: TrailCursor?
        var more = false
        for try await row in try await liveQuery(query, logger: logger) {
            if records.count == limit {
                more = true
                continue
            }
            var cells = RowCells(row)
            var (r, key, seq) = try Self.record(&cells)
            // The trail's query adds the outlier mark as a 17th column.
            if row.count > 16 { r.outlier = try cells.next(String?.self) }
            records.append(r)
            last = TrailCursor(time: r.time, sequence: cursorSequence ? seq : nil, key: key)
        }
        return (records, more ? last : nil)
    }

    /// The record of the next 16 of `cells`, a trail's columns (`seq, kind, region, time, lat, lon,
    /// alt, h_acc, v_acc, speed, course, valid, attributes, key, device, span`), its key and its
    /// sequence number as stored (`nil` for none); the row's other columns are the caller's to read.
    static func record(_ cells: inout RowCells) throws -> (record: TrailRecord, key: String, sequence: Int64?) {
        let seq = try cells.next(Int64?.self)
        let kind = try cells.next(String.self)
        let region = try cells.next(String?.self)
        let time = try cells.next(Double.self)
        let lat = try cells.next(Double.self)
        let lon = try cells.next(Double.self)
        let alt = try cells.next(Double?.self)
        let hAcc = try cells.next(Double?.self)
        let vAcc = try cells.next(Double?.self)
        let speed = try cells.next(Double?.self)
        let course = try cells.next(Double?.self)
        let valid = try cells.next(Bool.self)
        let attributes = try cells.next(String?.self)
        let key = try cells.next(String.self)
        let device = try cells.next(String.self)
        let span = try cells.next(String?.self)
        var r = TrailRecord(
            device: device, sequence: seq ?? 0, kind: TrailRecord.Kind(rawValue: kind) ?? .location,
            region: region, time: time, latitude: lat, longitude: lon, altitude: alt,
            horizontalAccuracy: hAcc, verticalAccuracy: vAcc, speed: speed, course: course)
        r.valid = valid
        r.attributes = TrailRecord.attributes(fromJSON: attributes)
        if r.kind.isVisitOrTrip { r.span = TrailRecord.span(fromJSON: span) }
        return (r, key, seq)
    }

    public func count() async throws -> Int {
        var n: Int64 = 0
        for try await c in try await liveQuery("SELECT COALESCE(sum(points), 0)::int8 FROM devices", logger: logger)
            .decode(Int64.self)
        { n = c }
        return Int(n)
    }

    /// `error` as a store's error of `code`: PostgreSQL's own message as the reason when it sent one
    /// (postgres-nio's description hides it), else what was being done.
    static func storeError(_ error: any Error, _ code: TrackStoreError.Code, doing what: String) -> TrackStoreError {
        if let e = error as? TrackStoreError { return e }
        if let e = error as? PSQLError {
            if let message = e.serverInfo?[.message] {
                let hint = e.serverInfo?[.hint].map { " (\($0))" } ?? ""
                return TrackStoreError(code, what, reason: "\(message)\(hint)", underlying: e)
            }
            return TrackStoreError(
                code, what, reason: "\(e.code)" + (e.underlying.map { ": \($0)" } ?? ""), underlying: e)
        }
        return TrackStoreError(code, what, underlying: error)
    }
}

extension PSQLError {
    /// The condition PostgreSQL reported (its SQLSTATE as postgres-nio names it: `.uniqueViolation`),
    /// or nil when the server sent none.
    var condition: PostgresError.Code? { serverInfo?[.sqlState].map(PostgresError.Code.init(raw:)) }
}

/// Waits for `task` to end, at most `limit` on `clock`: true when it ended, false when the limit
/// came first. Unlike a deadline over `await task.value` in a task group, it returns at the limit
/// even when `task` ignores cancellation (which `Task.value` does): `task` is then left running.
func waitForEnd(of task: Task<Void, Never>, atMost limit: Duration, clock: any EpochClock) async -> Bool {
    let first = OneAnswer<Bool>()
    let watcher = Task {
        await task.value
        first.give(.success(true))
    }
    let timer = Task {
        do { try await clock.sleep(until: clock.now.advanced(by: limit), tolerance: nil) } catch { return }
        first.give(.success(false))
    }
    let ended = (try? await withCheckedThrowingContinuation { first.wait($0) }) ?? false
    timer.cancel()
    _ = watcher  // ends with `task`
    return ended
}

/// Runs `work`, failing with `message` (``TrackStoreError/Code/unreachable``) after `limit` on `clock`.
func withDeadline<T: Sendable>(
    _ limit: Duration, _ message: String, clock: any EpochClock,
    _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await clock.sleep(until: clock.now.advanced(by: limit), tolerance: nil)
            throw TrackStoreError(.unreachable, message)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
