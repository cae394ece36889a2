import Foundation
import HummingbirdWSClient
import KeepTrackTesting
import Logging
import NIOWebSocket
import Testing
import TrackServer
import TrackServerTesting

/// A client of `/ws/last` as the OwnTracks Frontend is one (its src/api.js, connectWebsocket): it
/// sends `LAST` once connected, then takes every text message, in order.
final class RecorderLiveClient: Sendable {
    let messages: AsyncStream<String>
    let task: Task<WebSocketCloseFrame?, any Error>

    init(_ url: String) {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        messages = stream
        task = Task {
            defer { continuation.finish() }
            return try await WebSocketClient.connect(
                url: url, configuration: .init(maxFrameSize: 1 << 20), logger: Logger(label: "test.ws-last")
            ) { inbound, outbound, _ in
                try await outbound.write(.text("LAST"))
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    if case .text(let text) = message { continuation.yield(text) }
                }
            }
        }
    }

    /// The next message as a JSON object, within 30 s.
    func next() async throws -> [String: Any] {
        let messages = self.messages
        let received = try await withTimeout(30, "a /ws/last message") {
            var it = messages.makeAsyncIterator()
            return await it.next()
        }
        guard let text = received else {
            // Why it ended: the client's error or the close frame.
            let end: String
            do { end = "closed with \(String(describing: try await task.value))" } catch { end = "failed: \(error)" }
            Issue.record("the WebSocket ended: \(end)")
            throw CancellationError()
        }
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    func stop() { task.cancel() }
}

/// Issue 28, item 3: the OwnTracks Recorder's `/ws/last` through a real endpoint.
@Suite("Endpoint: the OwnTracks Recorder's /ws/last", .serialized)
struct RecorderLiveTests {
    /// `LAST` is answered with each device's latest location, a Recorder location object per frame;
    /// then each location stored comes as one, whatever route stored it; other kinds of records don't.
    @Test func lastGivesEachDevicesLatestLocationThenEachLocationAsItArrives() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        var client: RecorderLiveClient?
        do {
            let owntracks = #"{"_type":"location","lat":48.3,"lon":11.7,"tst":1715679100,"acc":5,"tid":"ph"}"#
            let headers = [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
            #expect(try await raw.send(.POST, "/owntracks", body: owntracks, headers: headers).status == 200)
            let ws = RecorderLiveClient("ws://127.0.0.1:\(endpoint.port)/ws/last?token=secret")
            client = ws
            let last = try await ws.next()
            #expect(last["_type"] as? String == "location")
            #expect(last["username"] as? String == "anna" && last["device"] as? String == "phone")
            #expect(last["topic"] as? String == "owntracks/anna/phone")
            #expect(last["lat"] as? Double == 48.3 && last["lon"] as? Double == 11.7)
            #expect(last["tst"] as? Int == 1_715_679_100 && last["tid"] is String)
            // A region event is not a location: not sent.
            let transition =
                #"{"_type":"transition","event":"enter","desc":"home","lat":48.3,"lon":11.7,"tst":1715679150,"#
                + #""acc":5,"tid":"ph","wtst":1715600000,"t":"c"}"#
            _ = try await raw.send(.POST, "/owntracks", body: transition, headers: headers)
            let next = #"{"_type":"location","lat":48.4,"lon":11.8,"tst":1715679200,"acc":5,"tid":"ph"}"#
            #expect(try await raw.send(.POST, "/owntracks", body: next, headers: headers).status == 200)
            #expect(try await raw.send(.GET, "/?id=osm1&lat=48.2&lon=11.6&timestamp=1715679300").status == 200)
            let pushed = try await ws.next()
            #expect(pushed["_type"] as? String == "location" && pushed["tst"] as? Int == 1_715_679_200)
            #expect(pushed["username"] as? String == "anna" && pushed["lat"] as? Double == 48.4)
            let other = try await ws.next()
            #expect(other["username"] as? String == "osm1" && other["tst"] as? Int == 1_715_679_300)
        } catch {
            Issue.record(error)
        }
        client?.stop()
        await raw.close()
        await endpoint.stop()
    }

