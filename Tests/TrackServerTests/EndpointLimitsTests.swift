import Foundation
import Formats
import Geo
import KeepTrackTesting
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// One request over a fresh connection, exactly as written; the response as text. `guardSeconds`
/// only ends a hung read (a debug build under load may take long: it is not a measurement).
func exchange(_ endpoint: Endpoint, _ request: String, guardSeconds: Int = 15) async throws -> String {
    let socket = try RawSocket(port: endpoint.port, guardSeconds: guardSeconds)
    defer { socket.close() }
    socket.send(request)
    return await socket.readResponse()
}

/// `GET path` with the test token, over a fresh connection.
func get(_ endpoint: Endpoint, _ path: String, guardSeconds: Int = 15) async throws -> String {
    try await exchange(
        endpoint,
        "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
            + "Connection: close\r\n\r\n", guardSeconds: guardSeconds)
}

/// A response's body (after the head).
func body(_ response: String) -> String {
    response.range(of: "\r\n\r\n").map { String(response[$0.upperBound...]) } ?? ""
}

/// A response header's value.
func header(_ name: String, _ response: String) -> String? {
    let head = response.components(separatedBy: "\r\n\r\n").first ?? ""
    for line in head.components(separatedBy: "\r\n") {
        let parts = line.split(separator: ":", maxSplits: 1)
        if parts.count == 2, parts[0].lowercased() == name.lowercased() {
            return parts[1].trimmingCharacters(in: .whitespaces)
        }
    }
    return nil
}

@Suite("TrackServer: the endpoint's limits under hostile load", .serialized, .offThePool)
struct EndpointLimitsTests {
    // MARK: - Item 5: timeouts, the connection cap, an early 413

