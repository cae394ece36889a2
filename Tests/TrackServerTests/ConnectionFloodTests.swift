import Foundation
#if canImport(Glibc)
    import Glibc
#endif
import Geo
import Synchronization
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// A real endpoint on 127.0.0.1 on a manual clock (the first-request timeout runs on the server's
/// clock), over a SQLite store in its own directory. The keep-alive and body timeouts run on NIO's
/// clock, real time: a day here unless a test sets them, so that a test starved on a loaded machine
/// (its connections held past the 30 s default, seen on CI) still sees only what it drives.
struct ClockedEndpoint {
    let server: TrackServer
    let task: Task<Void, any Error>
    let port: Int
    let directory: String
    let clock: ManualClock

    static func start(configure: (inout TrackServer.Configuration) -> Void) async throws -> ClockedEndpoint {
        let dir = temporaryDirectory()
        var c = TrackServer.Configuration()
        c.token = "secret"
        c.idleTimeout = .seconds(86_400)
        c.bodyTimeout = .seconds(86_400)
        configure(&c)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_715_682_600))  // an hour after the records below
        let server = try TrackServer(
            configuration: c, store: try SQLiteTrackStore(path: dir + "/endpoint.sqlite"), clock: clock)
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run { continuation.yield($0) } }
        let port = try await withTimeout(30, "the endpoint to listen") { [ready] in
            var it = ready.makeAsyncIterator()
            return await it.next() ?? 0
        }
        return ClockedEndpoint(server: server, task: task, port: port, directory: dir, clock: clock)
    }

    /// One request over a fresh connection, exactly as written; the response as text.
    func exchange(_ request: String) async throws -> String {
        let socket = try RawSocket(port: port)
        defer { socket.close() }
        socket.send(request)
        return await socket.readResponse()
    }

    func get(_ path: String) async throws -> String {
        try await exchange("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    }

    func metric(_ name: String) async -> Int {
        for line in await server.metricsText().split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last!).map { Int($0) } ?? -1
        }
        return 0
    }

    /// Returns once `metric` reads `value` (the server accepts connections on its own threads);
    /// the 30 s only ends a hang.
    func until(_ name: String, is value: Int) async throws {
        let seen = Mutex<[Int]>([])
        do {
            try await withTimeout(30, "\(name) to reach \(value)") {
                while true {
                    let now = await metric(name)
                    if now == value { return }
                    seen.withLock { if $0.last != now { $0.append(now) } }
                    await Task.yield()
                }
            }
        } catch {
            // What it read instead, in order (a count stuck, or one that went past).
            Issue.record("\(name) read \(seen.withLock { $0 }), never \(value)")
            throw error
        }
    }

    func stop() async {
        await server.shutdown()
        _ = try? await task.value
        await server.store.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

@Suite("TrackServer: floods of connections (issue 25, item 2)", .serialized)
struct ConnectionFloodTests {
    static let open = "keeptrack_serve_connections"
    static let shedAwaitingHead = "keeptrack_serve_connections_shed_total{state=\"awaiting_head\"}"
    static let shedIdle = "keeptrack_serve_connections_shed_total{state=\"idle\"}"
    static let timeouts = "keeptrack_serve_first_request_timeouts_total"

    static let batch =
        #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"lon":11.5}]}"#

    @Test func answersARealClientWhileIdleConnectionsAndASlowlorisHoldTheCap() async throws {
        let e = try await ClockedEndpoint.start { $0.maxConnections = 20 }
        #expect(await e.metric("keeptrack_serve_connections_max") == 20)
        var flood: [RawSocket] = []
        for _ in 0..<19 { flood.append(try RawSocket(port: e.port)) }
        let slowloris = try RawSocket(port: e.port)
        slowloris.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        try await e.until(Self.open, is: 20)

        let health = try await e.get("/healthz")
        #expect(status(health) == 200, "\(health)")
        #expect(await e.metric(Self.shedAwaitingHead) == 1, "the newcomer took a silent connection's place")
        // The cap full again (the answered connection closed): a real upload takes another's place.
        try await e.until(Self.open, is: 19)
        flood.append(try RawSocket(port: e.port))
        try await e.until(Self.open, is: 20)
        let upload = try await e.exchange(
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Length: \(Self.batch.utf8.count)\r\nConnection: close\r\n\r\n" + Self.batch)
        #expect(body(upload) == "{\"accepted\":1,\"duplicates\":0}\n", "\(upload)")
        #expect(await e.metric(Self.shedAwaitingHead) == 2)
        #expect(await e.metric("keeptrack_serve_connections_refused_total") == 0)
        #expect(try await e.server.store.count() == 1)
        flood.forEach { $0.close() }
        slowloris.close()
        await e.stop()
    }

    @Test func shedsTheKeepAliveConnectionIdleTheLongestWhenNoneIsWithoutAHead() async throws {
        let e = try await ClockedEndpoint.start { $0.maxConnections = 3 }
        var idle: [RawSocket] = []
        for _ in 0..<3 {
            let s = try RawSocket(port: e.port)
            s.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(status(await s.readResponse()) == 200)
            idle.append(s)
        }
        // The first one answered is idle the longest: the newcomer takes its place, and it is closed.
        let health = try await e.get("/healthz")
        #expect(status(health) == 200, "\(health)")
        #expect(await e.metric(Self.shedIdle) == 1)
        #expect(await idle[0].readToEnd().eof, "the connection idle the longest is closed")
        // The other two are still served.
        for s in idle.dropFirst() {
            s.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(status(await s.readResponse()) == 200)
        }
        idle.forEach { $0.close() }
        await e.stop()
    }

    @Test func closesConnectionsWithoutACompleteHeadAtTheFirstRequestTimeoutOnTheServersClock() async throws {
        let e = try await ClockedEndpoint.start {
            $0.firstRequestTimeout = .seconds(10)
        }
        let silent = try RawSocket(port: e.port)
        let slowloris = try RawSocket(port: e.port)
        slowloris.send("POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        let keepAlive = try RawSocket(port: e.port)
        keepAlive.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(status(await keepAlive.readResponse()) == 200)
        try await e.until(Self.open, is: 3)

        e.clock.advance(by: .seconds(10))
        #expect(await silent.readToEnd().eof, "closed by the server at the timeout")
        #expect(await slowloris.readToEnd().eof, "half a head is no head")
        try await e.until(Self.timeouts, is: 2)
        // A connection that completed a request is the keep-alive timeout's: still served.
        keepAlive.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(status(await keepAlive.readResponse()) == 200)
        #expect(await e.metric(Self.timeouts) == 2)
        [silent, slowloris, keepAlive].forEach { $0.close() }
        await e.stop()
    }

    @Test func refusesWithA503OnlyWhenEveryConnectionIsBusy() async throws {
        let e = try await ClockedEndpoint.start { $0.maxConnections = 2 }
        // Two requests whose bodies are on their way: busy, not to be shed.
        var busy: [RawSocket] = []
        for _ in 0..<2 {
            let s = try RawSocket(port: e.port)
            s.send(
                "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                    + "Content-Length: \(Self.batch.utf8.count)\r\n\r\n" + Self.batch.prefix(10))
            busy.append(s)
        }
        // Both heads read: their bodies' declared lengths are reserved.
        try await e.until("keeptrack_serve_body_bytes_in_flight", is: 2 * Self.batch.utf8.count)
        let refused = try await e.get("/healthz")
        #expect(status(refused) == 503, "\(refused)")
        #expect(body(refused).contains("maximum of 2 connections"))
        // Each body arrives: both are answered, and a new connection is served again.
        for s in busy {
            s.send(String(Self.batch.dropFirst(10)))
            #expect(status(await s.readResponse()) == 200)
        }
        #expect(status(try await e.get("/healthz")) == 200)
        busy.forEach { $0.close() }
        await e.stop()
    }

    @Test func raisesTheSoftDescriptorLimitToTheHardOneAtStart() async throws {
        let e = try await ClockedEndpoint.start { _ in }
        var limit = rlimit()
        try #require(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0)
        #expect(await e.metric("keeptrack_serve_descriptor_limit") == Int(limit.rlim_cur))
        // Linux caps the soft limit at fs.nr_open: an unlimited or larger hard limit is not reached.
        if limit.rlim_max <= 1 << 20 { #expect(limit.rlim_cur == limit.rlim_max) }
        let cap = TrackServer.Configuration.connectionCap(descriptors: Int(limit.rlim_cur))
        #expect(await e.metric("keeptrack_serve_connections_max") == cap)
        await e.stop()
    }
}
