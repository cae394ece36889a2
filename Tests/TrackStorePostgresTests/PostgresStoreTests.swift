import EndpointEvents
import Formats
import Geo
import Foundation
import KeepTrackTesting
import LocationService
import Logging
import NIOCore
import NIOPosix
import OwnTracksCrypto
import PostgresNIO
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
@testable import TrackStorePostgres
import Upload

/// The PostgreSQL store apart from what every endpoint test checks on both stores: its URLs, its
/// schema, and several `keeptrack serve` instances sharing one database.
@Suite("PostgreSQL store")
struct PostgresStoreTests {
    @Test(
        arguments: [
            ("postgres://kt@127.0.0.1:5433/track", "127.0.0.1", nil, 5433, "track", PostgresURL.SSLMode.prefer),
            ("postgresql://fleet:s%40cret@db.example:5432/t?sslmode=require", "db.example", nil, 5432, "t", .require),
            ("postgres://kt@/track?host=/tmp/pg", nil, "/tmp/pg", 5432, "track", .prefer),
            ("postgres://kt@%2Ftmp%2Fpg:6000/track", nil, "/tmp/pg", 6000, "track", .prefer),
            ("postgres://kt@[::1]:7000/track?sslmode=disable", "::1", nil, 7000, "track", .disable),
        ] as [(String, String?, String?, Int, String, PostgresURL.SSLMode)])
    func parsesTheURLForms(
        text: String, host: String?, socket: String?, port: Int, database: String,
        mode: PostgresURL.SSLMode
    ) throws {
        let url = try PostgresURL(parsing: text)
        #expect(url.host == host)
        #expect(url.socketDirectory == socket)
        #expect(url.port == port)
        #expect(url.database == database)
        #expect(url.sslMode == mode)
        #expect(!url.description.contains("s@cret") && !url.description.contains("s%40cret"))
    }

    @Test(arguments: [
        ("postgres://127.0.0.1/track", "no user name"), ("postgres://kt@127.0.0.1", "no database name"),
        ("postgres://kt@127.0.0.1:99999/t", "the port is not 1-65535"),
        ("postgres://kt@h/t?sslmode=maybe", "sslmode 'maybe'"),
        ("postgres://kt@/t", "no host"), ("postgres://kt@h/t?colour=red", "unknown parameter 'colour'"),
    ])
    func refusesWhatIsNotAURLItCanUse(text: String, message: String) {
        #expect(throws: TrackStoreError.self) { try PostgresURL(parsing: text) }
        do { _ = try PostgresURL(parsing: text) } catch { #expect(error.message.contains(message), "\(error)") }
    }

    @Test func thePasswordComesFromPGPASSWORDWhenTheURLHasNone() throws {
        #expect(try PostgresURL(parsing: "postgres://kt@h/t", environment: ["PGPASSWORD": "pw"]).password == "pw")
        #expect(
            try PostgresURL(parsing: "postgres://kt:mine@h/t", environment: ["PGPASSWORD": "pw"]).password == "mine")
    }

