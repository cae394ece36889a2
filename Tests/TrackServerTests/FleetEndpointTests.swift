import Formats
import Foundation
import Geo
import KeepTrackTesting
import Logging
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 15, items 4-6: per-device credentials, fleet queries and retention, through a real endpoint
/// on loopback with its own SQLite store.
@Suite("Endpoint: fleet credentials, queries and retention", .serialized)
struct FleetEndpointTests {
    func batch(
        _ device: String, seq: Int = 1, time: String = "2024-05-14T09:30:00Z", lat: Double = 48.1,
        lon: Double = 11.5
    ) -> String {
        #"{"device":"\#(device)","records":[{"seq":\#(seq),"kind":"location","time":"\#(time)","lat":\#(lat),"lon":\#(lon)}]}"#
    }

    /// A device token writes and reads only its own device (403 otherwise); the admin token does
    /// everything; a token nobody has is 401; tokens are stored as digests only.
    @Test(arguments: StoreKind.allCases) func aDeviceTokenWritesAndReadsOnlyItsOwnDevice(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let store = endpoint.server.store
        let van = try await store.addCredential(device: "van1", now: 1_715_679_000)
        #expect(van.count == 43)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1"), token: van).status == 200)
        let other = try await raw.send(.POST, "/v1/locations", body: batch("van2"), token: van)
        #expect(other.status == 403)
        #expect(other.body.contains("'van1'") && other.body.contains("'van2'"))
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van2")).status == 200)  // admin
        #expect(try await raw.send(.GET, "/v1/devices/van1/trail", token: van).status == 200)
        #expect(try await raw.send(.GET, "/v1/devices/van2/trail", token: van).status == 403)
        let listed = try await raw.send(.GET, "/v1/devices", token: van)
        #expect(listed.body.contains("\"van1\"") && !listed.body.contains("van2"))
        let all = try await raw.send(.GET, "/v1/devices")
        #expect(all.body.contains("\"van1\"") && all.body.contains("\"van2\""))
        let latest = try await raw.send(.GET, "/v1/devices/latest", token: van)
        #expect(latest.body.contains("\"van1\"") && !latest.body.contains("van2"))
        let positions = try await raw.send(.GET, "/v1/positions?bbox=11,48,12,49", token: van)
        #expect(positions.body.contains("\"van1\"") && !positions.body.contains("van2"))
        #expect(try await raw.send(.GET, "/v1/positions?bbox=11,48,12,49&device=van2", token: van).status == 403)
        #expect(try await raw.send(.GET, "/map/svg?device=van2", token: van).status == 403)
        #expect(try await raw.send(.PUT, "/v1/faults", body: "{}", token: van).status == 403)
        #expect(try await raw.send(.GET, "/v1/devices", token: "guess").status == 401)
        // Revoked: the token is no longer anyone's.
        #expect(try await store.revokeCredential(device: "van1", at: 1_715_679_050) == 0)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seq: 2), token: van).status == 401)
        // What is stored is the digest, never the token (SQLite: not in any of its files).
        let again = try await store.addCredential(device: "van1", now: 1_715_679_100)
        await raw.close()
        guard kind == .sqlite else { return await endpoint.stop() }
        await endpoint.stop(keepingFiles: true)
        let files = try FileManager.default.contentsOfDirectory(atPath: endpoint.directory)
        for file in files {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: endpoint.directory + "/" + file))
            #expect(bytes.range(of: Data(again.utf8)) == nil, "\(file) holds the token")
        }
        try? FileManager.default.removeItem(atPath: endpoint.directory)
    }

    /// A token's digest is what the stores already hold, whatever computes it: SHA-256 in lower-case
    /// hex (FIPS 180-2's example, "abc").
    @Test func aTokensDigestIsItsSHA256InHex() {
        #expect(
            DeviceTokens.digest(token: "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// With device tokens and no admin token, requests still need a credential; with neither, the
    /// endpoint stays open (the README's first command).
    @Test(arguments: StoreKind.allCases) func deviceTokensAloneTurnAuthenticationOn(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind, token: nil)
        let raw = Raw(endpoint: endpoint)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1"), token: nil).status == 200)
        let van = try await endpoint.server.store.addCredential(device: "van1", now: 1_715_679_000)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seq: 2), token: nil).status == 401)
        #expect(try await raw.send(.GET, "/v1/devices", token: nil).status == 401)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seq: 2), token: van).status == 200)
        #expect(try await raw.send(.GET, "/healthz", token: nil).status == 200)
        await raw.close()
        await endpoint.stop()
    }

    /// OwnTracks' HTTP Basic maps onto the same table: the device is `user/device` as the endpoint
    /// derives it, the password that device's token, the Basic user its user.
    @Test(arguments: StoreKind.allCases) func ownTracksBasicAuthUsesTheDeviceToken(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let token = try await endpoint.server.store.addCredential(device: "anna/phone", now: 1_715_679_000)
        let location = #"{"_type":"location","tst":1715679000,"lat":48.1,"lon":11.5}"#
        func basic(_ user: String, _ password: String) -> (String, String) {
            ("Authorization", "Basic " + Data("\(user):\(password)".utf8).base64EncodedString())
        }
        let phone = [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location, headers: phone + [basic("anna", token)],
                token: nil
            ).status == 200)
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location,
                headers: [("X-Limit-U", "anna"), ("X-Limit-D", "tablet"), basic("anna", token)],
                token: nil
            ).status == 403)
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location, headers: phone + [basic("bob", token)],
                token: nil
            ).status == 403)
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location, headers: phone + [basic("anna", "guess")],
                token: nil
            ).status == 401)
        #expect(try await endpoint.server.store.device("anna/phone")?.points == 1)
        await raw.close()
        await endpoint.stop()
    }

    /// OsmAnd carries no credential: a device with a token is known (as a device registered in
    /// Traccar) and stored; an unknown id gets Traccar's 400 with an empty body (404 for the JSON
    /// form), unless `--open-registration`.
    @Test(arguments: StoreKind.allCases, [false, true])
    func osmAndFromUnknownDevicesNeedsOpenRegistration(kind: StoreKind, open: Bool) async throws {
        let endpoint = try await Endpoint.start(store: kind) { $0.openRegistration = open }
        let raw = Raw(endpoint: endpoint)
        _ = try await endpoint.server.store.addCredential(device: "known", now: 1_715_679_000)
        #expect(try await raw.send(.GET, "/?id=known&lat=48.1&lon=11.5&timestamp=1715679000", token: nil).status == 200)
        let unknown = try await raw.send(.GET, "/?id=stranger&lat=48.1&lon=11.5&timestamp=1715679000", token: nil)
        #expect(unknown.status == (open ? 200 : 400))
        #expect(unknown.body.isEmpty)
        let json =
            #"{"location":{"timestamp":"2024-05-14T09:32:00Z","coords":{"latitude":60.2,"longitude":30.2}},"device_id":"stranger2"}"#
        #expect(
            try await raw.send(
                .POST, "/", body: json, headers: [("Content-Type", "application/json")],
                token: nil
            ).status == (open ? 200 : 404))
        // A credential still counts: the admin token stores any id, a wrong one is 401.
        #expect(try await raw.send(.GET, "/?id=other&lat=48.1&lon=11.5&timestamp=1715679000").status == 200)
        #expect(
            try await raw.send(.GET, "/?id=other&lat=48.1&lon=11.5&timestamp=1715679001", token: "guess").status == 401)
        #expect(
            try await endpoint.server.store.devices().map(\.id).sorted()
                == (open ? ["known", "other", "stranger", "stranger2"] : ["known", "other"]))
        await raw.close()
        await endpoint.stop()
    }

    /// The latest position per device is the newest valid one, whatever order batches arrive in,
    /// and never a 0,0.
    @Test(arguments: StoreKind.allCases) func latestIsEachDevicesNewestValidPosition(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        #expect(
            try await raw.send(
                .POST, "/v1/locations", body: batch("a", seq: 2, time: "2024-05-14T10:00:00Z", lat: 48.2)
            ).status == 200)
        #expect(
            try await raw.send(
                .POST, "/v1/locations", body: batch("a", seq: 1, time: "2024-05-14T09:00:00Z", lat: 48.1)
            ).status == 200)
        #expect(try await raw.send(.POST, "/v1/locations", body: batch("b", lat: 47.5, lon: 10.25)).status == 200)
        // Invalid: stored, not the latest.
        #expect(try await raw.send(.GET, "/?id=a&lat=40&lon=10&timestamp=1715684400&valid=false").status == 200)
        // A phone's 0,0 ("null island", no position): stored and marked, never the latest.
        #expect(try await raw.send(.GET, "/?id=a&lat=0&lon=0&timestamp=1715684500").status == 200)
        let latest = try await endpoint.server.store.latest()
        #expect(latest.map(\.device) == ["a", "b"])
        #expect(latest[0].latitude == 48.2 && latest[0].time == ISOTime.parse("2024-05-14T10:00:00Z"))
        #expect(latest[0].points == 4)
        let body = try await raw.send(.GET, "/v1/devices/latest").body
        #expect(
            body.contains(#"{"id":"a","time":"2024-05-14T10:00:00.000Z","lat":48.2000000,"lon":11.5000000,"points":4"#))
        #expect(body.contains(#"{"id":"b","time":"2024-05-14T09:30:00.000Z","lat":47.5000000,"lon":10.2500000"#))
        let map = try await raw.send(.GET, "/map/svg").body
        #expect(map.contains("Latest positions (2 devices)"))
        #expect(map.components(separatedBy: "<circle class=\"device\"").count == 3)
        await raw.close()
        await endpoint.stop()
    }

    /// Random points of several devices: a box and a circle return exactly the points a brute-force
    /// scan finds, in time order, each once across pages, within the time range.
    @Test(arguments: StoreKind.allCases) func boxAndCircleQueriesFindExactlyThePointsInside(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        var rng = SeededRandom(seed: 7)
        let t0 = 1_715_679_000.0
        var records: [TrailRecord] = []
        for i in 0..<3000 {
            records.append(
                TrailRecord(
                    device: "d\(i % 7)", sequence: Int64(i), time: t0 + Double(i),
                    latitude: 48 + Double.random(in: 0...0.1, using: &rng),
                    longitude: 11.45 + Double.random(in: 0...0.1, using: &rng)))
        }
        for d in 0..<7 {
            _ = try await endpoint.server.store.insert(
                records.filter { $0.device == "d\(d)" }, format: "json", received: t0)
        }
        func all(_ query: String) async throws -> [(String, Double, Double)] {
            var out: [(String, Double, Double)] = []
            var cursor: String?
            repeat {
                let r = try await raw.send(
                    .GET, "/v1/positions?\(query)&limit=97" + (cursor.map { "&cursor=\($0)" } ?? ""))
                #expect(r.status == 200, "\(r.body)")
                let json = try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as! [String: Any]
                for p in json["positions"] as! [[String: Any]] {
                    out.append((p["device"] as! String, p["lat"] as! Double, ISOTime.parse(p["time"] as! String)!))
                }
                cursor = json["next"] as? String
            } while cursor != nil
            return out
        }
        let from = t0 + 500, to = t0 + 2500
        let box = try await all("bbox=11.48,48.02,11.51,48.06&from=\(Int(from))&to=\(Int(to))")
        let expectedBox = records.filter {
            $0.longitude >= 11.48 && $0.longitude <= 11.51 && $0.latitude >= 48.02 && $0.latitude <= 48.06
                && $0.time >= from && $0.time <= to
        }
        #expect(box.count == expectedBox.count && box.count > 50)
        #expect(box.map(\.2) == expectedBox.map(\.time))
        #expect(box.map(\.0) == expectedBox.map(\.device))
        // A box of more cells than are listed one by one (100 × 200): each band's cells as one range.
        let wide = try await all("bbox=11,47,12,49&from=\(Int(from))&to=\(Int(to))")
        #expect(wide.map(\.2) == records.filter { $0.time >= from && $0.time <= to }.map(\.time))
        let centre = Coordinate(latitude: 48.05, longitude: 11.5)
        let near = try await all("near=48.05,11.5&radius=2500")
        let expectedNear = records.filter {
            Geodesy.haversineDistance(centre, Coordinate(latitude: $0.latitude, longitude: $0.longitude)) <= 2500
        }
        #expect(near.count == expectedNear.count && near.count > 100)
        #expect(near.map(\.2) == expectedNear.map(\.time))
        await raw.close()
        await endpoint.stop()
    }

    /// Each bad parameter gets a 400 that names it and what is wrong.
    @Test func badPositionQueriesGetA400ThatNamesTheProblem() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        let cases: [(String, String)] = [
            ("", "an area is required"),
            ("bbox=1,2,3", "bbox: '1,2,3' is not four numbers WEST,SOUTH,EAST,NORTH"),
            ("bbox=11,49,12,48", "bbox: south 49.0 is north of north 48.0"),
            ("bbox=12,48,11,49", "bbox: west 12.0 is east of east 11.0"),
            ("bbox=-181,48,11,49", "bbox: west -181.0 is out of range [-180, 180]"),
            ("bbox=11,48,12,91", "bbox: north 91.0 is out of range [-90, 90]"),
            ("bbox=11,48,12,nan", "is not four numbers"),
            ("bbox=11,48,12,49&near=48,11&radius=5", "give one of them, not both"),
            ("bbox=11,48,12,49&radius=5", "radius: only with near"),
            ("near=48", "near: '48' is not LAT,LON"),
            ("near=95,11&radius=5", "near: latitude 95.0 is out of range [-90, 90]"),
            ("near=48,11", "radius: required with near"),
            ("near=48,11&radius=0", "radius: '0' is not a distance in metres from 1 to 1000000"),
            ("near=48,11&radius=2000000", "radius: '2000000' is not a distance"),
            (
                "bbox=11,48,12,49&from=yesterday",
                "from: 'yesterday' is neither ISO 8601 (a time in UTC or with an offset"
            ),
            ("bbox=11,48,12,49&from=2025-02-30", "from: '2025-02-30' is neither"),
            ("bbox=11,48,12,49&from=2000&to=1000", "from: 2000 is after to: 1000"),
            ("bbox=11,48,12,49&limit=0", "limit: '0' is not a number from 1 to 100000"),
            ("bbox=11,48,12,49&cursor=zz", "cursor: not a cursor this server gave"),
        ]
        for (query, message) in cases {
            let r = try await raw.send(.GET, "/v1/positions?\(query)")
            #expect(r.status == 400, "\(query)")
            #expect(r.body.contains(message), "\(query): \(r.body)")
        }
        await raw.close()
        await endpoint.stop()
    }
}

