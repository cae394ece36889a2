import Foundation
import TrackServerTesting

/// One HTTP/1.1 exchange over a plain TCP connection to 127.0.0.1, `Connection: close`: what any
/// client sends, and a head without its body when a case says so (a `Content-Length` over the limit,
/// answered from the head). The socket is TrackServerTesting's `RawSocket`; reads give up after 30 s (a hang
/// guard, not a measurement).
struct RawHTTP {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    struct Answer {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    let port: Int

    /// Sends `method target` with `headers` and `body` (`declaredLength` instead of the body's length,
    /// the body then not sent), and reads the answer until the server closes the connection.
    func exchange(
        _ method: String, _ target: String, headers: [(String, String)], body: [UInt8]?, declaredLength: Int? = nil
    ) async throws -> Answer {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let declaredLength {
            head += "Content-Length: \(declaredLength)\r\n"
        } else if let body {
            head += "Content-Length: \(body.count)\r\n"
        }
        var bytes = Array((head + "\r\n").utf8)
        if declaredLength == nil, let body { bytes += body }
        let socket = try RawSocket(port: port, guardSeconds: 30)
        defer { socket.close() }
        socket.send(bytes)  // The server may answer and close before the rest.
        let (received, eof) = await socket.readBytesToEnd()
        // A reset after the answer (the server closed with our body unread): what came is the answer.
        guard eof || !received.isEmpty else {
            throw Failure(description: "no answer: the connection was reset, or 30 s passed")
        }
        return try Self.parse(received, head: method == "HEAD")
    }

    /// The status, headers and body of a response read to its connection's end (a HEAD's answer has
    /// no body, whatever its `Content-Length`).
    static func parse(_ bytes: [UInt8], head: Bool) throws -> Answer {
        let separator = Array("\r\n\r\n".utf8)
        guard bytes.count >= 4,
            let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<$0 + 4]) == separator })
        else { throw Failure(description: "no complete response head in \(bytes.count) bytes") }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let first = lines[0].split(separator: " ", maxSplits: 2)
        guard first.count >= 2, first[0].hasPrefix("HTTP/1."), let status = Int(first[1]) else {
            throw Failure(description: "not a status line: '\(lines[0].prefix(80))'")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append(
                (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var body = head ? [] : Array(bytes[(end + 4)...])
        if headers.contains(where: { $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased() == "chunked" }
        ) {
            body = try dechunk(body)
        }
        return Answer(status: status, headers: headers, body: body)
    }

    static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            guard let lineEnd = (i..<max(i, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                let size = Int(
                    String(decoding: bytes[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16)
            else { throw Failure(description: "a bad chunk at byte \(i)") }
            if size == 0 { break }
            let start = lineEnd + 2
            guard start + size <= bytes.count else { throw Failure(description: "a chunk cut short") }
            out += bytes[start..<start + size]
            i = start + size + 2
        }
        return out
    }
}