    /// The schema as a DBA would look at it, over the Unix-socket URL form; opening it again (a second
    /// instance, a restart) applies nothing twice.
    @Test func migratesOnceWithPostGISIndexesAndTheKeyAsAConstraint() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let first = try await openTrackStore(cluster.socketURL(name))
        let second = try await openTrackStore(cluster.url(name))
        #expect(first.location.contains("host=%2Ftmp%2Fkeeptrack-pg-"))
        _ = try await first.insert(walk(3, device: "van"), format: "osmand", received: 1)
        #expect(try await second.count() == 3)
        await first.close()
        await second.close()
        let (migrations, indexes, columns) = try await offThePool {
            (
                try cluster.psql(
                    "SELECT identifier FROM keeptrack_migrations ORDER BY substring(identifier FROM 'v([0-9]+)')::int",
                    database: name),
                try cluster.psql(
                    "SELECT indexdef FROM pg_indexes WHERE tablename = 'positions' ORDER BY indexname", database: name),
                try cluster.psql(
                    """
                    SELECT column_name || ' ' || udt_name FROM information_schema.columns
                    WHERE table_name = 'positions' AND column_name IN ('position', 'attributes', 'time') ORDER BY column_name
                    """, database: name)
            )
        }
        #expect(
            migrations
                == "v1-positions\nv2-fleet\nv3-devices-trigger\nv4-device-secrets\nv5-visits-and-trips\nv6-stream-notify\nv7-stored-stops\nv8-events\nv9-outliers\nv10-statistics\nv11-shares\nv12-place-names\nv13-homeassistant-cursors\nv14-events-presence\nv15-device-overspeed\nv16-notify-after-commit\nv17-stop-marks\nv18-stored-ranges\nv19-latest-not-null-island\n"
        )
        #expect(indexes.contains("UNIQUE INDEX positions_key ON public.positions USING btree (key)"))
        #expect(indexes.contains("positions_device_time ON public.positions USING btree (device, \"time\")"))
        #expect(indexes.contains("positions_position ON public.positions USING gist (\"position\")"))
        #expect(columns == "attributes jsonb\nposition geography\ntime timestamptz\n")
        try await offThePool { try cluster.dropDatabase(name) }
    }

    @Test func refusesADatabaseWithoutPostGISItMayNotCreateSayingWhatToRun() async throws {
        let cluster = try await Postgres.shared()
        let name = "kt_plain_\(getpid())"
        _ = try await offThePool {
            // psql -q prints nothing for these statements.
            _ = try cluster.psql("CREATE DATABASE \(name) TEMPLATE template0", database: "postgres")
            _ = try cluster.psql("CREATE ROLE clerk LOGIN", database: "postgres")
        }
        await #expect {
            _ = try await openTrackStore("postgres://clerk@127.0.0.1:\(cluster.port)/\(name)?sslmode=disable")
        } throws: { error in
            "\(error)".contains("a superuser must run CREATE EXTENSION postgis")
        }
        _ = try await offThePool {
            try cluster.dropDatabase(name)
            _ = try cluster.psql("DROP ROLE clerk", database: "postgres")  // prints nothing (-q)
        }
    }

    /// A batch goes in by `COPY` when its records are all new, and by the statement otherwise (here: a
    /// key twice in one batch makes the `COPY` fail, and the statement stores it): both store the same
    /// values to the bit, times rounded to the microsecond as `to_timestamp` rounds them (halves, before
    /// 2000, negative zero), texts with the characters `COPY` escapes, NULLs, and the devices' summaries.
    @Test func copyAndTheStatementStoreTheSameRows() async throws {
        let cluster = try await Postgres.shared()
        let (copied, stated) = try await offThePool { (try cluster.createDatabase(), try cluster.createDatabase()) }
        let times: [Double] = [
            1_715_679_000.0000005, 1_715_679_000.0000015, 946_684_799.9999995, 946_684_800.0000025,
            0.0000005, 1_715_679_000.123456789, 4_102_444_799.9999996, 1_234_567_890.5,
        ]
        var records: [TrailRecord] = times.enumerated().map { i, t in
            var r = TrailRecord(
                device: i % 2 == 0 ? "van 1" : "ünï\\van", sequence: Int64(i + 1), time: t,
                latitude: [-0.0, 89.9999999, -45.123456789012345][i % 3],
                longitude: [-180, 179.99999999, 0.1 + 0.2][i % 3])
            r.altitude = i == 3 ? nil : 1e-7 * Double(i)
            r.horizontalAccuracy = i == 4 ? nil : 5
            r.speed = 1.0 / 3
            r.valid = i != 5
            if i == 2 { r.kind = .enter; r.region = "depot\tA\\B\nC" }
            if i == 6 { r.attributes = ["note": "tab\there\\ \"quoted\"\nnewline\r", "batt": "87"] }
            return r
        }
        records.append(contentsOf: numbered(walk(3, from: 1_715_680_000, device: "van 1"), from: 100))
        let a = try await openTrackStore(cluster.url(copied))
        let b = try await openTrackStore(cluster.url(stated))
        #expect(try await a.insert(records, format: "json", received: 1_715_690_000.0000005) == (records.count, 0))
        #expect(
            try await b.insert(records + [records[0]], format: "json", received: 1_715_690_000.0000005)
                == (records.count, 1))
        // Again: all duplicates, on both paths.
        #expect(try await a.insert(records, format: "json", received: 1) == (0, records.count))
        await a.close()
        await b.close()
        let dump = """
            SELECT to_json(key), to_json(device), seq, kind, to_json(region), (extract(epoch FROM time) * 1000000)::int8, ST_AsEWKB(position::geometry),
                   float8send(ST_Y(position::geometry)), float8send(ST_X(position::geometry)), float8send(alt), h_acc,
                   v_acc, speed, course, format, (extract(epoch FROM received) * 1000000)::int8, valid, attributes
            FROM positions ORDER BY key
            """
        let summaries = """
            SELECT to_json(id), points, first, last, last_received, latest_time, float8send(latest_lat), float8send(latest_lon),
                   latest_alt, latest_h_acc, latest_speed, latest_course FROM devices ORDER BY id
            """
        let (x, y, rounding) = try await offThePool {
            (
                try cluster.psql(dump, database: copied) + cluster.psql(summaries, database: copied),
                try cluster.psql(dump, database: stated) + cluster.psql(summaries, database: stated),
                try cluster.psql(
                    "SELECT "
                        + times.map { "to_timestamp(\($0)) = '\(CopyRows.timestamp($0)!)'::timestamptz" }
                        .joined(separator: ", "), database: copied)
            )
        }
        #expect(x == y)
        #expect(x.split(separator: "\n").count == records.count + 2)
        #expect(x.contains(#"depot\tA\\B\nC"#))
        // The text form's own rounding against PostgreSQL's, value by value.
        #expect(rounding == Array(repeating: "t", count: times.count).joined(separator: "|") + "\n")
        try await offThePool {
            try cluster.dropDatabase(copied)
            try cluster.dropDatabase(stated)
        }
    }

    /// `keeptrack export --db postgres://...`: the same file as from SQLite for the same records, and
    /// an unknown device named with what the store holds.
    @Test func exportsATrailFromPostgreSQLAsFromSQLite() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let records = numbered(walk(30, device: "van"))
        for database in [cluster.url(name), dir + "/endpoint.sqlite"] {
            let store = try await openTrackStore(database)
            _ = try await store.insert(records, format: "json", received: 1)
            await store.close()
        }
        for format in ["gpx", "geojson", "svg"] {
            let pg = try await TrackDatabase(cluster.url(name)).exportTrail(
                device: nil, from: -.infinity,
                to: .infinity, format: format)
            let lite = try await TrackDatabase(dir + "/endpoint.sqlite").exportTrail(
                device: nil, from: -.infinity,
                to: .infinity, format: format)
            #expect(pg.bytes == lite.bytes, "\(format)")
            #expect(pg.points == 30)
        }
        await #expect {
            _ = try await TrackDatabase(cluster.url(name)).exportTrail(
                device: "bike", from: 0, to: 1,
                format: "gpx")
        } throws: {
            "\($0)".contains("no device 'bike' in postgres://kt@127.0.0.1:") && "\($0)".contains("it has: van")
        }
        try await offThePool { try cluster.dropDatabase(name) }
    }

    /// A database that can't be reached or doesn't exist is said at once, in PostgreSQL's words, with
    /// the URL's password left out.
    @Test func saysAtOnceWhyItCannotConnect() async throws {
        let cluster = try await Postgres.shared()
        await #expect {
            _ = try await openTrackStore("postgres://kt:hunter2@127.0.0.1:\(cluster.port)/kt_missing?sslmode=disable")
        } throws: { "\($0)".contains(#"database "kt_missing" does not exist"#) && !"\($0)".contains("hunter2") }
        let closed = try ReservedPort()
        await #expect { _ = try await openTrackStore("postgres://kt@127.0.0.1:\(closed)/x?sslmode=disable") } throws: {
            "\($0)".contains("cannot connect to postgres://kt@127.0.0.1:\(closed)/x") && "\($0)".contains("refused")
        }
    }

    /// The connect timeout is for reaching the database: a migration that waits (here for another
    /// instance's migration lock, as a long one on a large database would run) is not cut at it.
    @Test func aMigrationThatTakesLongerThanTheConnectTimeoutIsWaitedFor() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let logger = Logger(label: "test")
        let holder = try await PostgresConnection.connect(
            configuration: .init(
                host: "127.0.0.1", port: cluster.port, username: cluster.user, password: nil, database: name,
                tls: .disable),
            id: 1, logger: logger)
        // The key the migrations lock (PostgresTrackStore.migrate).
        try await holder.query("SELECT pg_advisory_lock(7152015)", logger: logger)
        let clock = ManualClock()
        let url = try PostgresURL(parsing: cluster.url(name))
        let opening = Task { try await PostgresTrackStore(url: url, connectTimeout: .seconds(30), clock: clock) }
        // Connected, and waiting for the lock: then the deadline passes. (The holder is closed
        // whatever happens: an unclosed connection stops the whole test process.)
        var notWaiting: (any Error)?
        do {
            try await withTimeout(120, "the store's migrations to wait for the lock") {
                var waiting = 0
                while waiting == 0 {
                    for try await n in try await holder.query(
                        "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                        logger: logger
                    ).decode(Int.self) { waiting = n }
                }
            }
            clock.advance(by: .seconds(3600))
        } catch {
            notWaiting = error
        }
        try await holder.query("SELECT pg_advisory_unlock(7152015)", logger: logger)
        let opened = await opening.result
        try await holder.close()
        if let notWaiting { throw notWaiting }
        let store = try opened.get()
        #expect(try await store.count() == 0)
        await store.close()
        try await offThePool { try cluster.dropDatabase(name) }
    }

    /// A server that accepts the connection and never answers is named at the deadline.
    @Test func aServerThatNeverAnswersIsNamedAtTheDeadline() async throws {
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in channel.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        let clock = ManualClock()
        let url = try PostgresURL(parsing: "postgres://kt@127.0.0.1:\(port)/x?sslmode=disable")
        let opening = Task { try await PostgresTrackStore(url: url, connectTimeout: .seconds(30), clock: clock) }
        // The deadline's sleeper, then its passing.
        try await withTimeout(120, "the store to wait for its connect deadline") { await clock.sleepers(atLeast: 1) }
        clock.advance(by: .seconds(31))
        await #expect {
            _ = try await withTimeout(120, "the store's open to fail") { try await opening.value }
        } throws: {
            "\($0)".contains("no answer from PostgreSQL at postgres://kt@127.0.0.1:\(port)/x")
        }
        try await silent.close()
    }

    /// Two `keeptrack serve` instances on one database, the same batches sent to both at once: every
    /// record stored once, and between the two answers each record acknowledged as new exactly once.
    @Test func twoInstancesOnOneDatabaseStoreTheSameBatchOnce() async throws {
        let a = try await Endpoint.start(store: .postgres)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        let rawA = Raw(endpoint: a), rawB = Raw(endpoint: b)
        do {
            try await sendTheSameBatchesToBoth(a, b, rawA, rawB)
        } catch {
            // Reported as the test's failure; the clients closed first (an unclosed one crashes the run).
            Issue.record(error)
        }
        await rawA.close()
        await rawB.close()
        await b.stop()
        await a.stop()
    }

    func sendTheSameBatchesToBoth(_ a: Endpoint, _ b: Endpoint, _ rawA: Raw, _ rawB: Raw) async throws {
        let batches = (0..<20).map { n in
            let records = (1...50).map { i in
                #"{"seq":\#(n * 50 + i),"kind":"location","time":"2024-05-14T09:\#(10 + n):\#(String(format: "%02d", i))Z","lat":48.1,"lon":11.5}"#
            }
            return #"{"device":"van-\#(n % 3)","records":[\#(records.joined(separator: ","))]}"#
        }
        let answers = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for body in batches {
                group.addTask { try await rawA.send(.POST, "/v1/locations", body: body) }
                group.addTask { try await rawB.send(.POST, "/v1/locations", body: body) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.0 == 200 }, "\(answers.filter { $0.0 != 200 }.prefix(2))")
        var accepted = 0, duplicates = 0
        for (_, body) in answers {
            let reply = try #require(JSONBatch.Reply.decode(Array(body.utf8)))
            accepted += reply.accepted
            duplicates +=
                body.components(separatedBy: "\"duplicates\":").last.flatMap { Int($0.prefix { $0.isNumber }) } ?? -1
        }
        #expect(accepted == 1000)
        #expect(duplicates == 1000)
        #expect(try await a.server.store.count() == 1000)
        #expect(try await b.server.store.devices().map(\.points) == [350, 350, 300])
        #expect(try await b.server.store.trail(device: "van-1").count == 350)
    }

    /// Instances count each other through the database: two stores open on one database, each just
    /// used, count two; the other database's store is not counted; once one closes, the other counts
    /// itself alone (its backends go when it closes, a moment later: asked again until then).
    @Test func instancesOnOneDatabaseCountEachOther() async throws {
        let cluster = try await Postgres.shared()
        let (name, other) = try await offThePool { (try cluster.createDatabase(), try cluster.createDatabase()) }
        let a = try #require(try await openTrackStore(cluster.url(name)) as? PostgresTrackStore)
        let b = try #require(try await openTrackStore(cluster.url(name)) as? PostgresTrackStore)
        let elsewhere = try await openTrackStore(cluster.url(other))
        #expect(a.name.hasPrefix(PostgresTrackStore.applicationPrefix) && a.name != b.name)
        _ = try await b.insert(walk(2, device: "van"), format: "osmand", received: 1)
        _ = try await elsewhere.insert(walk(2, device: "van"), format: "osmand", received: 1)
        #expect(try await a.instances() == 2)
        #expect(try await b.instances() == 2)
        await b.close()
        var alone = try await a.instances()
        for _ in 0..<10_000 where alone != 1 { alone = try await a.instances() }
        #expect(alone == 1)
        await a.close()
        await elsewhere.close()
    }

    /// Two instances merging the same two batches into one `COPY` each, in the other order, at once:
    /// the rows go in key order in both, so the second waits on the first, then finds the keys stored
    /// (23505) rather than each holding keys the other needs (a deadlock, 40P01). A transaction held
    /// open on the last key lines them up: the first `COPY` stops there, the second behind it.
    @Test(.timeLimit(.minutes(5))) func mergedCopiesOfTheSameBatchesInOtherOrdersDoNotDeadlock() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let store = try await openTrackStore(cluster.url(name))
        func batch(_ device: String) -> CopyRows {
            let records = numbered(walk(3, device: device))
            return CopyRows(
                records, keys: records.map { PostgresTrackStore.key($0, format: "json") }, format: "json",
                received: 1_715_679_100)!
        }
        let first = batch("van-a"), second = batch("van-b")
        let last = ByteBuffer(bytes: second.bytes[second.ends[1]...])
        let configuration = try PostgresTrackStore.connectionConfiguration(PostgresURL(parsing: cluster.url(name)))
        let logger = Logger(label: "test")
        var connections: [PostgresConnection] = []
        for id in 0..<3 {
            connections.append(
                try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger))
        }
        let (holder, one, two) = (connections[0], connections[1], connections[2])
        func copy(_ buffer: ByteBuffer, on connection: PostgresConnection) async throws {
            try await connection.copyFrom(table: "positions", columns: CopyRows.columns, logger: logger) {
                try await $0.write(buffer)
            }
        }
        func waitingOnLocks(_ n: Int) async throws {
            for _ in 0..<100_000 {
                let rows = try await holder.query(
                    """
                    SELECT count(*)::int8 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                    """, logger: logger)
                for try await count in rows.decode(Int64.self) where count == n { return }
                try Task.checkCancellation()
            }
            Issue.record("never saw \(n) COPYs waiting")
        }
        do {
            try await holder.query("BEGIN", logger: logger)
            try await copy(last, on: holder)
            let byOne = Task { try await copy(CopyRows.merged([second, first]), on: one) }
            try await waitingOnLocks(1)
            let byTwo = Task { try await copy(CopyRows.merged([first, second]), on: two) }
            try await waitingOnLocks(2)
            try await holder.query("ROLLBACK", logger: logger)
            await #expect(throws: Never.self) { try await byOne.value }
            let state: String?
            do {
                try await byTwo.value
                state = nil
            } catch {
                state = (error as? PSQLError)?.serverInfo?[.sqlState]
            }
            #expect(state == "23505", "the second COPY: unique violation, not a deadlock (40P01) or success")
            #expect(try await store.count() == 6)
        } catch {
            Issue.record(error)
        }
        for connection in connections { try? await connection.close() }
        await store.close()
    }

    /// A conflict is run again however postgres-nio reports it: a statement's error as is, or inside
    /// the error of its `withTransaction` (retention's and the statistics' transactions, whose
    /// deadlocks and serialization failures were never run again). The errors are a real server's:
    /// `RAISE` with each SQLSTATE. Anything else is thrown at once.
    @Test func aConflictIsRunAgainAlsoInsideATransactionsError() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let store = try #require(try await openTrackStore(cluster.url(name)) as? PostgresTrackStore)
        let logger = Logger(label: "test")
        func raise(_ state: String, inTransaction: Bool) async throws {
            let sql = PostgresQuery(
                unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '\(state)'; END $$")
            try await store.client.withConnection { c -> Void in
                if inTransaction {
                    try await c.withTransaction(logger: logger) { t -> Void in
                        _ = try await t.query(sql, logger: logger)
                    }
                } else {
                    _ = try await c.query(sql, logger: logger)
                }
            }
        }
        do {
            for (state, inTransaction) in [("40P01", false), ("40P01", true), ("40001", true)] {
                let runs = Mutex(0)
                let result = try await store.retryingConflicts { () async throws -> Int in
                    let run = runs.withLock { n in
                        n += 1
                        return n
                    }
                    if run == 1 { try await raise(state, inTransaction: inTransaction) }
                    return run
                }
                #expect(result == 2, "\(state), in a transaction: \(inTransaction)")
            }
            let runs = Mutex(0)
            await #expect(throws: PostgresTransactionError.self) {
                try await store.retryingConflicts { () async throws -> Int in
                    runs.withLock { $0 += 1 }
                    try await raise("23505", inTransaction: true)
                    return 0
                }
            }
            #expect(runs.withLock { $0 } == 1, "a unique violation is not a conflict to run again")
        } catch {
            Issue.record(error)
        }
        await store.close()
        _ = try? await offThePool { try cluster.dropDatabase(name) }
    }

    /// PostgreSQL restarted in the middle of an upload (by the store itself, just before it writes
    /// the third batch: no sleep decides when): the requests it fails are retried, and every record
    /// arrives once.
    @Test(.offThePool) func aPostgreSQLRestartMidUploadLosesNothing() async throws {
        let cluster = try await offThePool { try Postgres() }
        defer { cluster.destroy() }
        let name = try await offThePool { try cluster.createDatabase() }
        let base = try await openTrackStore(cluster.url(name))
        let store = RestartingStore(base: base, cluster: cluster, before: 3)
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = TrackServer.Configuration()
        c.token = "secret"
        let server = try TrackServer(configuration: c, store: store)
        let task = Task { try await server.run() }
        let port = await server.listeningPort()
        var oc = Outbox.Configuration()
        oc.device = "van-1"
        let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: oc)
        try outbox.append(walk(300))
        var uc = Uploader.Configuration(url: "http://127.0.0.1:\(port)/v1/locations")
        uc.token = "secret"
        uc.maxBatchCount = 25
        uc.initialBackoff = 0.01
        uc.maxBackoff = 0.2
        uc.maxWait = 0
        let uploader = try Uploader(outbox: outbox, configuration: uc)
        try await withTimeout(120, "the upload to drain") { await uploader.run(drain: true) }
        #expect(store.restarted)
        #expect(uploader.stats.uploaded == 300)
        #expect(try outbox.stats().pending == 0)
        let stored = try await base.trail(device: "van-1")
        #expect(stored.map(\.sequence) == Array(1...300))
        #expect(try await base.count() == 300)
        await uploader.shutdown()
        await server.shutdown()
        _ = try? await task.value
        await base.close()
    }
}

