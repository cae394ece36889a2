import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A small blocking HTTP/1.1 client for servers a test runs on 127.0.0.1 (Home Assistant, a
/// receiver): one request a connection (`Connection: close`), the answer read to its end (a
/// `Content-Length`, chunks, or the connection's close). It blocks: call it through ``offThePool(_:)``.
public enum LoopbackHTTP {
    public struct Response: Sendable {
        public var status: Int
        /// Header names lowercased.
        public var headers: [String: String]
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
        /// The body as JSON (`JSONSerialization`), or `nil` when it is not.
        public var json: Any? { try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
    }

    /// Why a request got no answer: the connection was refused, timed out or closed early.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Sends `method path` to 127.0.0.1:`port` and reads the answer, each step within `timeout` seconds
    /// times ``hangGuardPatience`` (a hang guard).
    /// - Throws: ``Failure`` when the server cannot be reached or does not answer in HTTP.
    public static func request(
        _ method: String, port: Int, path: String, headers: [(String, String)] = [], body: [UInt8] = [],
        timeout: Double = 30
    ) throws -> Response {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let patient = timeout * hangGuardPatience
        var limit = timeval(tv_sec: Int(patient), tv_usec: Int((patient - patient.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw Failure(description: "connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        head += "Content-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let request = Array((head + "\r\n").utf8) + body
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw Failure(description: "\(method) \(path) to port \(port): \(String(cString: strerror(errno)))")
            }
            sent += n
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 {
                throw Failure(
                    description: "\(method) \(path) on port \(port): no answer within \(timeout) s "
                        + "(\(String(cString: strerror(errno))))")
            }
            if n == 0 { break }
            answer += chunk[..<n]
        }
        return try parse(answer, what: "\(method) \(path) on port \(port)")
    }

    static func parse(_ bytes: [UInt8], what: String) throws -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = bytes.firstRange(of: separator) else {
            throw Failure(description: "\(what): an answer without a complete head (\(bytes.count) bytes)")
        }
        let lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusWords = lines[0].split(separator: " ")
        guard statusWords.count >= 2, let status = Int(statusWords[1]) else {
            throw Failure(description: "\(what): not an HTTP status line: \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        var body = Array(bytes[end.upperBound...])
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try dechunked(body, what: what)
        } else if let length = headers["content-length"].flatMap(Int.init), length <= body.count {
            body = Array(body.prefix(length))
        }
        return Response(status: status, headers: headers, body: body)
    }

    static func dechunked(_ bytes: [UInt8], what: String) throws -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            guard let lineEnd = bytes[i...].firstRange(of: [13, 10]) else { break }
            let sizeText = String(decoding: bytes[i..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                throw Failure(description: "\(what): a bad chunk size '\(sizeText)'")
            }
            if size == 0 { break }
            let start = lineEnd.upperBound
            guard start + size <= bytes.count else { throw Failure(description: "\(what): a chunk cut short") }
            out += bytes[start..<start + size]
            i = start + size + 2
        }
        return out
    }
}
