import AsyncHTTPClient
import Formats
import Foundation
import KeepTrackTesting
import NIOCore
import NIOHTTP1
import Testing
import TrackServer
import TrackServerTesting

/// Issue 28, item 3: the OwnTracks Recorder's read API on `serve`, spoken as the OwnTracks Frontend
/// speaks it (its `src/api.js`: the requests, their parameter order, and the members its store and
/// map read), through a real endpoint on loopback, on both stores.
@Suite("Endpoint: the OwnTracks Recorder's read API", .serialized)
struct RecorderAPITests {
    /// A request and its whole answer, headers included.
    struct Client {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let endpoint: Endpoint

        func send(
            _ method: HTTPMethod = .GET, _ path: String, body: String? = nil, headers: [(String, String)] = [],
            token: String? = "secret"
        ) async throws -> (status: Int, headers: HTTPHeaders, body: String) {
            var request = HTTPClientRequest(url: endpoint.url(path))
            request.method = method
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            for (k, v) in headers { request.headers.add(name: k, value: v) }
            if let body { request.body = .bytes(Array(body.utf8)) }
            let response = try await client.execute(request, timeout: .seconds(120))
            let text = try await response.body.collect(upTo: 64 << 20)
            return (Int(response.status.code), response.headers, String(buffer: text))
        }

        /// The answer's JSON (an object or an array), or a failed expectation.
        func json(_ path: String, token: String? = "secret", headers: [(String, String)] = []) async throws -> Any {
            let r = try await send(.GET, path, headers: headers, token: token)
            #expect(r.status == 200, "\(path): \(r.status) \(r.body)")
            #expect(r.headers.first(name: "Content-Type")?.hasPrefix("application/json") == true)
            return try JSONSerialization.jsonObject(with: Data(r.body.utf8))
        }

        func close() async { try? await client.shutdown() }
    }

    /// An OwnTracks location as the app sends it, with the members the Frontend shows.
    static func ownTracks(tst: Int, lat: Double, lon: Double, batt: Int = 87) -> String {
        #"{"_type":"location","tst":\#(tst),"lat":\#(lat),"lon":\#(lon),"acc":12,"alt":520,"vac":3,"vel":18,"#
            + #""cog":90,"batt":\#(batt),"tid":"AP","conn":"w","BSSID":"aa:bb:cc:dd:ee:ff","SSID":"home"}"#
    }

    static let day = 1_715_644_800  // 2024-05-14T00:00:00Z

    /// Stores anna's phone (OwnTracks HTTP, three points on 2024-05-14, one the day before), bob's
    /// tablet (one point) and `van-1` (our JSON batch, two points: a device id without a `/`).
    static func seed(_ c: Client) async throws {
        let points: [(String, String, Int, Double, Double)] = [
            ("anna", "phone", day - 3600, 48.10, 11.50), ("anna", "phone", day + 9 * 3600, 48.11, 11.51),
            ("anna", "phone", day + 10 * 3600, 48.12, 11.52), ("anna", "phone", day + 11 * 3600, 48.13, 11.53),
            ("bob", "tablet", day + 8 * 3600, 52.5, 13.4),
        ]
        for (user, device, tst, lat, lon) in points {
            let r = try await c.send(
                .POST, "/owntracks", body: ownTracks(tst: tst, lat: lat, lon: lon),
                headers: [("X-Limit-U", user), ("X-Limit-D", device)])
            #expect(r.status == 200, "\(r.body)")
        }
        let batch =
            #"{"device":"van-1","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","#
            + #""lat":48.2,"lon":11.6},{"seq":2,"kind":"location","#
            + #""time":"2024-05-14T09:31:00Z","lat":48.21,"lon":11.61,"hAcc":5.4,"speed":10}]}"#
        #expect(try await c.send(.POST, "/v1/locations", body: batch).status == 200)
    }

