import Dispatch
import Foundation
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 25, item 3: the WebSocket frames a client sends `/v1/stream` and `/ws/last` after the
/// upgrade, written byte by byte on a raw socket (no client library would send them): the cases the
/// WebSocketFuzz target starts from (fixtures/fuzz/websocket), through a real `serve`.
@Suite("Endpoint: hostile WebSocket frames on the stream and /ws/last", .serialized)
struct StreamFrameHostileTests {
    /// A frame header or message the server refuses, and the close code it answers with.
    struct Refused: Sendable, CustomStringConvertible {
        var description: String
        var bytes: [UInt8]
        var code: UInt16
        /// Whether `/v1/stream`, which reads frames but assembles no message, refuses it too.
        var onStream = true
    }

    static let refused: [Refused] = [
        Refused(description: "a length of 1 MiB", bytes: [0x82, 0xFF, 0, 0, 0, 0, 0, 0x10, 0, 0], code: 1009),
        Refused(description: "a length of 16 KiB + 1", bytes: [0x82, 0xFE, 0x40, 0x01], code: 1009),
        Refused(description: "the length 2^63", bytes: [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], code: 1009),
        Refused(description: "a reserved opcode", bytes: frame(0x3, Array("x".utf8)), code: 1002),
        Refused(description: "a reserved control opcode", bytes: frame(0xB, []), code: 1002),
        Refused(description: "a ping without FIN", bytes: frame(0x9, Array("p".utf8), fin: false), code: 1002),
        Refused(
            description: "a ping of 126 bytes",
            bytes: [0x89, 0xFE, 0, 126, 0, 0, 0, 0] + Array(repeating: 0x70, count: 126), code: 1002),
        Refused(description: "RSV1 on a text frame", bytes: frame(0x1, Array("LAST".utf8), reserved: 4), code: 1002),
        Refused(description: "RSV3 on a close frame", bytes: frame(0x8, [0x03, 0xE8], reserved: 1), code: 1002),
        Refused(description: "a close of one byte", bytes: frame(0x8, [0x03]), code: 1002),
        Refused(description: "the close code 1005", bytes: frame(0x8, [0x03, 0xED]), code: 1002),
        Refused(description: "the close code 999", bytes: frame(0x8, [0x03, 0xE7]), code: 1002),
        Refused(
            description: "a continuation first", bytes: frame(0x0, Array("LAST".utf8)), code: 1002, onStream: false),
        Refused(
            description: "a text inside a message",
            bytes: frame(0x1, Array("LA".utf8), fin: false) + frame(0x1, Array("ST".utf8)),
            code: 1002, onStream: false),
        Refused(
            description: "a message of 16 KiB + 1 in two frames",
            bytes: frame(0x2, Array(repeating: 0x41, count: 1 << 14), fin: false) + frame(0x0, [0x41]), code: 1009,
            onStream: false),
    ]

    /// Each refused frame closes the connection with its code, after nothing else (on `/v1/stream`,
    /// after the snapshot); what `/v1/stream` does not assemble is ignored and the stream goes on.
    @Test(arguments: ["/v1/stream", "/ws/last"])
    func aRefusedFrameIsAnsweredWithItsCloseCodeAndTheConnectionCloses(path: String) async throws {
        let endpoint = try await Endpoint.start()
        for c in Self.refused {
            let socket = try RawSocket(port: endpoint.port)
            socket.send(Self.upgrade(path) + c.bytes)
            if path == "/ws/last" || c.onStream {
                let (frames, eof) = try await socket.frames()
                let answered = frames.filter { $0.opcode != 0x1 }
                #expect(answered == [.close(c.code)], "\(path), \(c)")
                #expect(eof, "\(path), \(c): the connection stays open")
            } else {
                // Ignored: a ping after it is answered.
                socket.send(Self.frame(0x9, Array("still".utf8)))
                let frames = try await socket.frames { $0.contains(.pong("still")) }.frames
                #expect(frames.filter { $0.opcode != 0x1 } == [.pong("still")], "\(path), \(c)")
            }
            socket.close()
        }
        await endpoint.stop()
    }

    /// Found with this suite: a message `/ws/last` refuses (WSCore throws) left its handler waiting on
    /// the client's queue for ever: no close frame, and a stream slot held. With one slot, refused
    /// messages one after the other each get their close, and a client after them is served.
    @Test func aRefusedMessageFreesItsStreamSlot() async throws {
        let endpoint = try await Endpoint.start { $0.stream.maxClients = 1 }
        for c in Self.refused where !c.onStream {
            let socket = try RawSocket(port: endpoint.port)
            socket.send(Self.upgrade("/ws/last") + c.bytes)
            let (frames, eof) = try await socket.frames()
            #expect(frames == [.close(c.code)] && eof, "\(c)")
            socket.close()
        }
        let socket = try RawSocket(port: endpoint.port)
        socket.send(Self.upgrade("/ws/last") + Self.frame(0x9, Array("served".utf8)))
        let frames = try await socket.frames { !$0.isEmpty }.frames
        #expect(frames == [.pong("served")])
        socket.close()
        await endpoint.stop()
    }