/// A store that restarts its PostgreSQL cluster once, before the `before`th insert reaches it.
final class RestartingStore: TrackStore, @unchecked Sendable {
    let base: any TrackStore
    let cluster: Postgres
    let lock = NSLock()
    var inserts = 0
    let before: Int
    var restarted: Bool { lock.withLock { inserts >= before } }

    init(base: any TrackStore, cluster: Postgres, before: Int) {
        (self.base, self.cluster, self.before) = (base, cluster, before)
    }

    var location: String { base.location }

    func insert(_ records: [TrailRecord], format: String, received: Double) async throws -> (
        accepted: Int, duplicates: Int
    ) {
        let n = lock.withLock {
            inserts += 1
            return inserts
        }
        if n == before { try await offThePool { [cluster] in try cluster.restart() } }
        return try await base.insert(records, format: format, received: received)
    }

    func devices() async throws -> [DeviceSummary] { try await base.devices() }
    func device(_ id: String) async throws -> DeviceSummary? { try await base.device(id) }
    func trail(
        device: String, from: Double, to: Double, after cursor: TrailCursor?, limit: Int,
        includeInvalid: Bool, includeOutliers: Bool
    ) async throws -> (records: [TrailRecord], next: TrailCursor?) {
        try await base.trail(
            device: device, from: from, to: to, after: cursor, limit: limit, includeInvalid: includeInvalid,
            includeOutliers: includeOutliers)
    }
    func count() async throws -> Int { try await base.count() }

