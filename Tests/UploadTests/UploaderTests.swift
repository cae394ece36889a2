import Formats
import Foundation
import Geo
import KeepTrackTesting
import Lifecycle
import Synchronization
import Testing
import TrackServerTesting
import TrackServer
import TrackStore
@testable import Upload

/// An outbox in a fresh directory with `n` walk records.
func filledOutbox(_ n: Int, device: String = "van-1") throws -> (Outbox, String) {
    let dir = temporaryDirectory()
    var c = Outbox.Configuration()
    c.device = device
    let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: c)
    try outbox.append(walk(n))
    return (outbox, dir)
}

func uploader(
    _ outbox: Outbox, _ endpoint: Endpoint, path: String = "/v1/locations", format: String = "json",
    token: String? = "secret", batch: Int = 100, application: Application? = nil,
    clock: any EpochClock = WallClock(), regionEvents: Bool = true
) throws -> Uploader {
    var c = Uploader.Configuration(url: endpoint.url(path))
    c.format = UploadFormats.named(format)!
    c.formatSettings.regionEvents = regionEvents
    c.token = token
    c.maxBatchCount = batch
    c.initialBackoff = 0.01
    c.maxBackoff = 0.05
    c.maxWait = 0
    return try Uploader(outbox: outbox, configuration: c, application: application, clock: clock)
}

/// Runs a draining upload with a hang guard.
func drain(_ u: Uploader) async throws {
    try await withTimeout(60, "the upload to drain") { await u.run(drain: true) }
}

@Suite("Uploader against a real endpoint", .serialized)
struct UploaderTests {
    /// A server's Retry-After holds across runs: the drain after a live run (which stopped during
    /// its wait) waits for it too (it asked again at once: 0.03 s after a Retry-After of 2).
    @Test func theDrainAfterALiveRunWaitsForTheRetryAfterItWasGiven() async throws {
        var faults = Faults()
        (faults.failNext, faults.failStatus, faults.retryAfter) = (1, 429, 30)
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(50)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The outbox dates its records by the wall clock: the uploader's starts there.
        let start = WallClock().now
        let clock = ManualClock(now: start)
        var c = Uploader.Configuration(url: endpoint.url("/v1/locations"))
        (c.token, c.maxWait, c.maxBackoff) = ("secret", 0, 60)
        let u = try Uploader(outbox: outbox, configuration: c, clock: clock)
        let live = Task { await u.run() }
        try await withTimeout(30, "the live run's wait") { await clock.sleepers(atLeast: 1) }
        #expect(clock.nextDeadline == start.advanced(by: .seconds(30)))
        live.cancel()
        await live.value
        let drained = Task { await u.run(drain: true) }
        try await withTimeout(30, "the drain's wait") { await clock.sleepers(atLeast: 1) }
        #expect(clock.nextDeadline == start.advanced(by: .seconds(30)))
        #expect(try await endpoint.server.store.count() == 0)
        clock.advance(by: .seconds(30))
        try await withTimeout(30, "the drain") { await drained.value }
        #expect(try await endpoint.server.store.count() == 50)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func everyRecordArrivesOnceInOrder(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let (outbox, dir) = try filledOutbox(250)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        let trail = try await endpoint.server.store.trail(device: "van-1")
        #expect(trail.map(\.sequence) == Array(1...250))
        #expect(u.stats.uploaded == 250)
        #expect(u.stats.requests == 3)
        #expect(try outbox.stats().pending == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test(arguments: [500, 503, 429, 408])
    func retriesOnTransientFailuresWithoutStoringTwice(status: Int) async throws {
        var faults = Faults()
        faults.failNext = 3
        faults.failStatus = status
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(120)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        #expect(u.stats.retries == 3)
        #expect(try await endpoint.server.store.count() == 120)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test func honoursRetryAfter() async throws {
        var faults = Faults()
        faults.failNext = 1
        faults.failStatus = 429
        faults.retryAfter = 1
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: endpoint.url())
        c.token = "secret"
        c.maxWait = 0
        c.initialBackoff = 100
        c.maxBackoff = 100
        let u = try Uploader(outbox: outbox, configuration: c)
        try await drain(u)
        // The backoff would have been 50-100 s: the wait was the server's second.
        #expect(u.stats.lastRetryWait == 1)
        #expect(u.stats.retries == 1)
        #expect(u.stats.lastError == nil)
        await u.shutdown()
        await endpoint.stop()
    }

