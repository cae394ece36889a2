import Foundation
import HummingbirdWSClient
import KeepTrackTesting
import Logging
import NIOCore
import NIOWebSocket
import Testing
import TrackServer
import TrackServerTesting

/// A WebSocket client of `/v1/stream`: every text message as JSON, in order, and how it was closed.
final class StreamReader: Sendable {
    let messages: AsyncStream<[String: any Sendable]>
    let task: Task<WebSocketCloseFrame?, any Error>

    init(_ url: String) {
        let (stream, continuation) = AsyncStream.makeStream(of: [String: any Sendable].self)
        messages = stream
        task = Task {
            defer { continuation.finish() }
            return try await WebSocketClient.connect(
                url: url, configuration: .init(maxFrameSize: 1 << 22), logger: Logger(label: "test.stream")
            ) { inbound, _, _ in
                for try await message in inbound.messages(maxSize: 1 << 22) {
                    guard case .text(let text) = message,
                        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                    else { continue }
                    continuation.yield(
                        object.mapValues { "\($0)" as any Sendable }.merging(["raw": text]) { a, _ in a })
                }
            }
        }
    }

    /// The next message, within 30 s.
    func next() async throws -> [String: any Sendable] {
        let messages = self.messages
        return try await withTimeout(30, "a stream message") {
            var it = messages.makeAsyncIterator()
            return try #require(await it.next(), "the stream ended")
        }
    }

    func stop() { task.cancel() }
}

/// Issue 28, item 1: the live stream through a real endpoint on loopback.
@Suite("Endpoint: the live stream (/v1/stream)", .serialized)
struct StreamTests {
    func batch(_ device: String, seqs: ClosedRange<Int>, minute: Int = 30) -> String {
        let records = seqs.map { s in
            let second = String(format: "%02d", s % 60)
            let time = "2024-05-14T09:\(minute):\(second)Z"
            return #"{"seq":\#(s),"kind":"location","time":"\#(time)","lat":48.1,"lon":11.\#(s)}"#
        }
        return #"{"device":"\#(device)","records":[\#(records.joined(separator: ","))]}"#
    }

    func ws(_ endpoint: Endpoint, _ query: String) -> String { "ws://127.0.0.1:\(endpoint.port)/v1/stream\(query)" }

    /// Runs `body` with an HTTP client of `endpoint`, shut down however `body` ends.
    func with(_ endpoint: Endpoint, _ body: (Raw) async throws -> Void) async throws {
        let raw = Raw(endpoint: endpoint)
        do { try await body(raw) } catch {
            await raw.close()
            throw error
        }
        await raw.close()
    }