    /// The calls of the Frontend's `loadData` (`src/store/actions.js`), in its order and with its
    /// parameters as `URLSearchParams` writes them, and the members it reads from each answer:
    /// `version`; `results`; an array of `username`, `device`, `topic`, `lat`, `lon`, `acc`, `tst`,
    /// `batt`, `vel`, `alt`; `data` sorted by `tst`.
    @Test(arguments: StoreKind.allCases) func answersTheFrontendsRequestsWithTheMembersItReads(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let c = Client(endpoint: endpoint)
        try await Self.seed(c)

        let version = try await c.json("/api/0/version") as? [String: Any]
        #expect((version?["version"] as? String)?.isEmpty == false)

        let users = (try await c.json("/api/0/list") as? [String: Any])?["results"] as? [String]
        #expect(users == ["anna", "bob", "van-1"])
        var devices: [String: [String]] = [:]
        for user in users ?? [] {
            devices[user] = (try await c.json("/api/0/list?user=\(user)") as? [String: Any])?["results"] as? [String]
        }
        #expect(devices == ["anna": ["phone"], "bob": ["tablet"], "van-1": ["van-1"]])

        let last = try await c.json("/api/0/last") as? [[String: Any]] ?? []
        #expect(last.count == 3)
        let anna = last.first { $0["username"] as? String == "anna" }
        #expect(anna?["device"] as? String == "phone")
        #expect(anna?["topic"] as? String == "owntracks/anna/phone")
        #expect(anna?["_type"] as? String == "location")
        #expect(anna?["tst"] as? Int == Self.day + 11 * 3600)
        #expect(anna?["lat"] as? Double == 48.13 && anna?["lon"] as? Double == 11.53)
        #expect(anna?["acc"] as? Int == 12 && anna?["alt"] as? Int == 520 && anna?["vel"] as? Int == 18)
        #expect(anna?["batt"] as? Int == 87)  // a number, as the app sent it
        #expect(anna?["tid"] as? String == "AP" && anna?["conn"] as? String == "w")
        #expect(anna?["SSID"] as? String == "home" && anna?["BSSID"] as? String == "aa:bb:cc:dd:ee:ff")
        #expect(anna?["isotst"] as? String == "2024-05-14T11:00:00Z")
        #expect(anna?["disptst"] as? String == "2024-05-14 11:00:00")
        #expect((anna?["ghash"] as? String)?.count == 7)
        let van = last.first { $0["username"] as? String == "van-1" }
        #expect(van?["device"] as? String == "van-1" && van?["topic"] as? String == "owntracks/van-1/van-1")
        #expect(van?["acc"] as? Int == 5 && van?["vel"] as? Int == 36)  // 10 m/s is 36 km/h
        #expect(van?["tid"] as? String == "VA")

        // The Frontend's getLastLocations(user, device), then its history call for the selected day.
        let one = try await c.json("/api/0/last?user=anna&device=phone") as? [[String: Any]]
        #expect(one?.count == 1 && one?.first?["device"] as? String == "phone")
        #expect((try await c.json("/api/0/last?user=anna") as? [[String: Any]])?.count == 1)
        let history =
            try await c.json(
                "/api/0/locations?from=2024-05-14T00%3A00%3A00&to=2024-05-14T23%3A59%3A59"
                    + "&user=anna&device=phone&format=json"
            )
            as? [String: Any]
        let data = history?["data"] as? [[String: Any]] ?? []
        #expect(history?["count"] as? Int == 3 && history?["status"] as? Int == 200)
        #expect(data.map { $0["tst"] as? Int } == [9, 10, 11].map { Self.day + $0 * 3600 })
        #expect(data.map { $0["lat"] as? Double } == [48.11, 48.12, 48.13])
        #expect(data.allSatisfy { $0["_type"] as? String == "location" && $0["acc"] as? Int == 12 })
        #expect(data.first?["isorcv"] as? String == "2024-05-14T09:00:00Z")
        let vanDay =
            try await c.json(
                "/api/0/locations?from=2024-05-14T00:00:00&to=2024-05-14T23:59:59"
                    + "&user=van-1&device=van-1&format=json") as? [String: Any]
        #expect((vanDay?["data"] as? [[String: Any]])?.count == 2)
        await c.close()
        await endpoint.stop()
    }

