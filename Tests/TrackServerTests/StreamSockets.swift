import Testing
import TrackServerTesting

/// Streams read as the bytes on the wire, on a raw socket. The WebSocket client library's `connect`
/// was seen (about one run in ten) not to return although the server had said its close and ended the
/// connection: a close is read here, not through it.
extension Endpoint {
    /// A socket that asked `/v1/stream` + `query` for an upgrade (its answer is left to read).
    func openStream(_ query: String) throws -> RawSocket {
        let socket = try RawSocket(port: port)
        socket.send(
            "GET /v1/stream\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        return socket
    }

    /// A stream refused at once: the upgrade (101), then a close frame's code and reason, then the end
    /// of the connection.
    func streamRefusal(_ query: String) async throws -> (code: Int, reason: String) {
        let socket = try openStream(query)
        defer { socket.close() }
        let (bytes, eof) = await socket.readBytesToEnd()
        #expect(eof, "the connection stays open")
        let separator = Array("\r\n\r\n".utf8)
        let end = try #require(
            (0..<max(0, bytes.count - 3)).first { Array(bytes[$0..<$0 + 4]) == separator },
            "no upgrade answer: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 101")
        let frame = Array(bytes[(end + 4)...])
        // An unmasked close frame (0x88) whose payload (under 126 bytes) is the code and the reason.
        try #require(frame.count >= 4 && frame[0] == 0x88 && Int(frame[1]) == frame.count - 2, "\(frame)")
        return (Int(frame[2]) << 8 | Int(frame[3]), String(decoding: frame[4...], as: UTF8.self))
    }
}