/// Retention: bounded batches, the devices table kept true, and the service driven by a manual clock.
@Suite("TrackStore: retention")
struct RetentionTests {
    let t0 = 1_715_679_000.0

    /// A fresh store of `kind`, and what removes it.
    func store(_ kind: StoreKind) async throws -> (any TrackStore, @Sendable () async -> Void) {
        switch kind {
        case .sqlite:
            let dir = temporaryDirectory()
            let store = try SQLiteTrackStore(path: dir + "/endpoint.sqlite")
            return (store, { try? FileManager.default.removeItem(atPath: dir) })
        case .postgres:
            let cluster = try await Postgres.shared()
            let name = try await offThePool { try cluster.createDatabase() }
            let store = try await openTrackStore(cluster.url(name))
            return (
                store,
                {
                    await store.close()
                    _ = try? await offThePool { try cluster.dropDatabase(name) }
                }
            )
        }
    }

    @Test(arguments: StoreKind.allCases)
    func deletesOldPointsInBoundedBatchesAndKeepsTheDevicesTableTrue(kind: StoreKind) async throws {
        let (store, remove) = try await store(kind)
        // "old" only has old points; "mixed" has 250 old and 10 new; its newest valid one is old
        // and its new ones invalid.
        let old = walk(120, from: t0, device: "old")
        var mixed = walk(260, from: t0, device: "mixed")
        for i in 250..<260 {
            mixed[i].time = t0 + 10_000 + Double(i)
            mixed[i].valid = false
        }
        let fresh = walk(5, from: t0 + 20_000, device: "fresh")
        for records in [old, mixed, fresh] {
            _ = try await store.insert(numbered(records, from: 0), format: "json", received: t0)
        }
        let cutoff = t0 + 5000
        var batches: [Int] = []
        while true {
            let n = try await store.deleteExpired(before: cutoff, limit: 100)
            if n == 0 { break }
            batches.append(n)
        }
        #expect(batches.allSatisfy { $0 <= 100 })
        let deleted: Int = batches.reduce(0, +)
        #expect(deleted == 120 + 250)
        let devices = try await store.devices()
        #expect(devices.map(\.id) == ["fresh", "mixed"])
        #expect(devices[1].points == 10 && devices[1].first == t0 + 10_250)
        #expect(try await store.count() == 15)
        let latest = try await store.latest()
        #expect(latest.map(\.device) == ["fresh"], "mixed has no valid point left")
        #expect(try await store.trail(device: "mixed", includeInvalid: true).count == 10)
        await remove()
    }