    /// The API's authentication: without a valid token the upgrade is closed at once with 1008; a
    /// device token sees its own device only, and the Recorder's `?user=&device=` narrows.
    @Test func aWrongTokenIsClosedAndADeviceTokenSeesItsOwnDeviceOnly() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        var clients: [RecorderLiveClient] = []
        do {
            let van = try await endpoint.server.store.addCredential(device: "van1", now: 1_715_679_000)
            for device in ["van1", "van2"] {
                let status = try await raw.send(.GET, "/?id=\(device)&lat=48.2&lon=11.6&timestamp=1715679000").status
                #expect(status == 200)
            }
            // Refused: upgraded, then a close frame 1008 with a reason, and the connection closed; so is a
            // page of an origin not given with --cors-origin, even with a valid credential.
            for (query, origin, reason) in [
                ("?token=guess", "", "unauthorized"),
                ("?token=secret", "Origin: https://elsewhere.example\r\n", "forbidden"),
            ] {
                let socket = try RawSocket(port: endpoint.port)
                socket.send(
                    "GET /ws/last\(query) HTTP/1.1\r\nHost: 127.0.0.1:\(endpoint.port)\r\n\(origin)Upgrade: websocket\r\n"
                        + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        + "Sec-WebSocket-Version: 13\r\n\r\n")
                let (bytes, eof) = await socket.readBytesToEnd()
                socket.close()
                let answer = String(decoding: bytes, as: UTF8.self)
                #expect(eof && answer.hasPrefix("HTTP/1.1 101") && answer.contains(reason), "\(answer)")
            }
            let own = RecorderLiveClient("ws://127.0.0.1:\(endpoint.port)/ws/last?token=\(van)")
            clients.append(own)
            #expect(try await own.next()["username"] as? String == "van1")
            let narrowed = RecorderLiveClient(
                "ws://127.0.0.1:\(endpoint.port)/ws/last?token=secret&user=van2&device=van2")
            clients.append(narrowed)
            #expect(try await narrowed.next()["username"] as? String == "van2")
            // Then only what is new of its device.
            _ = try await raw.send(.GET, "/?id=van1&lat=48.2&lon=11.6&timestamp=1715679100")
            _ = try await raw.send(.GET, "/?id=van2&lat=48.2&lon=11.6&timestamp=1715679200")
            #expect(try await narrowed.next()["tst"] as? Int == 1_715_679_200)
            #expect(try await own.next()["tst"] as? Int == 1_715_679_100)
        } catch {
            Issue.record(error)
        }
        for client in clients { client.stop() }
        await raw.close()
        await endpoint.stop()
    }

    /// The Recorder's `?user=U` alone narrows to that user's devices (its `last_users` for `LAST`): the
    /// latest location of each of them, then only what they store; not those of `ann`, whose name is a
    /// prefix of `anna` and whose devices sort first. A device token may ask for its own user, not another's.
    @Test func userAloneNarrowsToThatUsersDevices() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        var clients: [RecorderLiveClient] = []
        do {
            func store(_ user: String, _ device: String, _ tst: Int) async throws {
                let body = #"{"_type":"location","lat":48.3,"lon":11.7,"tst":\#(tst),"acc":5,"tid":"ph"}"#
                let headers = [("X-Limit-U", user), ("X-Limit-D", device)]
                #expect(try await raw.send(.POST, "/owntracks", body: body, headers: headers).status == 200)
            }
            try await store("anna", "phone", 1_715_679_000)
            try await store("ann", "phone", 1_715_679_010)
            try await store("anna", "tablet", 1_715_679_020)
            let ann = try await endpoint.server.store.addCredential(device: "ann/phone", now: 1_715_679_000)
            let anna = RecorderLiveClient("ws://127.0.0.1:\(endpoint.port)/ws/last?token=secret&user=Anna")
            clients.append(anna)
            var last: [String] = []
            for _ in 0..<2 {
                let frame = try await anna.next()
                last.append("\(frame["username"] as? String ?? "?")/\(frame["device"] as? String ?? "?")")
            }
            #expect(last.sorted() == ["anna/phone", "anna/tablet"])
            // ann's first: were it sent, it would come before anna's.
            try await store("ann", "phone", 1_715_679_100)
            try await store("anna", "tablet", 1_715_679_200)
            let pushed = try await anna.next()
            #expect(pushed["username"] as? String == "anna" && pushed["tst"] as? Int == 1_715_679_200)
            // ann's device token: its own user, yes; anna, no.
            let own = RecorderLiveClient("ws://127.0.0.1:\(endpoint.port)/ws/last?token=\(ann)&user=ann")
            clients.append(own)
            #expect(try await own.next()["tst"] as? Int == 1_715_679_100)
            let socket = try RawSocket(port: endpoint.port)
            socket.send(
                "GET /ws/last?token=\(ann)&user=anna HTTP/1.1\r\nHost: 127.0.0.1:\(endpoint.port)\r\n"
                    + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    + "Sec-WebSocket-Version: 13\r\n\r\n")
            let (bytes, eof) = await socket.readBytesToEnd()
            socket.close()
            let answer = String(decoding: bytes, as: UTF8.self)
            #expect(eof && answer.hasPrefix("HTTP/1.1 101") && answer.contains("forbidden"), "\(answer)")
        } catch {
            Issue.record(error)
        }
        for client in clients { client.stop() }
        await raw.close()
        await endpoint.stop()
    }

    /// An upgrade with no credential at all is answered 401 with `WWW-Authenticate: Basic`, not
    /// upgraded: a browser holding HTTP Basic credentials for the server (the OwnTracks Frontend's only
    /// way in) sends them only when challenged, unless they were first asked for below `/ws/`. Asked
    /// again with them, it is upgraded.
    @Test func anUpgradeWithoutACredentialIsChallengedAndBasicThenUpgrades() async throws {
        let endpoint = try await Endpoint.start()
        do {
            for authorization in [
                "", "Authorization: Basic \(Data("owntracks:secret".utf8).base64EncodedString())\r\n",
            ] {
                let socket = try RawSocket(port: endpoint.port)
                socket.send(
                    "GET /ws/last HTTP/1.1\r\nHost: 127.0.0.1:\(endpoint.port)\r\n\(authorization)"
                        + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        + "Sec-WebSocket-Version: 13\r\n\r\n")
                if authorization.isEmpty {
                    let (bytes, eof) = await socket.readBytesToEnd()
                    let answer = String(decoding: bytes, as: UTF8.self)
                    #expect(eof && answer.hasPrefix("HTTP/1.1 401"), "\(answer)")
                    #expect(answer.lowercased().contains("www-authenticate: basic realm=\"keeptrack\"\r\n"))
                    // The error body every refusal has, and nothing after it: not the empty 400 of a
                    // declined upgrade.
                    #expect(answer.lowercased().contains("content-type: application/json; charset=utf-8\r\n"))
                    let error =
                        #"{"error":{"code":"unauthorized","message":"a valid token is required "#
                        + #"(Authorization: Bearer TOKEN, or Basic with it as the password)"}}"#
                    #expect(answer.hasSuffix("\r\n\r\n" + error), "\(answer)")
                } else {
                    let answer = await socket.readResponse()
                    #expect(answer.hasPrefix("HTTP/1.1 101"), "\(answer)")
                }
                socket.close()
            }
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }
}
