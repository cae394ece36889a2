import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/1.1 exchange over a plain TCP connection to 127.0.0.1, `Connection: close`: what any
/// client sends, and a head without its body when a case says so (a `Content-Length` over the limit,
/// answered from the head). Blocking calls run on Dispatch's threads; reads give up after 30 s (a hang
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
        let port = self.port
        let request = bytes
        let received: Result<[UInt8], Failure> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: Self.blockingExchange(port: port, request)) }
        }
        return try Self.parse(try received.get(), head: method == "HEAD")
    }

    static func blockingExchange(port: Int, _ bytes: [UInt8]) -> Result<[UInt8], Failure> {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(Failure(description: "socket: errno \(errno)")) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return .failure(Failure(description: "connect: errno \(errno)")) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }  // The server may answer and close before the rest.
            sent += n
        }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return .success(out) }
            if n < 0 {
                if errno == EINTR { continue }
                // A reset after the answer (the server closed with our body unread): what came is the answer.
                return out.isEmpty ? .failure(Failure(description: "recv: errno \(errno)")) : .success(out)
            }
            out += buffer[0..<n]
        }
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