    @Test func closesAConnectionThatNeverCompletesItsHead() async throws {
        let endpoint = try await Endpoint.start { $0.idleTimeout = .milliseconds(200) }
        let idle = try RawSocket(port: endpoint.port)
        let partial = try RawSocket(port: endpoint.port)
        partial.send("POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        // Both are closed by the server, not left open until the client's guard expires: the partial
        // one may be reset rather than ended (its bytes not read yet when the timeout closed it, seen
        // once in a full run on a loaded machine).
        #expect(await idle.readToEnd().eof)
        #expect(await partial.closedByServer())
        idle.close()
        partial.close()
        await endpoint.stop()
    }

    @Test func answers408WhenABodyStallsAndClosesTheConnection() async throws {
        let endpoint = try await Endpoint.start { $0.bodyTimeout = .milliseconds(300) }
        let socket = try RawSocket(port: endpoint.port)
        socket.send(
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n" + String(repeating: " ", count: 100))
        let (text, eof) = await socket.readToEnd()
        #expect(status(text) == 408, "\(text)")
        #expect(eof)
        #expect(try await endpoint.server.store.count() == 0)
        socket.close()
        await endpoint.stop()
    }

    @Test func answers413FromContentLengthWithoutWaitingForTheBody() async throws {
        let endpoint = try await Endpoint.start()
        let socket = try RawSocket(port: endpoint.port)
        socket.send(
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
                + String(repeating: " ", count: 100))
        let (text, eof) = await socket.readToEnd()
        #expect(status(text) == 413, "\(text)")
        #expect(body(text).contains("larger than 8388608 bytes"))
        #expect(eof, "the connection is closed, not kept to drain a gigabyte")
        socket.close()
        await endpoint.stop()
    }

    @Test func refusesConnectionsOverTheCapWithA503() async throws {
        let endpoint = try await Endpoint.start { $0.maxConnections = 3 }
        // Three connections, each busy with a request whose body is on its way (idle ones, and ones
        // without a complete head, would be shed to make room: ConnectionFloodTests).
        var held: [RawSocket] = []
        for _ in 0..<3 {
            let s = try RawSocket(port: endpoint.port)
            s.send(
                "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                    + "Content-Length: 1000\r\n\r\n{")
            held.append(s)
        }
        try await withTimeout(30, "three bodies in flight") {
            while await endpoint.metric("keeptrack_serve_body_bytes_in_flight") != 3000 { await Task.yield() }
        }
        let refused = try await get(endpoint, "/healthz")
        #expect(status(refused) == 503, "\(refused)")
        #expect(header("Retry-After", refused) == "5")
        #expect(header("Content-Type", refused) == "application/json; charset=utf-8")
        #expect(
            body(refused)
                == #"{"error":{"code":"service-unavailable","message":"the server is serving its maximum of 3 connections; try again shortly"}}"#
        )
        #expect(await endpoint.metric("keeptrack_serve_connections_refused_total") == 1)
        // One held connection goes: a new one is served again (once the server saw it close).
        held.removeFirst().close()
        var answered = 0
        for _ in 0..<1000 where answered != 200 {
            answered = status(try await get(endpoint, "/healthz"))
        }
        #expect(answered == 200)
        held.forEach { $0.close() }
        await endpoint.stop()
    }

    @Test func answers400ToAHeadOverItsLimit() async throws {
        let endpoint = try await Endpoint.start()
        let r = try await exchange(
            endpoint,
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: "
                + String(repeating: "a", count: 100 << 10) + "\r\n\r\n")
        #expect(status(r) == 400, "\(r.prefix(200))")
        #expect(header("Content-Type", r) == "application/json; charset=utf-8")
        #expect(body(r) == #"{"error":{"code":"bad-request","message":"the request head is longer than 65536 bytes"}}"#)
        await endpoint.stop()
    }

    // MARK: - Item 6: bodies in memory, pages, the devices table

    @Test func refusesABodyOverTheBytesInFlightBudgetWithA503() async throws {
        let endpoint = try await Endpoint.start {
            $0.maxBodyBytes = 4096
            $0.maxBodyBytesInFlight = 4096
        }
        let batch =
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"lon":11.5}]}"#
        let padded = batch + String(repeating: " ", count: 3000 - batch.utf8.count)
        let slow = try RawSocket(port: endpoint.port)
        slow.send(
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Type: application/json\r\nContent-Length: 3000\r\n\r\n" + padded.prefix(1000))
        // Wait (request by request, bounded) until the first body holds its 3000 bytes.
        var reserved = 0
        for _ in 0..<1000 where reserved != 3000 {
            _ = try await get(endpoint, "/healthz")
            reserved = await endpoint.metric("keeptrack_serve_body_bytes_in_flight")
        }
        #expect(reserved == 3000)
        let second = String(repeating: " ", count: 2000)
        let busy = try await exchange(
            endpoint,
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer secret\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n" + second)
        #expect(status(busy) == 503, "\(busy)")
        #expect(header("Retry-After", busy) == "1")
        slow.send(String(padded.dropFirst(1000)))
        let first = await slow.readResponse()
        #expect(body(first) == "{\"accepted\":1,\"duplicates\":0}\n", "\(first)")
        #expect(await endpoint.metric("keeptrack_serve_body_bytes_in_flight") == 0)
        let again = try await exchange(
            endpoint,
            "POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Authorization: Bearer secret\r\nContent-Length: \(batch.utf8.count)\r\nConnection: close\r\n\r\n"
                + batch)
        #expect(body(again) == "{\"accepted\":0,\"duplicates\":1}\n", "\(again)")
        slow.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases, ["json", "geojson", "gpx"])
    func pagesThroughATrailWithCursors(kind: StoreKind, format: String) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let t0 = 1_715_679_000.0
        // 23 batch records (three share each time) and 7 OsmAnd ones (no sequence) at the same times,
        // metres apart (a plausible trail: nothing in it is an outlier the default trail leaves out).
        let batch = (1...23).map { (i: Int) -> TrailRecord in
            TrailRecord(
                device: "van", sequence: Int64(i), time: t0 + Double((i - 1) / 3), latitude: 48 + Double(i) * 1e-4,
                longitude: 11.5)
        }
        _ = try await endpoint.server.store.insert(batch, format: "json", received: t0)
        let osmand = (0..<7).map { (i: Int) -> TrailRecord in
            TrailRecord(
                device: "van", sequence: 0, time: t0 + Double(i), latitude: 48 + Double(3 * i + 1) * 1e-4,
                longitude: 11.5001)
        }
        _ = try await endpoint.server.store.insert(osmand, format: "osmand", received: t0)
        let all = try await endpoint.server.store.trail(device: "van")
        #expect(all.count == 30)

        var path: String? = "/v1/devices/van/trail?format=\(format)&limit=7"
        var pages: [String] = []
        while let p = path, pages.count < 10 {
            let response = try await get(endpoint, p)
            #expect(status(response) == 200, "\(response)")
            pages.append(body(response))
            path = header("Link", response).map { link in
                String(link.dropFirst().prefix(while: { $0 != ">" }))
            }
            if format != "gpx" {
                #expect(body(response).contains("\"next\":\"") == (path != nil))
            }
        }
        #expect(pages.count == 5)
        if format == "json" {
            // Every record once, in the store's order (OsmAnd's have no sequence: read the times).
            let times = pages.flatMap { $0.components(separatedBy: "\"time\":\"").dropFirst().map { $0.prefix(24) } }
            #expect(times.map(String.init) == all.map { ISOTime.string($0.time) })
        } else {
            let marker = format == "gpx" ? "<trkpt" : "\"\(ISOTime.string(t0).prefix(10))"
            #expect(pages.map { $0.components(separatedBy: marker).count - 1 }.reduce(0, +) >= 30)
        }
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func refusesPageSizesAndCursorsItDoesNotKnow(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        _ = try await endpoint.server.store.insert(walk(3, device: "van"), format: "osmand", received: 0)
        for (query, message) in [
            ("limit=0", "limit: '0' is not a number from 1 to 100000"),
            ("limit=100001", "limit: '100001' is not a number from 1 to 100000"),
            ("cursor=not-a-cursor", "cursor: not a cursor this server gave"),
        ] {
            let r = try await get(endpoint, "/v1/devices/van/trail?\(query)")
            #expect(status(r) == 400, "\(query)")
            #expect(body(r).contains(message), "\(r)")
        }
        #expect(status(try await get(endpoint, "/v1/devices/van/trail?limit=100000")) == 200)
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func listsDevicesFromTheDevicesTableAndAnswers404ForAnUnknownOne(
        kind: StoreKind
    ) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let store = endpoint.server.store
        _ = try await store.insert(walk(5, from: 100, device: "van"), format: "osmand", received: 1000)
        _ = try await store.insert(walk(5, from: 100, device: "van"), format: "osmand", received: 2000)  // duplicates
        _ = try await store.insert(
            walk(3, from: 50, device: "van") + walk(2, from: 500, device: "bike"), format: "osmand", received: 3000)
        #expect(
            try await store.devices() == [
                .init(id: "bike", points: 2, first: 500, last: 501, lastReceived: 3000),
                .init(id: "van", points: 8, first: 50, last: 104, lastReceived: 3000),
            ])
        #expect(try await store.device("nobody") == nil)
        #expect(try await store.count() == 10)
        let response = try await get(endpoint, "/v1/devices/nobody/trail")
        #expect(status(response) == 404)
        #expect(body(response).contains("no device 'nobody'"))
        await endpoint.stop()
    }

    @Test func theDevicesMigrationFillsTheTableFromStoredPoints() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A store as the first version left it: points only.
        let sql = """
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1-points');
            CREATE TABLE points (key TEXT PRIMARY KEY, device TEXT NOT NULL, seq INTEGER, kind TEXT NOT NULL,
                region TEXT, time REAL NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL,
                speed REAL, course REAL, format TEXT NOT NULL, received REAL NOT NULL) WITHOUT ROWID;
            CREATE INDEX points_trail ON points (device, time);
            INSERT INTO points VALUES ('id:van:1', 'van', 1, 'location', NULL, 10, 1, 2, NULL, NULL, NULL, NULL, NULL, 'json', 100);
            INSERT INTO points VALUES ('id:van:2', 'van', 2, 'location', NULL, 30, 1, 2, NULL, NULL, NULL, NULL, NULL, 'json', 90);
            INSERT INTO points VALUES ('at:bike:location:20000:', 'bike', NULL, 'location', NULL, 20, 1, 2, NULL, NULL, NULL, NULL, NULL, 'osmand', 50);
            """
        try runSQLite(dir + "/old.sqlite", sql)
        let store = try SQLiteTrackStore(path: dir + "/old.sqlite")
        #expect(
            try await store.devices() == [
                .init(id: "bike", points: 1, first: 20, last: 20, lastReceived: 50),
                .init(id: "van", points: 2, first: 10, last: 30, lastReceived: 100),
            ])
        _ = try await store.insert(walk(1, from: 40, device: "bike"), format: "osmand", received: 60)
        #expect(try await store.device("bike") == .init(id: "bike", points: 2, first: 20, last: 40, lastReceived: 60))