    /// The Recorder's other ways in: `limit` (the last N, newest first), `fields`, a form body
    /// (`curl -d user=...`), `X-Limit-*` headers (which win), times in every form it reads, and
    /// answers written across several store pages.
    @Test(arguments: StoreKind.allCases) func takesTheRecordersOtherParameterForms(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind) { $0.defaultPageSize = 2 }
        let c = Client(endpoint: endpoint)
        try await Self.seed(c)
        let base = "/api/0/locations?user=anna&device=phone"
        func tsts(_ path: String, _ body: String? = nil, headers: [(String, String)] = []) async throws -> [Int] {
            let r = try await c.send(
                body == nil ? .GET : .POST, path, body: body,
                headers: headers + (body == nil ? [] : [("Content-Type", "application/x-www-form-urlencoded")]))
            #expect(r.status == 200, "\(path): \(r.body)")
            let object = try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any]
            let data = object?["data"] as? [[String: Any]] ?? []
            #expect(object?["count"] as? Int == data.count)
            return data.compactMap { $0["tst"] as? Int }
        }
        let all = [-1, 9, 10, 11].map { Self.day + $0 * 3600 }
        #expect(try await tsts(base + "&from=2024-05-01&to=2024-06") == all)
        #expect(try await tsts(base + "&from=2024-05&to=2024-05-14t10") == Array(all.prefix(3)))
        #expect(try await tsts(base + "&from=2024-05-14T09:00&to=2024-05-14T10:00:00.000Z") == [all[1], all[2]])
        #expect(try await tsts(base + "&from=2024-5-14T9&to=2024-05-14T23:59:59Z") == Array(all.suffix(3)))
        #expect(try await tsts(base + "&from=2024-05-01&to=2024-06-01&limit=2") == [all[3], all[2]])
        #expect(try await tsts(base + "&from=2024-05-01&to=2024-06-01&limit=9") == all.reversed())
        #expect(try await tsts("/api/0/locations", "user=anna&device=phone&from=2024-05-01&to=2024-06-01") == all)
        #expect(
            try await tsts(
                "/api/0/locations?user=bob&device=tablet&from=2024-05-01&to=2024-06-01",
                headers: [("X-Limit-User", "anna"), ("X-Limit-Device", "phone")]) == all)
        // The Recorder lowercases user and device.
        #expect(try await tsts("/api/0/locations?user=Anna&device=PHONE&from=2024-05-01&to=2024-06-01") == all)
        let fields = try await c.json(base + "&from=2024-05-01&to=2024-06-01&fields=tst,lat,%20batt") as? [String: Any]
        let first = (fields?["data"] as? [[String: Any]])?.first
        #expect(first.map { Set($0.keys) } == ["tst", "lat", "batt"])
        let lastFields = try await c.json("/api/0/last?fields=username,tst") as? [[String: Any]]
        #expect(lastFields?.allSatisfy { Set($0.keys) == ["username", "tst"] } == true)
        // Without from and to: the last 6 hours up to now, as the Recorder (nothing, for 2024's points).
        #expect(try await tsts(base) == [])
        await c.close()
        await endpoint.stop()
    }

    /// A day of 5,001 locations read a page of 1,000 at a time: every one, in order, counted; the
    /// last 1,500 newest first across pages; the transitions of the day left out, as the Recorder does.
    @Test(arguments: StoreKind.allCases) func writesALongDayAcrossManyStorePages(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind) { $0.defaultPageSize = 1_000 }
        let c = Client(endpoint: endpoint)
        var records: [TrailRecord] = []
        for i in 0..<5_001 {
            let time = Double(Self.day + i * 10), latitude = 48 + Double(i) * 1e-5
            records.append(
                TrailRecord(
                    device: "anna/phone", sequence: Int64(i + 1), time: time, latitude: latitude, longitude: 11.5))
        }
        records.append(
            TrailRecord(
                device: "anna/phone", sequence: 5_002, kind: .enter, region: "home",
                time: Double(Self.day + 5), latitude: 48, longitude: 11.5))
        _ = try await endpoint.server.store.insert(records, format: "json", received: Double(Self.day + 60_000))
        let base = "/api/0/locations?user=anna&device=phone&from=2024-05-14&to=2024-05-15"
        let all = try await c.json(base) as? [String: Any]
        let tsts = (all?["data"] as? [[String: Any]])?.compactMap { $0["tst"] as? Int } ?? []
        #expect(all?["count"] as? Int == 5_001 && tsts == (0..<5_001).map { Self.day + $0 * 10 })
        let last = try await c.json(base + "&limit=1500") as? [String: Any]
        let newest = (last?["data"] as? [[String: Any]])?.compactMap { $0["tst"] as? Int } ?? []
        #expect(newest == (3_501..<5_001).reversed().map { Self.day + $0 * 10 })
        await c.close()
        await endpoint.stop()
    }

    /// A device token sees its own device only: listed alone, its last location alone, another's
    /// locations a 403 (without telling whether it exists); no credential is a 401; the admin sees all.
    @Test(arguments: StoreKind.allCases) func aDeviceTokenSeesItsOwnDeviceOnly(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let c = Client(endpoint: endpoint)
        try await Self.seed(c)
        let token = try await endpoint.server.store.addCredential(device: "anna/phone", now: 1_715_679_000)
        #expect((try await c.json("/api/0/list", token: token) as? [String: Any])?["results"] as? [String] == ["anna"])
        #expect(
            (try await c.json("/api/0/list?user=bob", token: token) as? [String: Any])?["results"] as? [String] == [])
        let last = try await c.json("/api/0/last", token: token) as? [[String: Any]]
        #expect(last?.map { $0["username"] as? String } == ["anna"])
        #expect((try await c.json("/api/0/last?user=bob&device=tablet", token: token) as? [Any])?.isEmpty == true)
        let mine =
            try await c.json(
                "/api/0/locations?user=anna&device=phone&from=2024-05-01&to=2024-06-01",
                token: token) as? [String: Any]
        #expect(mine?["count"] as? Int == 4)
        for path in ["bob&device=tablet", "nobody&device=nothing"] {
            let r = try await c.send(.GET, "/api/0/locations?user=\(path)&from=2024-05-01", token: token)
            #expect(r.status == 403, "\(r.body)")
        }
        for path in ["/api/0/list", "/api/0/last", "/api/0/version", "/api/0/locations?user=anna&device=phone"] {
            #expect(try await c.send(.GET, path, token: nil).status == 401)
            #expect(try await c.send(.GET, path, token: "guess").status == 401)
        }
        #expect((try await c.json("/api/0/last") as? [Any])?.count == 3)
        await c.close()
        await endpoint.stop()
    }

    /// CORS for the listed origins on the whole API: a preflight answered before authentication,
    /// the origin echoed on answers and on errors (a 401 the page can read), nothing for an origin
    /// that is not listed or when none is; `*` allows any origin without credentials.
    @Test(arguments: StoreKind.allCases) func answersCrossOriginRequestsFromTheListedOrigins(kind: StoreKind)
        async throws
    {
        let frontend = "http://127.0.0.1:8080"
        let endpoint = try await Endpoint.start(store: kind) {
            $0.corsOrigins = [frontend, "https://maps.example.org"]
        }
        let c = Client(endpoint: endpoint)
        try await Self.seed(c)
        let preflight = try await c.send(
            .OPTIONS, "/api/0/last?user=anna",
            headers: [
                ("Origin", frontend), ("Access-Control-Request-Method", "GET"),
                ("Access-Control-Request-Headers", "authorization"),
            ], token: nil)
        #expect(preflight.status == 204)
        #expect(preflight.headers.first(name: "Access-Control-Allow-Origin") == frontend)
        #expect(preflight.headers.first(name: "Access-Control-Allow-Methods")?.contains("GET") == true)
        #expect(preflight.headers.first(name: "Access-Control-Allow-Headers")?.contains("Authorization") == true)
        #expect(preflight.headers.first(name: "Access-Control-Allow-Credentials") == "true")
        for path in [
            "/api/0/last", "/api/0/list", "/api/0/version", "/v1/devices", "/healthz",
            "/api/0/locations?user=anna&device=phone&from=2024-05-14",
        ] {
            let r = try await c.send(.GET, path, headers: [("Origin", frontend)])
            #expect(r.status == 200, "\(path)")
            #expect(r.headers.first(name: "Access-Control-Allow-Origin") == frontend, "\(path)")
            #expect(r.headers[canonicalForm: "Vary"].contains("Origin"), "\(path)")
        }
        let refused = try await c.send(.GET, "/api/0/last", headers: [("Origin", frontend)], token: nil)
        #expect(refused.status == 401)
        #expect(refused.headers.first(name: "Access-Control-Allow-Origin") == frontend)
        let other = try await c.send(.GET, "/api/0/last", headers: [("Origin", "http://evil.example")])
        #expect(other.status == 200 && other.headers.first(name: "Access-Control-Allow-Origin") == nil)
        let otherPreflight = try await c.send(
            .OPTIONS, "/api/0/last",
            headers: [
                ("Origin", "http://evil.example"), ("Access-Control-Request-Method", "GET"),
            ], token: nil)
        #expect(otherPreflight.status == 204)
        #expect(otherPreflight.headers.first(name: "Access-Control-Allow-Origin") == nil)
        await c.close()
        await endpoint.stop()

        let open = try await Endpoint.start(store: kind) { $0.corsOrigins = ["*"] }
        let o = Client(endpoint: open)
        let any = try await o.send(.GET, "/api/0/list", headers: [("Origin", "http://anywhere.example")])
        #expect(any.headers.first(name: "Access-Control-Allow-Origin") == "*")
        #expect(any.headers.first(name: "Access-Control-Allow-Credentials") == nil)
        await o.close()
        await open.stop()

        let none = try await Endpoint.start(store: kind)
        let n = Client(endpoint: none)
        let plain = try await n.send(.GET, "/api/0/list", headers: [("Origin", frontend)])
        #expect(plain.status == 200 && plain.headers.first(name: "Access-Control-Allow-Origin") == nil)
        await n.close()
        await none.stop()
    }

    /// Hostile parameters: dates that are not dates (416, as the Recorder, naming the parameter),
    /// ranges from year 1 to 9999 (served, a page at a time), unknown users and devices (empty
    /// answers, never an error that tells them apart), strings that look like SQL, paths or markup
    /// (just names that match nothing), bad escapes, huge values, bad limits and formats (400).
    @Test(arguments: StoreKind.allCases) func refusesOrEmptiesHostileParameters(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let c = Client(endpoint: endpoint)
        try await Self.seed(c)
        let base = "/api/0/locations?user=anna&device=phone"
        let badTimes = [
            "yesterday", "2024-13-01", "2024-02-30", "2024-05-14T24:00", "2024-05-14T10:60", "2024-05-14T10:00:61",
            "0000-01-01", "10000-01-01", "2024", "1715679000", "2024-05-14T10:00:00%2B02:00", "2024-05-14%2010:00",
            "2024-05-14T", "2024-05-14T10:00:00.", "%27%20OR%201%3D1%20--", "2024-05-14T10:00:00ZZ",
            String(repeating: "9", count: 300), "2024-05-14T10:00:00.%F0%9F%9A%90",
        ]
        for text in badTimes {
            for name in ["from", "to"] {
                let r = try await c.send(.GET, base + "&\(name)=\(text)")
                #expect(r.status == 416, "\(name)=\(text): \(r.status)")
                #expect(r.body.contains("impossible date") && r.body.contains(name), "\(r.body)")
            }
        }
        let backwards = try await c.send(.GET, base + "&from=2024-05-15&to=2024-05-14")
        #expect(backwards.status == 416 && backwards.body.contains("from is after to"))
        let everything = try await c.json(base + "&from=0001-01-01T00:00:00&to=9999-12-31T23:59:59") as? [String: Any]
        #expect(everything?["count"] as? Int == 4)
        for (user, device) in [
            ("nobody", "nothing"), ("anna", "tablet"), ("%27%20OR%201%3D1%20--", "x"),
            ("..%2F..%2Fetc", "passwd"), ("%3Cscript%3E", "%22%7D%5D"), ("anna%00", "phone"),
            ("anna%2Fphone", "phone"), ("anna", "phone%2F.."),
        ] {
            let r =
                try await c.json("/api/0/locations?user=\(user)&device=\(device)&from=2024-01-01")
                as? [String: Any]
            #expect(r?["count"] as? Int == 0 && (r?["data"] as? [Any])?.isEmpty == true, "\(user)/\(device)")
            #expect((try await c.json("/api/0/last?user=\(user)&device=\(device)") as? [Any])?.isEmpty == true)
            guard user != "anna" else { continue }
            let list = try await c.json("/api/0/list?user=\(user)") as? [String: Any]
            #expect((list?["results"] as? [String])?.isEmpty == true, "\(user)")
        }
        // The device alone matches nothing (the Recorder's last_users needs the user).
        #expect((try await c.json("/api/0/last?device=phone") as? [Any])?.isEmpty == true)
        let missing = try await c.send(.GET, "/api/0/locations?user=anna")
        #expect(missing.status == 416 && missing.body.contains("user and device are required"))
        let cases: [(String, Int, String)] = [
            (base + "&limit=-1", 400, "limit"), (base + "&limit=abc", 400, "limit"),
            (base + "&limit=99999999999999999999", 400, "limit"), (base + "&format=xml", 400, "format=json"),
            (base + "&format=%3Cx%3E", 400, "unrecognized format"),
            ("/api/0/last?user=" + String(repeating: "a", count: 5000), 400, "longer than 4096 bytes"),
        ]
        for (path, status, message) in cases {
            let r = try await c.send(.GET, path)
            #expect(r.status == status, "\(path.prefix(80)): \(r.status)")
            #expect(r.body.contains(message), "\(r.body.prefix(200))")
        }
        // Escapes that are not escapes, sent as they are (an HTTP client would repair them).
        for query in ["user=%ZZ", "user=%E2%28", "user=anna&device=%", "user%FF=anna"] {
            let socket = try RawSocket(port: endpoint.port)
            socket.send("GET /api/0/locations?\(query) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n\r\n")
            let answer = await socket.readResponse()
            #expect(status(answer) == 400 && answer.contains("percent-encoded"), "\(query): \(answer)")
            socket.close()
        }
        #expect(try await endpoint.server.store.count() == 7)
        await c.close()
        await endpoint.stop()
    }
}