    /// `LAST` split in three fragments, a ping and a pong between them, unmasked or masked: one answer
    /// (the latest location), the ping's pong; a close is answered with 1000 and the connection closed.
    @Test(arguments: [false, true])
    func aFragmentedLASTIsAnsweredAsAWholeOne(masked: Bool) async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        #expect(try await raw.send(.GET, "/?id=van1&lat=48.2&lon=11.6&timestamp=1715679000").status == 200)
        let key: [UInt8]? = masked ? [0x37, 0xFA, 0x21, 0x3D] : nil
        let socket = try RawSocket(port: endpoint.port)
        socket.send(
            Self.upgrade("/ws/last") + Self.frame(0x1, Array("L".utf8), fin: false, key: key)
                + Self.frame(0x9, Array("ping".utf8), key: key)
                + Self.frame(0x0, Array("AS".utf8), fin: false, key: key)
                + Self.frame(0xA, [], key: key) + Self.frame(0x0, Array("T".utf8), key: key))
        let frames = try await socket.frames { $0.count == 2 }.frames
        #expect(frames.first == .pong("ping"))
        #expect(frames.last?.opcode == 0x1 && frames.last?.text.contains("\"tst\":1715679000") == true, "\(frames)")
        socket.send(Self.frame(0x8, [0x03, 0xE8], key: key))
        let (end, eof) = try await socket.frames(upgraded: true)
        #expect(end == [.close(1000)] && eof)
        socket.close()
        await raw.close()
        await endpoint.stop()
    }

    static func upgrade(_ path: String) -> [UInt8] {
        Array(
            ("GET \(path)?token=secret HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
    }

    /// A client frame (masked with `key`, or a fixed key by default) of less than 126 bytes, or any
    /// length with its 2-byte length field.
    static func frame(
        _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, reserved: UInt8 = 0,
        key: [UInt8]? = [0x11, 0x22, 0x33, 0x44]
    ) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | reserved << 4 | opcode]
        let mask: UInt8 = key == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(mask | UInt8(payload.count))
        } else {
            out += [mask | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        guard let key else { return out + payload }
        return out + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }
}

/// A frame as the server wrote it.
struct ServerFrame: Equatable, CustomStringConvertible {
    var fin: Bool
    var opcode: UInt8
    var masked: Bool
    var payload: [UInt8]

    var text: String { String(decoding: payload, as: UTF8.self) }
    var description: String { "\(opcode)\(masked ? " masked" : ""): \(payload.prefix(40))" }

    static func close(_ code: UInt16) -> ServerFrame {
        ServerFrame(fin: true, opcode: 0x8, masked: false, payload: [UInt8(code >> 8), UInt8(code & 0xFF)])
    }

    static func pong(_ text: String) -> ServerFrame {
        ServerFrame(fin: true, opcode: 0xA, masked: false, payload: Array(text.utf8))
    }

    /// The whole frames at the start of `bytes`, and how many bytes they take.
    static func parse(_ bytes: [UInt8]) -> (frames: [ServerFrame], used: Int) {
        var frames: [ServerFrame] = []
        var at = 0
        while at + 2 <= bytes.count {
            var i = at + 2
            var length = Int(bytes[at + 1] & 0x7F)
            if length >= 126 {
                let width = length == 126 ? 2 : 8
                guard i + width <= bytes.count else { break }
                length = bytes[i..<(i + width)].reduce(0) { $0 << 8 | Int($1) }
                i += width
            }
            let masked = bytes[at + 1] & 0x80 != 0
            if masked { i += 4 }
            guard i + length <= bytes.count else { break }
            frames.append(
                ServerFrame(
                    fin: bytes[at] & 0x80 != 0, opcode: bytes[at] & 0x0F, masked: masked,
                    payload: Array(bytes[i..<(i + length)])))
            at = i + length
        }
        return (frames, at)
    }
}

extension RawSocket {
    /// The frames after the 101 response (or from here, when `upgraded`), until `enough` says so or the
    /// server closes the connection (`eof`); throws when the answer is not a 101 or leaves bytes that
    /// are not whole frames.
    func frames(
        upgraded: Bool = false, until enough: @escaping @Sendable ([ServerFrame]) -> Bool = { _ in false }
    ) async throws -> (frames: [ServerFrame], eof: Bool) {
        let fd = self.fd
        let (bytes, eof) = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var out: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    if let end = upgraded ? 0 : RawSocket.headEnd(out) {
                        let body = Array(out[end...])
                        let parsed = ServerFrame.parse(body)
                        if parsed.used == body.count, enough(parsed.frames) {
                            return continuation.resume(returning: (out, false))
                        }
                    }
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return continuation.resume(returning: (out, n == 0)) }
                    out += buffer[0..<n]
                }
            }
        }
        let head = String(decoding: bytes.prefix(12), as: UTF8.self)
        guard let end = upgraded ? 0 : Self.headEnd(bytes), upgraded || head == "HTTP/1.1 101" else {
            throw Failure(description: "not upgraded: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        let parsed = ServerFrame.parse(Array(bytes[end...]))
        guard parsed.used == bytes.count - end else { throw Failure(description: "bytes after the last whole frame") }
        #expect(parsed.frames.allSatisfy { !$0.masked }, "a masked server frame")
        return (parsed.frames, eof)
    }

    /// Where the response head ends (after CR LF CR LF).
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        return (0...(bytes.count - 4)).first { bytes[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) }.map { $0 + 4 }
    }
}
