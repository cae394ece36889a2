import Formats
import Foundation
import Geo
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
@testable import Upload

/// Issue 29, item 1: several upload targets over one outbox, each a lane of its own.
@Suite("Upload targets: one outbox, a lane each", .serialized, .offThePool)
struct UploadTargetsTests {
    static let t0 = 1_800_000_000.0

    /// An uploader for the target `name` at `url`.
    static func lane(
        _ outbox: Outbox, name: String, url: String, token: String? = "secret", format: String = "json",
        drainAttempts: Int = 5, clock: any EpochClock = WallClock(), random: SeededRandom = SeededRandom(seed: 29)
    ) throws -> Uploader {
        var c = Uploader.Configuration(url: url)
        c.format = UploadFormats.named(format)!
        (c.token, c.target, c.labelMetrics, c.drainAttempts) = (token, name, true, drainAttempts)
        (c.maxBatchCount, c.maxWait, c.initialBackoff, c.maxBackoff) = (50, 0, 0.01, 0.05)
        return try Uploader(outbox: outbox, configuration: c, clock: clock, random: random)
    }

    static func targets(_ names: String...) -> [Outbox.Target] {
        names.map { Outbox.Target(name: $0, url: "http://" + $0) }
    }

    /// A healthy target, one that refuses the connection and one that answers 401: the healthy one
    /// gets everything while the others fail; once they recover (the refused one back under its
    /// name at a new address, the other with the right token), every target holds every record
    /// exactly once and the outbox is empty.
    @Test func aTargetDownOrRefusingHoldsNoOtherBackAndCatchesUpExactlyOnce() async throws {
        let healthy = try await Endpoint.start()
        let refusing = try await Endpoint.start()
        let closed = try ReservedPort()
        let (outbox, dir) = try filledOutbox(120)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.useTargets(Self.targets("healthy", "refusing", "down"))
        let a = try Self.lane(outbox, name: "healthy", url: healthy.url())
        let b = try Self.lane(outbox, name: "refusing", url: refusing.url(), token: "wrong")
        let c = try Self.lane(
            outbox, name: "down", url: "http://127.0.0.1:\(closed.number)/v1/locations",
            drainAttempts: 1)
        try await withTimeout(60, "three lanes to drain") {
            async let x: Void = a.run(drain: true)
            async let y: Void = b.run(drain: true)
            async let z: Void = c.run(drain: true)
            _ = await (x, y, z)
        }
        #expect(try await healthy.server.store.trail(device: "van-1").map(\.sequence) == Array(1...120))
        #expect(try await refusing.server.store.count() == 0)
        #expect(b.stats.settingsToCheck == [.token])
        #expect(c.stats.lastError?.contains("cannot reach") == true)
        // Nothing left the outbox: two targets lack every record.
        #expect(try outbox.stats().pending == 120)
        let pending = Dictionary(uniqueKeysWithValues: try outbox.targetStatuses().map { ($0.target.name, $0.pending) })
        #expect(pending == ["healthy": 0, "refusing": 120, "down": 120])
        #expect(try outbox.nextBatch(maxCount: 10, target: "healthy").isEmpty)
        #expect(try outbox.targetStatuses().first { $0.target.name == "refusing" }?.lastError != nil)

        // Recovery: the same names, fixed settings, a new address for the one that was down.
        let back = try await Endpoint.start()
        let b2 = try Self.lane(outbox, name: "refusing", url: refusing.url())
        let c2 = try Self.lane(outbox, name: "down", url: back.url())
        let a2 = try Self.lane(outbox, name: "healthy", url: healthy.url())
        try await withTimeout(60, "the recovered lanes to drain") {
            async let x: Void = a2.run(drain: true)
            async let y: Void = b2.run(drain: true)
            async let z: Void = c2.run(drain: true)
            _ = await (x, y, z)
        }
        for endpoint in [healthy, refusing, back] {
            #expect(try await endpoint.server.store.trail(device: "van-1").map(\.sequence) == Array(1...120))
            #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 0)
        }
        #expect(a2.stats.uploaded == 0, "the healthy target is sent nothing twice")
        #expect(try outbox.stats().pending == 0)
        let acknowledgements = try await outbox.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM target_ack")
        }
        #expect(acknowledgements == 0)
        for u in [a, b, c, a2, b2, c2] { await u.shutdown() }
        for endpoint in [healthy, refusing, back] { await endpoint.stop() }
        closed.release()
    }

    /// An HTTP target and an OwnTracks MQTT target on a real mosquitto that is stopped: the HTTP one
    /// gets everything; once the broker is back, its subscriber gets every record once, and the
    /// outbox is empty.
    @Test func anMQTTBrokerThatIsDownCatchesUpBesideAnHTTPTarget() async throws {
        let broker = try Broker()
        let http = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(60)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.useTargets(Self.targets("fleet", "broker"))
        broker.stop()
        func mqttLane() throws -> Uploader {
            var c = Uploader.Configuration(url: "mqtt://127.0.0.1:\(broker.port)")
            (c.target, c.maxWait, c.drainAttempts, c.timeout, c.maxBatchCount) = ("broker", 0, 1, 5, 25)
            return try Uploader(outbox: outbox, configuration: c)
        }
        let a = try Self.lane(outbox, name: "fleet", url: http.url())
        let b = try mqttLane()
        try await withTimeout(60, "an HTTP lane and a broker that is down") {
            async let x: Void = a.run(drain: true)
            async let y: Void = b.run(drain: true)
            _ = await (x, y)
        }
        #expect(try await http.server.store.count() == 60)
        #expect(b.stats.uploaded == 0 && b.stats.lastError != nil)
        #expect(try outbox.stats().pending == 60)
        try broker.restart()
        let subscriber = try Subscriber(port: broker.port, topic: "owntracks/#", count: 60)
        let b2 = try mqttLane()
        try await withTimeout(60, "the broker's lane") { await b2.run(drain: true) }
        var times: [Int] = []
        while let m = subscriber.next() { times.append(try object(m.payload)["tst"] as? Int ?? 0) }
        #expect(times == (0..<60).map { 1_715_679_000 + $0 })
        #expect(try outbox.stats().pending == 0)
        for u in [a, b, b2] { await u.shutdown() }
        await http.stop()
    }

    /// Each lane backs off on its own: while one target answers 503 and waits out its backoff on a
    /// manual clock (the seeded jitter's waits, no real time), the other has received everything.
    @Test func eachLaneBacksOffOnItsOwnOnTheManualClock() async throws {
        var faults = Faults()
        faults.failNext = 2
        faults.failStatus = 503
        let failing = try await Endpoint.start(faults: faults)
        let healthy = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(30)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.useTargets(Self.targets("healthy", "failing"))
        let clock = ManualClock(now: .init(secondsSince1970: Self.t0))
        var failingConfiguration = Uploader.Configuration(url: failing.url())
        failingConfiguration.token = "secret"
        failingConfiguration.target = "failing"
        (failingConfiguration.maxWait, failingConfiguration.initialBackoff, failingConfiguration.maxBackoff) = (
            0, 100, 1000
        )
        let b = try Uploader(
            outbox: outbox, configuration: failingConfiguration, clock: clock,
            random: SeededRandom(seed: 7))
        let a = try Self.lane(outbox, name: "healthy", url: healthy.url(), clock: clock)
        var random = SeededRandom(seed: 7)
        let expected = (1...2).map { Backoff(initial: 100, maximum: 1000).delay(failures: $0, using: &random) }
        let waited = try await withTimeout(60, "a healthy lane and a backing-off one") {
            async let failingLane: Void = b.run(drain: true)
            // The healthy lane drains while the other one sleeps on the clock, which has not moved.
            await a.run(drain: true)
            #expect(try await healthy.server.store.count() == 30)
            #expect(clock.now.secondsSince1970 == Self.t0)
            var waited: [Double] = []
            for _ in expected {
                await clock.sleepers()
                let deadline = try #require(clock.nextDeadline)
                waited.append(deadline.secondsSince1970 - clock.now.secondsSince1970)
                clock.advance(to: deadline)
            }
            await failingLane
            return waited
        }
        #expect(zip(waited, expected).allSatisfy { abs($0 - $1) < 1e-6 }, "\(waited) against \(expected)")
        #expect(b.stats.retries == 2 && a.stats.retries == 0)
        #expect(try await failing.server.store.count() == 30)
        #expect(try outbox.stats().pending == 0)
        for u in [a, b] { await u.shutdown() }
        for endpoint in [healthy, failing] { await endpoint.stop() }
    }

    /// A format that cannot carry a record (OsmAnd has no visit) skips it, and that counts as done
    /// for that target: the visit leaves the outbox once the JSON target has it.
    @Test func aRecordATargetsFormatSkipsDoesNotHoldTheOutbox() async throws {
        let json = try await Endpoint.start()
        let osmand = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.append([OutboxVisitTests.visit(departure: 1_715_679_500)])
        try outbox.useTargets(Self.targets("json", "osmand"))
        let a = try Self.lane(outbox, name: "osmand", url: osmand.url("/"), format: "osmand")
        try await withTimeout(60, "the OsmAnd lane") { await a.run(drain: true) }
        #expect(a.stats.skipped == 1)
        #expect(try await osmand.server.store.count() == 10)
        #expect(try outbox.stats().pending == 11)
        let b = try Self.lane(outbox, name: "json", url: json.url())
        try await withTimeout(60, "the JSON lane") { await b.run(drain: true) }
        #expect(try outbox.stats().pending == 0)
        #expect(b.stats.uploaded == 11)
        for u in [a, b] { await u.shutdown() }
        for endpoint in [json, osmand] { await endpoint.stop() }
    }

    /// A target's dead letter is that target's alone: the record stays for the other, and a retry
    /// sends it to that target only.
    @Test func deadLettersBelongToTheirTarget() throws {
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.useTargets(Self.targets("a", "b"))
        try outbox.deadLetter([2], status: 400, reason: "refused", target: "a")
        #expect(try outbox.stats().pending == 3)
        #expect(try outbox.nextBatch(maxCount: 10, target: "a").map(\.sequence) == [1, 3])
        #expect(try outbox.nextBatch(maxCount: 10, target: "b").map(\.sequence) == [1, 2, 3])
        #expect(try outbox.deadLetterLines().first?.contains("\"target\":\"a\"") == true)
        try outbox.acknowledge([1, 2, 3], target: "b")
        try outbox.acknowledge([1, 3], target: "a")
        #expect(try outbox.stats().pending == 0)
        #expect(try outbox.retryDeadLetters(nil, target: "a") == 1)
        #expect(try outbox.nextBatch(maxCount: 10, target: "a").map(\.sequence) == [2])
        #expect(try outbox.nextBatch(maxCount: 10, target: "b").isEmpty)
        try outbox.acknowledge([2], target: "a")
        #expect(try outbox.stats().pending == 0)
    }

    /// A target removed from the settings holds nothing back: the next run without it says what it
    /// lacked (an orphan) and the records leave once this run's targets have them; forgetting it
    /// takes it out of the status.
    @Test func aRemovedTargetIsAnOrphanThatHoldsNothingBack() throws {
        let (outbox, dir) = try filledOutbox(4)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: Self.t0))
        let path = outbox.path
        do {
            let first = try Outbox(path: path, clock: clock)
            try first.useTargets(Self.targets("kept", "removed"))
            try first.acknowledge([1, 2, 3], target: "kept")
            #expect(try first.stats().pending == 4)
        }
        clock.advance(by: .seconds(60))
        let second = try Outbox(path: path, clock: clock)
        let (orphans, released) = try second.useTargets(Self.targets("kept"))
        #expect(released == 3)
        #expect(orphans.map(\.target.name) == ["removed"] && orphans[0].pending == 4)
        #expect(try second.nextBatch(maxCount: 10, target: "kept").map(\.sequence) == [4])
        #expect(try second.targetStatuses().map(\.inLatestRun) == [true, false])
        #expect(try second.forgetTarget("removed") == (true, 0))
        #expect(try second.targetStatuses().map(\.target.name) == ["kept"])
    }

    /// An outbox of the version before targets (v7, one target), with records and a dead letter,
    /// opens: nothing is lost, its records go once to the target it had and once to a new one, its
    /// numbers go on, and its dead letter is any target's (`''`).
    @Test func aSingleTargetOutboxMigratesWithoutLosingOrResending() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let span = "spanEnd REAL, endLat REAL, endLon REAL, distance REAL, maxSpeed REAL"
        let sql = """
            PRAGMA page_size = 1024;
            PRAGMA journal_mode = WAL;
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1-outbox'), ('v2-dead-letter'), ('v3-pending-count-and-age-index'),
                ('v4-count-in-memory'), ('v5-decided-at'), ('v6-one-page-a-commit'), ('v7-visits-and-trips');
            CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
            INSERT INTO meta (key, value) VALUES ('evicted', 0), ('uploaded', 7), ('device', 'van-1'), ('lastseq', 7);
            CREATE TABLE dead_letter (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT, time REAL NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                appended REAL NOT NULL, status INTEGER NOT NULL, reason TEXT NOT NULL, failed REAL NOT NULL,
                decided REAL, \(span));
            CREATE TABLE outbox (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT, time REAL NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                priority INTEGER NOT NULL, appended REAL NOT NULL, decided REAL, \(span));
            CREATE INDEX outbox_transitions ON outbox (seq) WHERE priority = 0;
            INSERT INTO dead_letter (seq, kind, time, lat, lon, appended, status, reason, failed) VALUES
                (5, 'location', 40, 48, 11, 100, 400, 'refused', 150);
            INSERT INTO outbox (seq, kind, region, time, lat, lon, priority, appended) VALUES
                (8, 'location', NULL, 1715679000, 48.1, 11.5, 1, 100), (9, 'location', NULL, 1715679001, 48.1, 11.5, 1, 100),
                (10, 'location', NULL, 1715679002, 48.1, 11.5, 1, 100);
            """
        try runSQLite(dir + "/outbox.sqlite", sql)
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        #expect(outbox.device == "van-1")
        #expect(try outbox.stats().pending == 3 && outbox.waiting == 3)
        #expect(try outbox.deadLettersWithTargets().map { [String($0.record.sequence), $0.target] } == [["5", ""]])
        let old = try await Endpoint.start()
        let new = try await Endpoint.start()
        try outbox.useTargets(Self.targets("old", "new"))
        let a = try Self.lane(outbox, name: "old", url: old.url())
        let b = try Self.lane(outbox, name: "new", url: new.url())
        try await withTimeout(60, "both lanes") {
            async let x: Void = a.run(drain: true)
            async let y: Void = b.run(drain: true)
            _ = await (x, y)
        }
        for endpoint in [old, new] {
            #expect(try await endpoint.server.store.trail(device: "van-1").map(\.sequence) == [8, 9, 10])
        }
        #expect(try outbox.stats().pending == 0)
        #expect(try outbox.append(walk(1)).stored.map(\.sequence) == [11])
        #expect(try outbox.retryDeadLetters(nil) == 1)
        #expect(try outbox.nextBatch(maxCount: 5, target: "new").map(\.sequence) == [5, 11])
        for u in [a, b] { await u.shutdown() }
        for endpoint in [old, new] { await endpoint.stop() }
    }

    /// Target names come from the URL without credentials or query, so that a token in a URL is
    /// neither a name nor shown.
    @Test(arguments: [
        ("https://traccar.example:5055/", "traccar.example:5055/"),
        ("http://127.0.0.1:8080/v1/locations?key=s3cret", "127.0.0.1:8080/v1/locations"),
        ("mqtt://anna:pw@broker/owntracks/anna/phone", "mqtt://broker/owntracks/anna/phone"),
        (
            "https://user:pw@dawarich.example/api/v1/overland/batches?api_key=k",
            "dawarich.example/api/v1/overland/batches"
        ),
        ("embedded", "embedded"),
    ])
    func targetNamesLeaveOutCredentials(url: String, name: String) {
        #expect(Uploader.targetName(url) == name)
    }
}