    // The credentials and the fleet, passed through.
    func addCredential(device: String, now: Double) async throws -> String {
        try await base.addCredential(device: device, now: now)
    }
    func credentials() async throws -> [DeviceCredential] { try await base.credentials() }
    func revokeCredential(device: String, at time: Double) async throws -> Int? {
        try await base.revokeCredential(device: device, at: time)
    }
    func credentialDevice(token: String) async throws -> String? { try await base.credentialDevice(token: token) }
    func hasCredential(device: String) async throws -> Bool { try await base.hasCredential(device: device) }
    func hasCredentials() async throws -> Bool { try await base.hasCredentials() }
    func latest(device: String?) async throws -> [LatestPosition] { try await base.latest(device: device) }
    func positions(
        in area: PositionArea, from: Double, to: Double, device: String?, after cursor: TrailCursor?,
        limit: Int
    ) async throws -> (records: [TrailRecord], next: TrailCursor?) {
        try await base.positions(in: area, from: from, to: to, device: device, after: cursor, limit: limit)
    }
    func deleteExpired(before cutoff: Double, limit: Int) async throws -> Int {
        try await base.deleteExpired(before: cutoff, limit: limit)
    }

    // The other facets, passed through.
    var storedRecords: RecordFeed { base.storedRecords }
    func followStored(clock: any EpochClock) async throws { try await base.followStored(clock: clock) }
    func setSecret(device: String, secret: OwnTracksSecret, now: Double) async throws {
        try await base.setSecret(device: device, secret: secret, now: now)
    }
    func secret(device: String) async throws -> OwnTracksSecret? { try await base.secret(device: device) }
    func removeSecret(device: String) async throws -> Bool { try await base.removeSecret(device: device) }
    func secretDevices() async throws -> [String] { try await base.secretDevices() }
    var stopEvents: StopEventFeed { base.stopEvents }
    var outlierMarks: OutlierMarkFeed { base.outlierMarks }
    func storedStops(device: String, from: Double, to: Double) async throws -> StopsReport {
        try await base.storedStops(device: device, from: from, to: to)
    }
    func storedStopsSettled() async { await base.storedStopsSettled() }
    var stopsConfiguration: VisitDetector.Configuration { base.stopsConfiguration }
    func setMaximumAccuracy(_ metres: Double) { base.setMaximumAccuracy(metres) }
    func streamLocations(device: String, from: Double, to: Double, into accumulator: StopsAccumulator) async throws
        -> StopsAccumulator
    {
        try await base.streamLocations(device: device, from: from, to: to, into: accumulator)
    }
    func homeAssistantCursors(target: String) async throws -> [String: Double] {
        try await base.homeAssistantCursors(target: target)
    }
    func setHomeAssistantCursors(_ cursors: [String: Double], target: String) async throws {
        try await base.setHomeAssistantCursors(cursors, target: target)
    }
    func statisticsSource(device: String, from: Double, to: Double) async throws -> Statistics.Source {
        try await base.statisticsSource(device: device, from: from, to: to)
    }
    func placeNames(_ cells: [PlaceCell]) async throws -> [PlaceCell: String?] { try await base.placeNames(cells) }
    func setPlaceName(_ name: String?, for cell: PlaceCell, at time: Double) async throws {
        try await base.setPlaceName(name, for: cell, at: time)
    }
    func addShare(_ share: Share, digest: String) async throws { try await base.addShare(share, digest: digest) }
    func shares(device: String?) async throws -> [Share] { try await base.shares(device: device) }
    func share(digest: String) async throws -> Share? { try await base.share(digest: digest) }
    func revokeShare(id: String, at time: Double) async throws -> Share? {
        try await base.revokeShare(id: id, at: time)
    }
    var deviceEvents: DeviceEventFeed { base.deviceEvents }
    func setEventRules(_ rules: EventRules) { base.setEventRules(rules) }
    func geofences() async throws -> [Geofence] { try await base.geofences() }
    func replaceGeofences(_ geofences: [Geofence]) async throws { try await base.replaceGeofences(geofences) }
    func putGeofences(_ geofences: [Geofence]) async throws -> Int { try await base.putGeofences(geofences) }
    func removeGeofence(_ name: String) async throws -> Bool { try await base.removeGeofence(name) }
    func events(_ query: EventQuery, after cursor: EventCursor?, limit: Int) async throws
        -> (events: [StoredEvent], next: EventCursor?)
    { try await base.events(query, after: cursor, limit: limit) }
    func storedHooks() async throws -> [StoredHook] { try await base.storedHooks() }
    func putHook(_ hook: StoredHook) async throws -> Bool { try await base.putHook(hook) }
    func removeHook(_ name: String) async throws -> Bool { try await base.removeHook(name) }
    func retryDeadDeliveries(hook name: String, now: Double) async throws -> Int {
        try await base.retryDeadDeliveries(hook: name, now: now)
    }
    func deliveryCounts() async throws -> [String: DeliveryCounts] { try await base.deliveryCounts() }
    func claimDeliveries(hook: String, limit: Int, now: Double, leaseUntil: Double, token: String) async throws
        -> [QueuedDelivery]
    { try await base.claimDeliveries(hook: hook, limit: limit, now: now, leaseUntil: leaseUntil, token: token) }
    func settleDelivery(hook: String, event: String, token: String, outcome: DeliverySettlement, now: Double)
        async throws -> Bool
    { try await base.settleDelivery(hook: hook, event: event, token: token, outcome: outcome, now: now) }
    func nextDeliveryDue(hook: String, after now: Double) async throws -> Double? {
        try await base.nextDeliveryDue(hook: hook, after: now)
    }
    func reconcilePresence(now: Double, offlineAfter: Double) async throws -> [DeviceEvent] {
        try await base.reconcilePresence(now: now, offlineAfter: offlineAfter)
    }
    func overspeedLimits() async throws -> [String: Double] { try await base.overspeedLimits() }
    func setOverspeedLimit(device: String, limit: Double?) async throws -> Bool {
        try await base.setOverspeedLimit(device: device, limit: limit)
    }
    func deleteExpiredEvents(before cutoff: Double, limit: Int) async throws -> Int {
        try await base.deleteExpiredEvents(before: cutoff, limit: limit)
    }
    func close() async { await base.close() }
}