/// The pure parts: names, times, geohashes and the location object.
@Suite("Formats: the Recorder API's names, times and location objects")
struct RecorderAPIFormatTests {
    @Test(arguments: [
        ("anna/phone", "anna", "phone"), ("van-1", "van-1", "van-1"), ("a/b/c", "a", "b/c"), ("/x", "/x", "/x"),
        ("x/", "x/", "x/"), ("", "", ""),
    ])
    func namesADeviceAsAUserAndADevice(id: String, user: String, device: String) {
        #expect(RecorderAPI.names(of: id) == (user, device))
        #expect(RecorderAPI.deviceIDs(user: user, device: device).contains(id) || id.isEmpty)
    }

    @Test func readsTimesInEveryFormTheRecorderReads() {
        let t = 1_715_679_000.0  // 2024-05-14T09:30:00Z
        #expect(RecorderAPI.parseTime("2024-05-14T09:30:00") == t)
        #expect(RecorderAPI.parseTime("2024-05-14t09:30:00") == t)
        #expect(RecorderAPI.parseTime("2024-05-14T09:30") == t)
        #expect(RecorderAPI.parseTime("2024-05-14T09") == t - 1800)
        #expect(RecorderAPI.parseTime("2024-05-14") == t - 9.5 * 3600)
        #expect(RecorderAPI.parseTime("2024-5-4") == t - 9.5 * 3600 - 10 * 86_400)
        #expect(RecorderAPI.parseTime("2024-05") == 1_714_521_600)
        #expect(RecorderAPI.parseTime("2024-05-14T09:30:00.250Z") == t + 0.25)
        #expect(RecorderAPI.parseTime("2024-05-14T09:30:00Z") == t)
        #expect(RecorderAPI.parseTime("0001-01-01T00:00:00") == ISOTime.representable.lowerBound)
        #expect(RecorderAPI.parseTime("2024-02-29") != nil && RecorderAPI.parseTime("2023-02-29") == nil)
        for bad in [
            "", "2024", "2024-", "2024-05-", "24-05-14", "2024-05-14 09:30", "2024-05-14T09:30:00+02:00",
            "2024-05-14T123", "2024-05-14T09:30:00.", " 2024-05-14", "2024-05-14\u{0}", "２０２４-05-14",
        ] {
            #expect(RecorderAPI.parseTime(bad) == nil, "\(bad)")
        }
    }