    /// A snapshot of the latest positions first, then each record stored, in storage order, whatever
    /// route stored it (JSON batch, OsmAnd, OwnTracks HTTP); a batch sent again adds nothing.
    @Test func aSnapshotThenEveryStoredRecordInOrderWhateverTheRoute() async throws {
        let endpoint = try await Endpoint.start()
        defer { Task { await endpoint.stop() } }
        try await with(endpoint) { raw in
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...1)).status == 200)
            let reader = StreamReader(ws(endpoint, "?token=secret"))
            let snapshot = try await reader.next()
            #expect(snapshot["type"] as? String == "snapshot")
            #expect((snapshot["raw"] as? String)?.contains(#""id":"van1""#) == true)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 2...4)).status == 200)
            // The same batch again: nothing new.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 2...4)).status == 200)
            #expect(try await raw.send(.GET, "/?id=osm1&lat=48.2&lon=11.6&timestamp=1715679000").status == 200)
            let owntracks = #"{"_type":"location","lat":48.3,"lon":11.7,"tst":1715679100,"acc":5}"#
            #expect(
                try await raw.send(
                    .POST, "/owntracks", body: owntracks,
                    headers: [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
                ).status == 200)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 5...5)).status == 200)
            var seen: [String] = []
            while seen.count < 6 {
                let m = try await reader.next()
                // These points are 7 km apart a second: the outlier filter's `outliers` events come too.
                if m["type"] as? String == "event" { continue }
                #expect(m["type"] as? String == "record")
                let text = try #require(m["raw"] as? String)
                let record = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                let device = try #require(record["device"] as? String)
                let r = try #require(record["record"] as? [String: Any])
                seen.append("\(device):\((r["seq"] as? Int).map(String.init) ?? "null")")
                #expect(r["kind"] as? String == "location" && r["lat"] is Double && r["time"] is String)
            }
            #expect(seen == ["van1:2", "van1:3", "van1:4", "osm1:null", "anna/phone:null", "van1:5"])
            #expect(await endpoint.metric("keeptrack_serve_stream_clients") == 1)
            #expect(await endpoint.metric("keeptrack_serve_stream_messages_sent_total") >= 7)
            reader.stop()
        }
    }

    /// Two instances on one PostgreSQL database: a client of one sees what either stored, in order
    /// (LISTEN/NOTIFY on commit, the rows read by the listening instance).
    @Test func aClientOfOneInstanceSeesWhatAnotherStored() async throws {
        let a = try await Endpoint.start(store: .postgres)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        try await with(b) { raw in
            try await with(a) { rawA in
                let reader = StreamReader(ws(a, "?token=secret"))
                #expect(try await reader.next()["type"] as? String == "snapshot")
                #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...3)).status == 200)
                #expect(try await rawA.send(.POST, "/v1/locations", body: batch("van2", seqs: 1...1)).status == 200)
                #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...4)).status == 200)
                var seen: [String] = []
                for _ in 0..<5 {
                    let text = try #require(try await reader.next()["raw"] as? String)
                    let record = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
                    let r = try #require(record["record"] as? [String: Any])
                    seen.append("\(record["device"] ?? ""):\(r["seq"] ?? "")")
                }
                #expect(seen == ["van1:1", "van1:2", "van1:3", "van2:1", "van1:4"])
                reader.stop()
            }
        }
        await b.stop(keepingFiles: true)
        await a.stop()
    }

    /// A device token's stream shows its own device only; another device's id, or no valid token,
    /// closes the stream at once with 1008 and a reason.
    @Test func aDeviceTokenSeesItsOwnDeviceOnly() async throws {
        let endpoint = try await Endpoint.start()
        defer { Task { await endpoint.stop() } }
        try await with(endpoint) { raw in
            let van = try await endpoint.server.store.addCredential(device: "van1", now: 1_715_679_000)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van2", seqs: 1...1)).status == 200)
            let reader = StreamReader(ws(endpoint, "?token=\(van)"))
            let snapshot = try await reader.next()
            #expect(snapshot["raw"] as? String == #"{"type":"snapshot","devices":[]}"#)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van2", seqs: 2...2)).status == 200)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...1)).status == 200)
            let m = try await reader.next()
            #expect((m["raw"] as? String)?.hasPrefix(#"{"type":"record","device":"van1""#) == true)
            reader.stop()
            for query in ["?token=\(van)&device=van2", "?token=guess", ""] {
                let (close, reason) = try await endpoint.streamRefusal(query)
                #expect(close == 1008, "\(query)")
                #expect(!reason.isEmpty)
            }
            // The admin narrows with ?device=.
            let narrowed = StreamReader(ws(endpoint, "?token=secret&device=van1"))
            #expect((try await narrowed.next()["raw"] as? String)?.contains("van2") == false)
            narrowed.stop()
        }
    }

    /// A client whose queue overflows is closed with 1008 and a reason; a client of another device is
    /// served on; past the stream cap a client is closed with 1013.
    @Test func anOverflowingClientIsClosedAndOthersAreServed() async throws {
        let endpoint = try await Endpoint.start { c in
            c.stream.maxQueuedMessages = 10
            c.stream.maxClients = 2
        }
        defer { Task { await endpoint.stop() } }
        try await with(endpoint) { raw in
            // Read on a raw socket: its close is read as the bytes on the wire (see `Endpoint.openStream`).
            let all = try endpoint.openStream("?token=secret")
            defer { all.close() }
            _ = try await all.frames { !$0.isEmpty }
            let other = StreamReader(ws(endpoint, "?token=secret&device=b"))
            _ = try await other.next()
            let (capped, why) = try await endpoint.streamRefusal("?token=secret")
            #expect(capped == 1013 && why.contains("maximum"))
            // One batch of 50 records is queued at once: more than 10 for the client that sees device a.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("a", seqs: 1...50)).status == 200)
            let (frames, eof) = try await all.frames(upgraded: true)
            // One close, the last frame: nothing after it, not even a second close (RFC 6455, 5.5.1).
            #expect(frames.filter { $0.opcode == 0x8 }.count == 1, "\(frames)")
            let close = try #require(frames.last, "no frame before the end")
            #expect(close.opcode == 0x8 && Array(close.payload.prefix(2)) == [0x03, 0xF0], "\(frames)")
            #expect(String(decoding: close.payload.dropFirst(2), as: UTF8.self).contains("too slow"))
            #expect(eof, "the connection stays open")
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("b", seqs: 1...1)).status == 200)
            #expect((try await other.next()["raw"] as? String)?.contains(#""device":"b""#) == true)
            #expect(await endpoint.metric("keeptrack_serve_stream_overflow_closes_total") == 1)
            #expect(await endpoint.metric("keeptrack_serve_stream_refused_total") == 1)
            other.stop()
        }
    }

    /// Streams leave the HTTP connection cap at their 101 and count against their own: more streams
    /// than `maxConnections` are served, and a plain request and `/healthz` are still answered (issue 25,
    /// item 2: a flood of WebSocket clients cannot take the connections that requests need).
    @Test func streamsDoNotTakeTheConnectionCap() async throws {
        let endpoint = try await Endpoint.start { $0.maxConnections = 2 }
        defer { Task { await endpoint.stop() } }
        var readers: [StreamReader] = []
        for _ in 0..<3 {  // one after the other: a handshake under way still holds its place on the cap
            let reader = StreamReader(ws(endpoint, "?token=secret"))
            #expect(try await reader.next()["type"] as? String == "snapshot")
            readers.append(reader)
        }
        let raw = Raw(endpoint: endpoint)
        let health = try? await raw.send(.GET, "/healthz").status
        let stored = try? await raw.send(.POST, "/v1/locations", body: batch("c", seqs: 1...1)).status
        await raw.close()
        #expect(health == 200)
        #expect(stored == 200)
        for reader in readers {
            #expect((try await reader.next()["raw"] as? String)?.contains(#""device":"c""#) == true)
            reader.stop()
        }
        #expect(await endpoint.metric("keeptrack_serve_connections_refused_total") == 0)
    }

    /// An upgrade whose head arrives byte by byte is upgraded (the head guard finds its end across
    /// reads); bytes that are no WebSocket frame close that connection only.
    @Test func anUpgradeWrittenByteByByteIsUpgradedAndGarbageClosesItAlone() async throws {
        let endpoint = try await Endpoint.start()
        defer { Task { await endpoint.stop() } }
        let head =
            "GET /v1/stream?token=secret HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let socket = try RawSocket(port: endpoint.port)
        for byte in head.utf8 { socket.send([byte]) }
        let answer = await socket.readResponse()
        #expect(answer.hasPrefix("HTTP/1.1 101"), "\(answer.prefix(200))")
        socket.send([0x8f, 0x80, 0, 0, 0, 0])  // a whole frame with a reserved opcode (0xF)
        #expect(await socket.readToEnd().eof)
        socket.close()
        let reader = StreamReader(ws(endpoint, "?token=secret"))
        #expect(try await reader.next()["type"] as? String == "snapshot")
        reader.stop()
    }

    /// Plain `GET /v1/stream` is 426; a client message larger than a frame may be closes that client
    /// only; the map page is served without a token and holds none; HEAD answers wherever GET does.
    @Test func hostileAndPlainRequests() async throws {
        let endpoint = try await Endpoint.start()
        defer { Task { await endpoint.stop() } }
        try await with(endpoint) { raw in
            #expect(try await raw.send(.GET, "/v1/stream").status == 426)
            let big = Task {
                try await WebSocketClient.connect(url: ws(endpoint, "?token=secret"), logger: Logger(label: "test")) {
                    _, outbound, _ in
                    try await outbound.write(.text(String(repeating: "x", count: 100_000)))
                    try await outbound.write(.binary(ByteBuffer(bytes: [0xff, 0x00, 0x13])))
                }
            }
            _ = try? await withTimeout(30, "the large message's client") {
                try await withTaskCancellationHandler {
                    try await big.value
                } onCancel: {
                    big.cancel()
                }
            }
            let reader = StreamReader(ws(endpoint, "?token=secret"))
            #expect(try await reader.next()["type"] as? String == "snapshot")
            reader.stop()
            let page = try await raw.send(.GET, "/map?token=secret")
            #expect(
                page.status == 200 && page.body.contains("/map/leaflet/leaflet.js") && !page.body.contains("secret"))
            #expect(try await raw.send(.GET, "/map", token: nil).status == 200)
            let browser = try await raw.send(
                .GET, "/", headers: [("Accept", "text/html,application/xhtml+xml")], token: nil)
            #expect(browser.status == 200 && browser.body.contains("<div id=\"map\""))
            for path in ["/map", "/map/app.js", "/v1/devices", "/healthz", "/map/svg"] {
                let get = try await raw.send(.GET, path)
                let head = try await raw.send(.HEAD, path)
                #expect(head.status == get.status, "\(path)")
                #expect(head.body.isEmpty, "\(path)")
            }
        }
    }
}