/// The batches that arrive while `COPY`s are under way go together in the next one, whole and in
/// order; each learns the merged `COPY`'s outcome.
@Suite("PostgreSQL store: COPY coalescing")
struct CopyCoalescerTests {
    /// A `run` that reports each buffer it is given and waits until released.
    actor Gate {
        var started: [String] = []
        var waiting: [CheckedContinuation<Bool, Never>] = []
        var startedSignal: AsyncStream<Void>.Continuation?

        func run(_ buffer: ByteBuffer) async -> Bool {
            started.append(String(buffer: buffer))
            startedSignal?.yield()
            return await withCheckedContinuation { waiting.append($0) }
        }

        func releaseAll(_ outcome: Bool) {
            for w in waiting { w.resume(returning: outcome) }
            waiting = []
        }

        func watch(_ c: AsyncStream<Void>.Continuation) { startedSignal = c }
    }

    @Test(.timeLimit(.minutes(5))) func batchesArrivingWhileCopiesRunGoTogetherInTheNext() async throws {
        let gate = Gate()
        let (starts, signal) = AsyncStream<Void>.makeStream()
        await gate.watch(signal)
        var iterator = starts.makeAsyncIterator()
        let coalescer = CopyCoalescer { await gate.run($0) }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            // The first three start at once (at most three at a time)...
            for name in ["a", "b", "c"] {
                group.addTask { try await coalescer.copy(.lines(name)) }
                await iterator.next()
            }
            // ...the next four wait, then go as one COPY once one of those ends.
            for name in ["d", "e", "f", "g"] {
                group.addTask { try await coalescer.copy(.lines(name)) }
            }
            while await coalescer.queue.count < 4 { await Task.yield() }
            await gate.releaseAll(true)
            await iterator.next()
            await gate.releaseAll(false)
            var outcomes: [Bool] = []
            for try await outcome in group { outcomes.append(outcome) }
            #expect(outcomes.filter { $0 }.count == 3)
            #expect(outcomes.filter { !$0 }.count == 4)
        }
        #expect(await gate.started == ["a\n", "b\n", "c\n", "d\ne\nf\ng\n"])
    }

    /// Batches merged into one `COPY` give their rows in key order over all of them, each row whole
    /// and once, whatever order the batches came in.
    @Test func mergedBatchesGiveTheirRowsInKeyOrder() {
        let parts: [CopyRows] = [
            .lines("id:van-b:1", "id:van-b:3"), .lines("id:van-a:2", "id:van-b:2", "id:van-c:1"),
            .lines("id:van-a:10"),
        ]
        let merged = String(buffer: CopyRows.merged(parts))
        #expect(merged == "id:van-a:10\nid:van-a:2\nid:van-b:1\nid:van-b:2\nid:van-b:3\nid:van-c:1\n")
        #expect(String(buffer: CopyRows.merged([parts[1]])) == "id:van-a:2\nid:van-b:2\nid:van-c:1\n")
        // A real batch's rows, split in two that interleave by key and merged again: the same text
        // as the batch in one (whose rows go in key order).
        let records = numbered(walk(12, device: "van"))
        let keys = records.map { PostgresTrackStore.key($0, format: "json") }
        let halves = [records.indices.filter { $0 % 2 == 1 }, records.indices.filter { $0 % 2 == 0 }].map { picked in
            CopyRows(
                picked.map { records[$0] }, keys: picked.map { keys[$0] }, format: "json", received: 1_715_679_100)!
        }
        let whole = CopyRows(records, keys: keys, format: "json", received: 1_715_679_100)!
        #expect(CopyRows.merged(halves) == whole.buffer)
        #expect(
            whole.keys.map { String(decoding: $0, as: UTF8.self) }.prefix(4) == [
                "id:van:1", "id:van:10", "id:van:11", "id:van:12",
            ])
    }

    @Test func eachInstanceTakesItsShareOfTheBudget() {
        #expect(CopyCoalescer.budget == 3)
        #expect([1, 2, 3, 4, 10].map(CopyCoalescer.share(of:)) == [3, 1, 1, 1, 1])
        #expect(CopyCoalescer.share(of: 0) == 3)
    }

    /// With two instances counted, one `COPY` runs at a time here, and what waits goes as one next.
    @Test(.timeLimit(.minutes(5))) func twoInstancesCountedRunOneCopyAtATimeEach() async throws {
        let gate = Gate()
        let (starts, signal) = AsyncStream<Void>.makeStream()
        await gate.watch(signal)
        var iterator = starts.makeAsyncIterator()
        let coalescer = CopyCoalescer(run: { await gate.run($0) }, countInstances: { 2 })
        try await withThrowingTaskGroup(of: Bool.self) { group in
            // The first starts at once, and has the instances counted.
            group.addTask { try await coalescer.copy(.lines("a")) }
            await iterator.next()
            while await coalescer.counts == 0 { try Task.checkCancellation(); await Task.yield() }
            #expect(await coalescer.limit == 1)
            for name in ["b", "c"] {
                group.addTask { try await coalescer.copy(.lines(name)) }
            }
            // Each of them either waits or has started.
            while await coalescer.queue.count + gate.started.count < 3 {
                try Task.checkCancellation(); await Task.yield()
            }
            #expect(await coalescer.inFlight == 1)
            await gate.releaseAll(true)
            await iterator.next()
            await gate.releaseAll(true)
            for try await outcome in group { #expect(outcome) }
        }
        #expect(await gate.started == ["a\n", "b\nc\n"])
    }

    /// The instances are counted again under load once every `recount` of the clock given, not per
    /// batch; a count that fails keeps the last one.
    @Test(.timeLimit(.minutes(5))) func theInstancesAreCountedAgainEveryRecount() async throws {
        let clock = ManualClock()
        let answers = Answers([3, nil, 1])
        let coalescer = CopyCoalescer(
            run: { _ in true }, countInstances: { try await answers.next() },
            clock: clock)
        func copy() async throws { _ = try await coalescer.copy(.lines("x")) }
        func counted(_ n: Int) async throws {
            while await coalescer.counts < n { try Task.checkCancellation(); await Task.yield() }
        }
        func share() async -> [Int] { [await coalescer.instances, await coalescer.limit] }
        try await copy()
        try await counted(1)
        #expect(await share() == [3, 1])
        try await copy()
        clock.advance(by: .milliseconds(1999))
        try await copy()
        #expect(await coalescer.counts == 1)
        #expect(await !coalescer.counting)
        clock.advance(by: .milliseconds(1))
        try await copy()
        try await counted(2)
        #expect(await share() == [3, 1])
        clock.advance(by: .seconds(2))
        try await copy()
        try await counted(3)
        #expect(await share() == [1, 3])
    }

    /// Counts given in turn (`nil`: the count fails).
    actor Answers {
        var left: [Int?]
        init(_ answers: [Int?]) { left = answers }
        func next() throws -> Int {
            guard !left.isEmpty, let n = left.removeFirst() else { throw CancellationError() }
            return n
        }
    }
}

extension CopyRows {
    /// Rows that are their keys alone, one a line: for tests of how they are merged and sent.
    static func lines(_ keys: String...) -> CopyRows {
        var bytes: [UInt8] = [], ends: [Int] = []
        for key in keys {
            bytes += Array(key.utf8) + [UInt8(ascii: "\n")]
            ends.append(bytes.count)
        }
        return CopyRows(bytes: bytes, keys: keys.map { Array($0.utf8) }, ends: ends)
    }
}