    @Test func hashesPositionsAsGeohashDoes() {
        // The example of Wikipedia's Geohash article: 57.64911, 10.40744 is u4pruydqqvj.
        #expect(RecorderAPI.geohash(latitude: 57.64911, longitude: 10.40744, precision: 11) == "u4pruydqqvj")
        #expect(RecorderAPI.geohash(latitude: 51.47879, longitude: -0.010677) == "gcpuzg2")  // the Frontend's test
    }

    @Test func writesNumbersAsNumbersAndTextAsText() throws {
        var r = TrailRecord(device: "anna/phone", sequence: 1, time: 1_715_679_000.9, latitude: 48.1, longitude: 11.5)
        r.attributes = ["batt": "87", "tid": "12", "conn": "w", "lat": "1", "note": "0x12", "p": "-1.5e3"]
        var out: [UInt8] = []
        RecorderAPI.appendLocation(r, to: &out)
        let object = try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any]
        #expect(object?["batt"] as? Int == 87 && object?["tid"] as? String == "12" && object?["conn"] as? String == "w")
        #expect(object?["lat"] as? Double == 48.1 && object?["note"] as? String == "0x12")
        #expect(object?["p"] as? Double == -1500 && object?["tst"] as? Int == 1_715_679_000)
        out = []
        RecorderAPI.appendLocation(r, fields: ["nothing"], to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "{}")
    }
}
