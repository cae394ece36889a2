import AsyncHTTPClient
import Formats
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TrackServerTesting
import TrackServer

/// `keeptrack serve` against what real apps send (issue 13, items 9-11): OwnTracks apps and the
/// Recorder's conventions, Traccar's OsmAnd clients, through a real endpoint on loopback.
@Suite("Endpoint: what real peers send", .serialized)
struct PeerEndpointTests {
    let location = #"{"_type":"location","tst":1715679000,"lat":48.1,"lon":11.5,"acc":12,"tid":"PH"}"#

    /// Two users' phones, both named `phone`, reporting the same second: two devices, two points
    /// (before: one device, and the second point dropped as a duplicate of the first).
    @Test(arguments: StoreKind.allCases) func twoUsersPhonesAreTwoDevicesAndNeitherPointIsLost(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let anna = try await raw.send(
            .POST, "/owntracks", body: location, headers: [("X-Limit-U", "anna"), ("X-Limit-D", "phone")])
        let bob = try await raw.send(.POST, "/owntracks?u=Bob&d=Phone", body: location)
        #expect(anna.status == 200 && anna.body == "[]")
        #expect(bob.status == 200)
        let devices = try await endpoint.server.store.devices().map(\.id)
        #expect(devices == ["anna/phone", "bob/phone"])
        #expect(try await endpoint.server.store.count() == 2)
        // Neither header nor query: the Recorder's fallbacks.
        _ = try await raw.send(.POST, "/owntracks", body: location)
        #expect(try await endpoint.server.store.device("owntracks/phone")?.points == 1)
        // The Recorder takes the first header of a name.
        _ = try await raw.send(
            .POST, "/owntracks", body: location,
            headers: [("X-Limit-U", "carol"), ("X-Limit-U", "dave"), ("X-Limit-D", "tab")])
        #expect(try await endpoint.server.store.device("carol/tab")?.points == 1)
        await raw.close()
        await endpoint.stop()
    }