    /// The endpoint stores a batch and the connection drops before the answer: the uploader sends
    /// it again, and the endpoint recognises every id.
    @Test(arguments: StoreKind.allCases) func aDroppedAnswerIsSentAgainAndStoredOnce(kind: StoreKind) async throws {
        var faults = Faults()
        faults.dropNext = 2
        let endpoint = try await Endpoint.start(store: kind, faults: faults)
        let (outbox, dir) = try filledOutbox(200)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        #expect(try await endpoint.server.store.count() == 200)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 200)
        #expect(u.stats.retries == 2)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test func aCaptivePortalsOKIsNotAnAcknowledgement() async throws {
        var faults = Faults()
        faults.garbageNext = 1
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        #expect(u.stats.retries == 1)
        #expect(try await endpoint.server.store.count() == 5)
        await u.shutdown()
        await endpoint.stop()
    }

    /// A permanent rejection is narrowed down to the records it is about; the others are stored.
    /// (Records the uploader itself finds invalid never reach the server: `InvalidRecordTests`. Here
    /// the device's clock is a year ahead of the endpoint's, so two records are in the endpoint's
    /// future: valid to send, refused when they arrive.)
    @Test(arguments: StoreKind.allCases) func badRecordsGoToDeadLettersAndTheRestIsStored(kind: StoreKind) async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let (outbox, dir) = try filledOutbox(0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ahead = WallClock.seconds() + 365 * 86_400
        var records = walk(40)
        records[13].time = ahead
        records[29].time = ahead + 1
        try outbox.append(records)
        let u = try uploader(outbox, endpoint, clock: ManualClock(now: .init(secondsSince1970: ahead)))
        try await drain(u)
        let dead = try outbox.deadLetters()
        #expect(dead.map(\.record.sequence) == [14, 30])
        #expect(dead.allSatisfy { $0.status == 400 })
        #expect(dead.first?.reason.contains("is impossible (before 1980-01-06 or more than a day ahead)") == true)
        #expect(try await endpoint.server.store.count() == 38)
        #expect(u.stats.deadLettered == 2)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test func aWrongTokenIsRetriedNotDeadLettered() async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint, token: "wrong")
        let run = Task { await u.run() }
        try await withTimeout(30, "a refused attempt") {
            while u.stats.retries == 0 { await Task.yield() }
        }
        run.cancel()
        await run.value
        #expect(u.stats.lastError?.contains("refuses our credentials (401") == true)
        #expect(try outbox.stats().pending == 3)
        #expect(try outbox.deadLetters().isEmpty)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test func bodiesAreGzippedOnceTheEndpointSaysItAcceptsThem() async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(300)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        // The first request learns it; the next two are compressed.
        #expect(await endpoint.metric("keeptrack_serve_gzip_requests_total") == 2)
        #expect(try await endpoint.server.store.count() == 300)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test(arguments: ["osmand", "owntracks"])
    func speaksOsmAndAndOwnTracksToTheEndpoint(format: String) async throws {
        let path = UploadFormats.named(format)!.serverPath
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var records = walk(12)
        records[5].kind = .enter
        records[5].region = "home"
        try outbox.append(records)
        let u = try uploader(outbox, endpoint, path: path, format: format)
        try await drain(u)
        let device = format == "owntracks" ? OwnTracks.deviceID(user: "keeptrack", device: "van-1") : "van-1"
        let trail = try await endpoint.server.store.trail(device: device)
        let sent = format == "osmand" ? records.filter { $0.kind == .location }.count + 1 : records.count
        #expect(trail.count == sent)
        #expect(trail.first.map { abs($0.latitude - 48.1) < 1e-6 } == true)
        if format == "owntracks" { #expect(trail.contains { $0.kind == .enter && $0.region == "home" }) }
        await u.shutdown()
        await endpoint.stop()
    }

    /// Nothing is sent while the app is suspended; a wake lets the batch go, inside a background task.
    @Test func nothingIsSentWhileSuspended() async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let app = Application(clock: clock)
        app.launch()
        app.enterBackground()
        clock.advance(by: .seconds(10))
        app.advance()
        #expect(app.state == .suspended)
        let u = try uploader(outbox, endpoint, application: app)
        let tasks = Mutex<[String]>([])
        app.observe { if case .transition(let t) = $0 { tasks.withLock { $0.append(t.to.rawValue) } } }
        // A drain (the process ending) leaves the records for the next run.
        try await drain(u)
        #expect(try outbox.stats().pending == 10)
        #expect(u.stats.lastError == "the app is suspended: nothing is sent until it runs again")
        let run = Task { await u.run() }
        // Give the loop every chance to misbehave: it must be waiting, not sending.
        for _ in 0..<100 { await Task.yield() }
        #expect(try await endpoint.server.store.count() == 0)
        app.wake(.significantChange)
        try await withTimeout(30, "the upload after the wake") {
            while u.stats.uploaded < 10 { await Task.yield() }
        }
        run.cancel()
        await run.value
        #expect(try await endpoint.server.store.count() == 10)
        #expect(app.lifecycle.tasks.isEmpty)
        await u.shutdown()
        await endpoint.stop()
    }

    /// The budget runs out mid-request: the expiration handler cancels it, the task ends (no
    /// termination), and the batch stays in the outbox.
    @Test func anExpiringBudgetCancelsTheRequestAndKeepsTheBatch() async throws {
        var faults = Faults()
        faults.delay = 30
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let app = Application(policy: .ios13, modes: [], clock: clock)
        app.launch()
        app.enterBackground()
        var c = Uploader.Configuration(url: endpoint.url())
        c.token = "secret"
        c.maxWait = 0
        c.initialBackoff = 100
        c.maxBackoff = 100
        let u = try Uploader(outbox: outbox, configuration: c, application: app)
        let run = Task { await u.run() }
        try await withTimeout(30, "the upload task to begin") {
            while app.lifecycle.tasks.isEmpty { await Task.yield() }
        }
        #expect(app.lifecycle.tasks.map(\.name) == ["upload"])
        clock.advance(by: .seconds(26))
        app.advance()
        try await withTimeout(30, "the request to be cancelled") {
            while u.stats.expired == 0 || u.stats.retries == 0 { await Task.yield() }
        }
        clock.advance(by: .seconds(10))
        app.advance()
        #expect(app.state == .suspended)
        #expect(try outbox.stats().pending == 10)
        run.cancel()
        await run.value
        await u.shutdown()
        await endpoint.stop()
    }
}

@Suite("Uploader over TLS", .serialized, .offThePool)
struct TLSTests {
    /// A self-signed certificate for 127.0.0.1, made with openssl.
    func certificate(in dir: String) throws -> (cert: String, key: String) {
        let cert = dir + "/cert.pem", key = dir + "/key.pem"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0)
        return (cert, key)
    }