        // `serve`'s start on a store that needs upgrading says so (issue 14, item 6); once, and
        // never for an up-to-date or a new store.
        try FileManager.default.removeItem(atPath: dir + "/old.sqlite")
        try runSQLite(dir + "/old.sqlite", sql)
        let reports = Mutex<[SQLiteTrackStore.Upgrade?]>([])
        _ = try SQLiteTrackStore(path: dir + "/old.sqlite", progress: { u in reports.withLock { $0.append(u) } })
        let said = reports.withLock { $0 }
        #expect(
            said.first
                == SQLiteTrackStore.Upgrade(
                    path: dir + "/old.sqlite",
                    migrations: [
                        "v2-devices-and-pages", "v3-validity-and-attributes", "v4-credentials", "v5-fleet",
                        "v6-device-secrets",
                        "v7-visits-and-trips", "v8-stored-stops", "v9-events", "v10-outliers", "v11-statistics",
                        "v12-shares", "v13-place-names", "v14-homeassistant-cursors", "v15-events-presence",
                        "v16-device-overspeed", "v17-latest-not-null-island",
                    ], points: 3, seconds: 0), "\(said)")
        #expect(said.last == .some(nil), "the end is reported when the upgrade is done")
        reports.withLock { $0 = [] }
        _ = try SQLiteTrackStore(path: dir + "/old.sqlite", progress: { u in reports.withLock { $0.append(u) } })
        _ = try SQLiteTrackStore(path: dir + "/new.sqlite", progress: { u in reports.withLock { $0.append(u) } })
        #expect(reports.withLock { $0 }.isEmpty)
    }

    // MARK: - Item 7: fault injection on request only

    @Test func injectsFaultsOnlyWhenStartedWithFaultInjection() async throws {
        var startFaults = Faults()
        startFaults.failNext = 1
        let endpoint = try await Endpoint.start(faults: startFaults) { $0.faultInjection = false }
        #expect(status(try await get(endpoint, "/v1/devices")) == 200)
        let put = try await exchange(
            endpoint,
            "PUT /v1/faults HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"refuse\":true} ")
        #expect(status(put) == 404, "\(put)")
        #expect(status(try await get(endpoint, "/healthz")) == 200)
        await endpoint.stop()

        let open = try await Endpoint.start(token: nil) { $0.faultInjection = false }
        let anyone = try await exchange(
            open,
            "PUT /v1/faults HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + "Content-Length: 16\r\nConnection: close\r\n\r\n{\"refuse\":true} ")
        #expect(status(anyone) == 404)
        await open.stop()
    }

    @Test(arguments: [(101, 400), (200, 400), (399, 400), (400, 200), (503, 200), (599, 200), (600, 400)])
    func injectsOnlyErrorStatuses(failStatus: Int, answer: Int) async throws {
        let endpoint = try await Endpoint.start()
        let json = "{\"failNext\":1,\"failStatus\":\(failStatus)}"
        let r = try await exchange(
            endpoint,
            "PUT /v1/faults HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Length: \(json.utf8.count)\r\nConnection: close\r\n\r\n" + json)
        #expect(status(r) == answer, "\(r)")
        if answer == 400 { #expect(body(r).contains("failStatus must be an HTTP error status (400-599)")) }
        await endpoint.stop()
    }

    @Test(
        arguments: [
            ("127.0.0.1", nil, false), ("::1", nil, false), ("localhost", nil, false), ("127.0.0.2", nil, false),
            ("0.0.0.0", nil, true), ("::", nil, true), ("192.168.1.20", nil, true), ("0.0.0.0", "s3cret", false),
        ] as [(String, String?, Bool)])
    func warnsWhenListeningBeyondLoopbackWithoutAToken(host: String, token: String?, warns: Bool) {
        #expect(TrackServer.isExposed(host: host, token: token) == warns)
    }

    // MARK: - Item 8: ids that need escaping

    @Test(arguments: StoreKind.allCases, ["van 1", "a/b", "quote\"d", "Zürich-🚐", "100%", "a+b", "x?y#z"])
    func readsBackDeviceIdsThatNeedEscaping(kind: StoreKind, id: String) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let records = numbered(walk(3, device: id))
        _ = try await endpoint.server.store.insert(records, format: "json", received: 0)
        let encoded = id.utf8.map { b -> String in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
                ? String(UnicodeScalar(b)) : String(format: "%%%02X", b)
        }.joined()
        let r = try await get(endpoint, "/v1/devices/\(encoded)/trail?format=json")
        #expect(status(r) == 200, "\(r)")
        let page = try JSONBatch.decode(Array(body(r).utf8), now: 2e9)
        #expect(page.device == id)
        #expect(page.records.count == 3)
        let map = try await get(endpoint, "/map/svg?device=\(encoded)")
        #expect(status(map) == 200)
        #expect(body(map).contains("3 points"))
        await endpoint.stop()
    }

    @Test func refusesADeviceIdThatIsNotPercentEncodedUTF8() async throws {
        let endpoint = try await Endpoint.start()
        #expect(status(try await get(endpoint, "/v1/devices/%FF%FE/trail")) == 400)
        #expect(status(try await get(endpoint, "/v1/devices/%zz/trail")) == 400)
        await endpoint.stop()
    }
}