    /// HTTP Basic (how the apps authenticate), empty bodies, numbers as strings, no `tst`, a
    /// transition without a position, position-less types, and encrypted payloads.
    @Test(arguments: StoreKind.allCases) func acceptsWhatTheOwnTracksAppsSend(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let basic = "Basic " + Data("anna:secret".utf8).base64EncodedString()
        let wrong = "Basic " + Data("anna:guess".utf8).base64EncodedString()
        let headers = [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location, headers: headers + [("Authorization", basic)],
                token: nil
            ).status == 200)
        #expect(
            try await raw.send(
                .POST, "/owntracks", body: location, headers: headers + [("Authorization", wrong)],
                token: nil
            ).status == 401)
        let empty = try await raw.send(.POST, "/owntracks", body: "", headers: headers)
        #expect(empty.status == 200 && empty.body == "[]")
        let strings = #"{"_type":"location","lat":"48.2","lon":"11.6","acc":"5","batt":"87"}"#
        #expect(try await raw.send(.POST, "/owntracks", body: strings, headers: headers).status == 200)
        let transition =
            #"{"_type":"transition","event":"enter","desc":"home","tst":1715679100,"wtst":1600000000,"acc":10,"t":"c"}"#
        #expect(try await raw.send(.POST, "/owntracks", body: transition, headers: headers).status == 200)
        for other in [
            #"{"_type":"lwt","tst":1715679000}"#, #"{"_type":"card","name":"Anna"}"#,
            #"{"_type":"waypoints","waypoints":[]}"#, #"{"_type":"status","android":{}}"#,
        ] {
            let r = try await raw.send(.POST, "/owntracks", body: other, headers: headers)
            #expect(r.status == 200 && r.body == "[]")
        }
        let encrypted = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"encrypted","data":"bm90IGEga2V5"}"#,
            headers: headers)
        #expect(encrypted.status == 415)
        #expect(encrypted.body.contains("encrypted payloads are not supported"))
        let store = endpoint.server.store
        let trail = try await store.trail(device: "anna/phone")
        #expect(trail.count == 2)  // the transition without a position is left out
        #expect(trail.contains { $0.latitude == 48.2 && $0.attributes["batt"] == "87" && $0.time > 1_715_679_100 })
        let all = try await store.trail(device: "anna/phone", includeInvalid: true)
        #expect(all.contains { $0.kind == .enter && $0.region == "home" && !$0.valid })
        await raw.close()
        await endpoint.stop()
    }

    /// Records without an id are told apart by everything that identifies them: one device at one
    /// time in two places is two records; the same request twice is one.
    @Test(arguments: StoreKind.allCases) func idLessRecordsAreKeyedByDeviceKindTimeAndPosition(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        for query in [
            "/?id=van&timestamp=1715679000&lat=48.1&lon=11.5", "/?id=van&timestamp=1715679000&lat=48.2&lon=11.5",
            "/?id=van&timestamp=1715679000&lat=48.2&lon=11.5",
        ] {
            #expect(try await raw.send(.GET, query).status == 200)
        }
        #expect(try await endpoint.server.store.device("van")?.points == 2)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 1)
        await raw.close()
        await endpoint.stop()
    }

    /// OsmAnd as Traccar Client and the OsmAnd app send it, and what the JSON trail gives back. The
    /// points are metres apart a minute apart: a last point kilometres away would be a pending jump,
    /// left out of the default trail (docs/visits.md).
    @Test(arguments: StoreKind.allCases) func storesOsmAndAsTraccarClientsSendItAndReturnsItsAttributes(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        #expect(
            try await raw.send(
                .GET,
                "/?id=123456&timestamp=2024-05-14%2009:30:00&location=60.0,30.0&heading=90"
                    + "&speed=-1&hdop=0.9&batt=87&charge=true&driverUniqueId=D-17"
            ).status == 200)
        #expect(
            try await raw.send(
                .POST, "/", body: "id=123456&timestamp=1715679060&lat=60.001&lon=30.001&valid=false",
                headers: [("Content-Type", "application/x-www-form-urlencoded")]
            ).status == 200)
        let json =
            #"{"location":{"timestamp":"2024-05-14T09:32:00Z","coords":{"latitude":60.002,"longitude":30.002,"speed":3,"heading":-1,"accuracy":4,"altitude":10},"is_moving":true,"odometer":100,"battery":{"level":0.5,"is_charging":true},"activity":{"type":"still"}},"device_id":"123456"}"#
        #expect(
            try await raw.send(.POST, "/", body: json, headers: [("Content-Type", "application/json")]).status == 200)
        let trail = try await raw.send(.GET, "/v1/devices/123456/trail?format=json")
        #expect(trail.status == 200)
        #expect(
            trail.body.contains(#""attributes":{"batt":"87","charge":"true","driverUniqueId":"D-17","hdop":"0.9"}"#))
        #expect(trail.body.contains(#""battery.is_charging":"true""#))
        #expect(!trail.body.contains("60.001000000"))  // valid=false: stored, left out by default
        let all = try await raw.send(.GET, "/v1/devices/123456/trail?format=json&invalid=true")
        #expect(all.body.contains(#""lat":60.001000000"#) && all.body.contains(#""valid":false"#))
        #expect(try await endpoint.server.store.device("123456")?.points == 3)
        await raw.close()
        await endpoint.stop()
    }

    /// The ingestion an MQTT subscriber calls, without an HTTP request: the same identity rules.
    @Test(arguments: StoreKind.allCases) func ownTracksIngestionWorksWithoutARequest(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let result = try await endpoint.server.ingestOwnTracks(Array(location.utf8), user: "Anna", device: "Phone")
        #expect(result.accepted == 1)
        #expect(try await endpoint.server.ingestOwnTracks([], user: "anna", device: "phone").accepted == 0)
        #expect(try await endpoint.server.store.device("anna/phone")?.points == 1)
        await endpoint.stop()
    }

    /// A phone with a wrong clock: its impossible record is acknowledged, so the app's queue moves
    /// on (a refused message is sent again at its head), and not stored; the answer's header and
    /// the metrics say so. Authorization comes first, and a device id no store keeps is refused.
    @Test(arguments: StoreKind.allCases) func aRecordWithImpossibleValuesIsAcknowledgedAndNotStored(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        func post(_ path: String, _ body: String, _ headers: [(String, String)] = [], token: String = "secret")
            async throws -> (status: Int, body: String, notStored: String?)
        {
            var request = HTTPClientRequest(url: endpoint.url(path))
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            for (k, v) in headers { request.headers.add(name: k, value: v) }
            request.body = .bytes(Array(body.utf8))
            let response = try await client.execute(request, timeout: .seconds(60))
            let text = try await response.body.collect(upTo: 1 << 20)
            let notStored = response.headers.first(name: "X-KeepTrack-Not-Stored")
            return (Int(response.status.code), String(buffer: text), notStored)
        }
        let form = [("Content-Type", "application/x-www-form-urlencoded")]
        // Traccar Client with its clock in 2286 (milliseconds), then right again.
        let osmAnd = try await post("/", "id=van&lat=60&lon=30&timestamp=10000000000000", form)
        #expect(osmAnd.status == 200 && osmAnd.body.isEmpty)
        #expect(osmAnd.notStored?.hasPrefix("1 record not stored: time 2286-11-20T17:46:40") == true, "\(osmAnd)")
        #expect(try await post("/", "id=van&lat=60&lon=30&timestamp=1715679000", form).notStored == nil)
        // OwnTracks: a latitude of 91.
        let ownTracks = try await post(
            "/owntracks", #"{"_type":"location","tst":1715679000,"lat":91,"lon":11.5}"#, [("X-Limit-D", "phone")])
        #expect(ownTracks.status == 200 && ownTracks.body == "[]")
        #expect(ownTracks.notStored == "1 record not stored: lat 91.0 is out of range [-90, 90]")
        // Overland: the good locations of a batch are kept.
        func feature(_ time: String, _ lon: Double) -> String {
            #"{"type":"Feature","geometry":{"type":"Point","coordinates":[\#(lon),48.1]},"properties":{"timestamp":"\#(time)","device_id":"ov"}}"#
        }
        let batch =
            #"{"locations":[\#(feature("2024-05-14T09:00:00Z", 11.5)),\#(feature("1970-01-01T00:00:00Z", 11.6)),\#(feature("2024-05-14T09:01:00Z", 11.7))]}"#
        let overland = try await post("/api/v1/overland/batches", batch, [("Content-Type", "application/json")])
        #expect(overland.status == 200 && overland.body == #"{"result":"ok"}"#)
        #expect(overland.notStored?.hasPrefix("1 record not stored: locations[1]: time 1970-01-01T00:00:00") == true)
        let store = endpoint.server.store
        #expect(try await store.device("van")?.points == 1)
        #expect(try await store.device("owntracks/phone") == nil)
        #expect(try await store.device("ov")?.points == 2)
        let metrics = await endpoint.server.metricsText()
        for format in ["osmand", "owntracks", "overland"] {
            #expect(metrics.contains("keeptrack_serve_records_refused_total{format=\"\(format)\"} 1\n"), "\(format)")
        }
        // Another device's token is refused before the values are judged; so is an id with a NUL.
        let other = try await store.addCredential(device: "other", now: 1_715_679_000)
        #expect(try await post("/", "id=van&lat=60&lon=30&timestamp=10000000000000", form, token: other).status == 403)
        let nul = try await post("/", "id=van%00&lat=60&lon=30&timestamp=10000000000000", form)
        #expect(nul.status == 400 && nul.notStored == nil)
        try await client.shutdown()
        await raw.close()
        await endpoint.stop()
    }

    /// A peer's records have no sequence of their own: their trail says `"id":null,"seq":null` (it
    /// said `van:0` for every one), and that trail posted as our batch to another endpoint is stored
    /// whole, once however often it is posted.
    @Test(arguments: StoreKind.allCases) func aPeersTrailHasNoIDsAndCanBePostedBack(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let other = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint), copy = Raw(endpoint: other)
        for i in 0..<3 {
            let query = "/?id=van&lat=48.1\(i)&lon=11.5&timestamp=\(1_715_679_000 + 600 * i)"
            #expect(try await raw.send(.GET, query).status == 200)
        }
        let trail = try await raw.send(.GET, "/v1/devices/van/trail?format=json")
        #expect(trail.status == 200)
        #expect(
            trail.body.components(separatedBy: #"{"id":null,"seq":null,"kind":"location""#).count == 4, "\(trail.body)")
        for _ in 0..<2 {
            let posted = try await copy.send(.POST, "/v1/locations", body: trail.body)
            #expect(posted.status == 200, "\(posted.body)")
        }
        #expect(try await other.server.store.device("van")?.points == 3)
        let again = try await copy.send(.GET, "/v1/devices/van/trail?format=json")
        #expect(again.body == trail.body)
        // A seq of 0 is refused by name: null says "none".
        let zero =
            #"{"device":"d","records":[{"seq":0,"kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#
        let refused = try await copy.send(.POST, "/v1/locations", body: zero)
        #expect(
            refused.status == 400 && refused.body.contains("records[0]: seq must be 1 or more (or null: none), got 0"))
        await raw.close()
        await copy.close()
        await endpoint.stop()
        await other.stop()
    }
}