    @Test func trustsTheCAFileAndRefusesAnUnknownCertificate() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (cert, key) = try certificate(in: dir)
        var c = TrackServer.Configuration()
        c.tlsCertificate = cert
        c.tlsKey = key
        c.token = "secret"
        let server = try TrackServer(configuration: c, store: try SQLiteTrackStore(path: dir + "/endpoint.sqlite"))
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run { continuation.yield($0) } }
        let port = try await withTimeout(30, "the TLS endpoint") {
            var it = ready.makeAsyncIterator()
            return await it.next() ?? 0
        }
        let (outbox, outDir) = try filledOutbox(20)
        defer { try? FileManager.default.removeItem(atPath: outDir) }

        // The system trust store does not know a self-signed certificate: nothing is sent.
        var untrusted = Uploader.Configuration(url: "https://127.0.0.1:\(port)/v1/locations")
        untrusted.token = "secret"
        untrusted.maxBackoff = 0.01
        untrusted.initialBackoff = 0.01
        untrusted.drainAttempts = 2
        let refused = try Uploader(outbox: outbox, configuration: untrusted)
        try await withTimeout(60, "the refused upload") { await refused.run(drain: true) }
        #expect(try await server.store.count() == 0)
        // Said as a setting to fix, not BoringSSL's error stack (with its build path), and not retried
        // as a network error would be: a drain stops at once.
        let said = refused.stats.lastError ?? ""
        #expect(
            said.contains("the TLS handshake with 127.0.0.1:\(port) failed") && said.contains("a CA file"), "\(said)")
        #expect(!said.contains("BoringSSL") && !said.contains(".build/"), "\(said)")
        #expect(refused.stats.retries == 1, "\(refused.stats)")
        await refused.shutdown()

        // With --ca-file, it is trusted.
        var trusted = untrusted
        trusted.caFile = cert
        let u = try Uploader(outbox: outbox, configuration: trusted)
        try await withTimeout(60, "the trusted upload") { await u.run(drain: true) }
        #expect(try await server.store.count() == 20)
        await u.shutdown()
        await server.shutdown()
        _ = try? await task.value
    }
}
