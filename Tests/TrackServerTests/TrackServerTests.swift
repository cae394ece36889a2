import AsyncHTTPClient
import Formats
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TrackServerTesting
import TrackServer

@Suite("TrackServer: the endpoint's HTTP interface", .serialized)
struct TrackServerTests {
    let record = #"{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"lon":11.5}"#

    @Test(arguments: StoreKind.allCases) func validatesWithA400ThatNamesTheProblem(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let cases: [(String, String)] = [
            (
                #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":91,"lon":1}]}"#,
                "records[0]: lat 91.0 is out of range [-90, 90]"
            ),
            (
                #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2124-05-14T09:30:00Z","lat":1,"lon":1}]}"#,
                "records[0]: time 2124-05-14T09:30:00.000Z is impossible"
            ),
            (#"{"device":"d","records":[{"seq":1,"kind":"location","lat":1,"lon":1}]}"#, "records[0].time: missing"),
            (#"{"device":"d","records":[{"seq":1,"#, "malformed JSON"),
        ]
        for (body, message) in cases {
            let r = try await raw.send(.POST, "/v1/locations", body: body)
            #expect(r.status == 400, "\(body)")
            #expect(r.body.contains(message), "\(r.body)")
        }
        #expect(try await endpoint.server.store.count() == 0)
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func refusesWithoutTheTokenAndTooLargeBodies(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let body = #"{"device":"d","records":[\#(record)]}"#
        #expect(try await raw.send(.POST, "/v1/locations", body: body, token: nil).status == 401)
        #expect(try await raw.send(.POST, "/v1/locations", body: body, token: "guess").status == 401)
        #expect(try await raw.send(.GET, "/?id=d&lat=1&lon=1&timestamp=1715679000&token=secret").status == 200)
        #expect(try await raw.send(.GET, "/healthz", token: nil).status == 200)
        #expect(try await raw.send(.GET, "/metrics", token: nil).body.contains("keeptrack_serve_records_stored 1"))
        let huge = String(repeating: " ", count: 9 << 20)
        #expect(try await raw.send(.POST, "/v1/locations", body: huge).status == 413)
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func storesEachIdOnceAndAcknowledgesItAgain(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let body = #"{"device":"d","records":[\#(record)]}"#
        let first = try await raw.send(.POST, "/v1/locations", body: body)
        let again = try await raw.send(.POST, "/v1/locations", body: body, gzip: true)
        #expect(first.body == "{\"accepted\":1,\"duplicates\":0}\n")
        #expect(again.body == "{\"accepted\":0,\"duplicates\":1}\n")
        #expect(try await endpoint.server.store.count() == 1)
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func servesDevicesAndTrailsInEachFormat(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let records = (1...3).map { i in
            #"{"seq":\#(i),"kind":"location","time":"2024-05-14T09:30:0\#(i)Z","lat":48.1,"lon":11.5}"#
        }
        _ = try await raw.send(
            .POST, "/v1/locations", body: #"{"device":"van","records":[\#(records.joined(separator: ","))]}"#)
        _ = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"location","tst":1715679000,"lat":1,"lon":2}"#,
            headers: [("X-Limit-U", "anna"), ("X-Limit-D", "phone")])
        let devices = try await raw.send(.GET, "/v1/devices")
        #expect(devices.body.contains(#"{"id":"anna/phone","points":1"#))
        #expect(devices.body.contains(#"{"id":"van","points":3"#))
        let window = try await raw.send(
            .GET, "/v1/devices/van/trail?from=2024-05-14T09:30:02Z&to=2024-05-14T09:30:03Z&format=json")
        #expect(try JSONBatch.decode(Array(window.body.utf8), now: 2e9).records.map(\.sequence) == [2, 3])
        #expect(try await raw.send(.GET, "/v1/devices/van/trail?format=gpx").body.contains("<trkpt"))
        #expect(try await raw.send(.GET, "/v1/devices/van/trail").body.contains(#""type":"LineString""#))
        #expect(try await raw.send(.GET, "/v1/devices/nobody/trail").status == 404)
        #expect(try await raw.send(.GET, "/v1/devices/van/trail?format=kml").status == 400)
        #expect(try await raw.send(.POST, "/owntracks", body: "{}", headers: []).status == 400)
        await raw.close()
        await endpoint.stop()
    }

    @Test func faultsChangeAtRunTime() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        #expect(try await raw.send(.PUT, "/v1/faults", body: #"{"failNext":1,"failStatus":418}"#).status == 200)
        #expect(try await raw.send(.GET, "/v1/devices").status == 418)
        #expect(try await raw.send(.GET, "/v1/devices").status == 200)
        #expect(
            try await raw.send(.PUT, "/v1/faults", body: #"{"failRate":3}"#).body
                .contains("faults: failRate must be between 0 and 1"))
        #expect(try await raw.send(.PUT, "/v1/faults", body: #"{"refuse":true}"#).status == 200)
        await #expect(throws: (any Error).self) { _ = try await raw.send(.GET, "/v1/devices") }
        await raw.close()
        await endpoint.stop()
    }
}