    @Test(arguments: StoreKind.allCases)
    func theServiceSweepsAtStartAndThenEveryIntervalOfItsClock(kind: StoreKind) async throws {
        let (store, remove) = try await store(kind)
        let clock = ManualClock(now: .init(secondsSince1970: t0 + 100 * 86_400))
        _ = try await store.insert(numbered(walk(10, from: t0, device: "a"), from: 0), format: "json", received: t0)
        let (sweeps, continuation) = AsyncStream.makeStream(of: Int.self)
        let service = RetentionService(
            store: store, retention: 90 * 86_400, interval: .seconds(3600), batch: 3,
            clock: clock, logger: Logger(label: "test"),
            onSweep: { continuation.yield($0) })
        let task = Task { try await service.run() }
        var it = sweeps.makeAsyncIterator()
        #expect(await it.next() == 10)
        #expect(try await store.count() == 0)
        // Points 89.9 days old at the next sweep: kept; a day later, gone.
        _ = try await store.insert(
            numbered(walk(4, from: t0 + 10.1 * 86_400, device: "b"), from: 0), format: "json", received: t0)
        clock.advance(by: .seconds(3600))
        #expect(await it.next() == 0)
        #expect(try await store.count() == 4)
        clock.advance(by: .seconds(86_400))
        #expect(await it.next() == 4)
        #expect(try await store.devices().isEmpty)
        task.cancel()
        _ = try? await task.value
        await remove()
    }
}
