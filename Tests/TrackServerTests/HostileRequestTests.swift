import AsyncHTTPClient
import Formats
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TrackServerTesting
@testable import TrackServer

/// The exact requests that crashed the endpoint or lost data (issue 11, items 1-3 and 9): each is
/// answered with a status, the server stays up, and nothing is merged or silently dropped.
@Suite("TrackServer: hostile requests", .serialized)
struct HostileRequestTests {
    /// Sends raw bytes (which may not be UTF-8).
    func send(
        _ endpoint: Endpoint, _ method: HTTPMethod, _ path: String, bytes: [UInt8],
        headers: [(String, String)] = []
    ) async throws -> (status: Int, body: String) {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        var request = HTTPClientRequest(url: endpoint.url(path))
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer secret")
        for (k, v) in headers { request.headers.add(name: k, value: v) }
        request.body = .bytes(bytes)
        let response = try await client.execute(request, timeout: .seconds(60))
        let text = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: text))
    }

    func expectAlive(_ raw: Raw) async throws {
        #expect(try await raw.send(.GET, "/healthz").status == 200)
    }

    /// Refused with a 400 in our own batch; acknowledged and not stored from the peers' apps
    /// (`PeerEndpointTests.aRecordWithImpossibleValuesIsAcknowledgedAndNotStored`). Never stored.
    @Test(arguments: StoreKind.allCases) func farFutureTimesAreNeverStored(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        for time in ["2262-04-11T23:47:17Z", "9999-12-31T23:59:59.999Z"] {
            let r = try await raw.send(
                .POST, "/v1/locations",
                body: #"{"device":"d","records":[{"seq":1,"kind":"location","time":"\#(time)","lat":1,"lon":1}]}"#)
            #expect(r.status == 400)
            #expect(r.body.contains("records[0]: time \(time.prefix(19))"), "\(r.body)")
        }
        for stamp in ["10000000000000", "1e300", "99999999999999999999999"] {
            let r = try await raw.send(.GET, "/?id=d&lat=1&lon=1&timestamp=\(stamp)")
            #expect(r.status == 200, "\(stamp)")
        }
        for tst in ["1e10", "1e300", "-1e300"] {
            let r = try await raw.send(
                .POST, "/owntracks", body: #"{"_type":"location","tst":\#(tst),"lat":1,"lon":2}"#,
                headers: [("X-Limit-D", "phone")])
            #expect(r.status == 200 && r.body == "[]", "\(tst)")
        }
        try await expectAlive(raw)
        #expect(try await endpoint.server.store.count() == 0)
        await raw.close()
        await endpoint.stop()
    }

    /// The admin token is compared in a time that does not depend on how much of a guess is right.
    @Test(arguments: [
        ("s3cret", "s3cret", true), ("s3cret", "s3creT", false), ("s3cret", "s3cre", false),
        ("s3cret", "s3crett", false), ("", "", true), ("x", "", false), ("é", "e\u{301}", false),
    ])
    func theTokenComparisonIsExact(a: String, b: String, same: Bool) {
        #expect(Credentials.sameSecret(a, b) == same)
        #expect(Credentials.sameSecret(b, a) == same)
    }

    @Test func deepNestingIsRefusedWithA400() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        let brackets = String(repeating: "[", count: 200_000)
        let batch = try await raw.send(.POST, "/v1/locations", body: brackets)
        #expect(batch.status == 400)
        let inRecord = try await raw.send(.POST, "/v1/locations", body: #"{"device":"d","records":[{"x":\#(brackets)"#)
        #expect(inRecord.status == 400)
        #expect(inRecord.body.contains("nested deeper than 64 levels"), "\(inRecord.body)")
        let gzipped = try await raw.send(.POST, "/v1/locations", body: #"{"device":"d","x":\#(brackets)"#, gzip: true)
        #expect(gzipped.status == 400)
        let ownTracks = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"location","x":\#(brackets)"#,
            headers: [("X-Limit-D", "phone")])
        #expect(ownTracks.status == 400)
        try await expectAlive(raw)
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func aNULInADeviceIdIsRefusedAndNoRecordIsTakenForAnother(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        func records(_ n: Int) -> String {
            (1...n).map { #"{"seq":\#($0),"kind":"location","time":"2024-05-14T09:30:0\#($0)Z","lat":1,"lon":1}"# }
                .joined(separator: ",")
        }
        // The report's request: before, every record was keyed id:van and 6 of 7 answered as duplicates.
        let nul = try await raw.send(
            .POST, "/v1/locations", body: #"{"device":"van\u0000A","records":[\#(records(7))]}"#)
        #expect(nul.status == 400)
        #expect(
            nul.body.contains("device id must not contain control characters (U+0000 at character 4)"), "\(nul.body)")
        for id in ["van%00A", "van%0A", "van%FF", "van%C0%80"] {
            #expect(try await raw.send(.GET, "/?id=\(id)&lat=1&lon=1&timestamp=1715679000").status == 400, "\(id)")
        }
        var invalid = Array(#"{"device":"van"#.utf8) + [0xFF] + Array(#"","records":[\#(records(1))]}"#.utf8)
        let notUTF8 = try await send(endpoint, .POST, "/v1/locations", bytes: invalid)
        #expect(notUTF8.status == 400)
        #expect(notUTF8.body.contains("invalid UTF-8"), "\(notUTF8.body)")
        invalid =
            Array(#"{"device":"v","records":[{"seq":1,"kind":"enter","region":"h"#.utf8) + [0xC3]
            + Array(#"","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#.utf8)
        #expect(try await send(endpoint, .POST, "/v1/locations", bytes: invalid).status == 400)
        #expect(try await endpoint.server.store.count() == 0)
        // And the device 'van' itself: all seven are new.
        let van = try await raw.send(.POST, "/v1/locations", body: #"{"device":"van","records":[\#(records(7))]}"#)
        #expect(van.body == "{\"accepted\":7,\"duplicates\":0}\n")
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func valuesOutOfRangeImpossibleDatesAndBadGzipAreRefused(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        func body(_ fields: String, time: String = "2024-05-14T09:30:00Z") -> String {
            #"{"device":"d","records":[{"seq":1,"kind":"location","time":"\#(time)","lat":1,"lon":1\#(fields)}]}"#
        }
        for fields in [#","vAcc":1e999"#, #","vAcc":-5"#, #","hAcc":1e999"#, #","speed":-1"#] {
            let r = try await raw.send(.POST, "/v1/locations", body: body(fields))
            #expect(r.status == 400, "\(fields)")
        }
        let feb31 = try await raw.send(.POST, "/v1/locations", body: body("", time: "2024-02-31T12:00:00Z"))
        #expect(feb31.status == 400)
        #expect(feb31.body.contains("'2024-02-31T12:00:00Z' is not an ISO 8601 UTC time"), "\(feb31.body)")
        // gzip followed by junk
        let junk = Gzip.compress(Array(body("").utf8)) + Array("junk".utf8)
        let junked = try await send(
            endpoint, .POST, "/v1/locations", bytes: junk, headers: [("Content-Encoding", "gzip")])
        #expect(junked.status == 400)
        #expect(junked.body.contains("not gzip after the stream's end"), "\(junked.body)")
        // A small body that inflates past the limit is too large, as one sent that large would be.
        let bomb = Gzip.compress([UInt8](repeating: 32, count: 9 << 20))
        #expect(bomb.count < 100_000)
        let inflated = try await send(
            endpoint, .POST, "/v1/locations", bytes: bomb, headers: [("Content-Encoding", "gzip")])
        #expect(inflated.status == 413)
        #expect(try await endpoint.server.store.count() == 0)
        // Another content coding is named and refused (415), not read as the body; x-gzip is gzip.
        for coding in ["br", "deflate"] {
            let other = try await send(
                endpoint, .POST, "/v1/locations", bytes: Array(body("").utf8), headers: [("Content-Encoding", coding)])
            #expect(other.status == 415, "\(coding)")
            #expect(other.body.contains("Content-Encoding \(coding) is not accepted"), "\(other.body)")
        }
        #expect(try await endpoint.server.store.count() == 0)
        let xgzip = try await send(
            endpoint, .POST, "/v1/locations", bytes: Gzip.compress(Array(body("").utf8)),
            headers: [("Content-Encoding", "x-gzip")])
        #expect(xgzip.status == 200, "\(xgzip.body)")
        #expect(try await endpoint.server.store.count() == 1)
        try await expectAlive(raw)
        await raw.close()
        await endpoint.stop()
    }
}
