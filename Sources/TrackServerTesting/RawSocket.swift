import Dispatch
import Foundation
import KeepTrackTesting

#if canImport(Glibc)
    import Glibc
#endif

/// A plain TCP connection to an endpoint on 127.0.0.1, for requests no HTTP client would send:
/// half a head, a body that never comes, a connection that sends nothing. The blocking calls run
/// on Dispatch's threads, never on the Swift concurrency pool the server's handlers use; every
/// read gives up after `guardSeconds` times `hangGuardPatience` (a hang guard, not a measurement:
/// in a full run on 2 cores the server's handler can wait long for a thread of the pool).
public final class RawSocket: @unchecked Sendable {
    public let fd: Int32
    var closed = false

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public init(port: Int, guardSeconds: Int = 15) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: Int(Double(guardSeconds) * hangGuardPatience), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw Failure(description: "connect: errno \(errno)")
        }
    }

    deinit { if !closed { Glibc.close(fd) } }

    public func close() {
        if !closed { Glibc.close(fd) }
        closed = true
    }

    /// Sends all of `text` (a failure is ignored: the server may have closed already).
    public func send(_ text: String) {
        send(Array(text.utf8))
    }

    public func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// What arrived until the server closed the connection (`eof` true), or until the guard
    /// expired or the connection was reset (`eof` false).
    public func readToEnd() async -> (text: String, eof: Bool) {
        let (bytes, eof) = await readBytesToEnd()
        return (String(decoding: bytes, as: UTF8.self), eof)
    }

    /// The bytes of ``readToEnd()``.
    public func readBytesToEnd() async -> (bytes: [UInt8], eof: Bool) {
        await blocking {
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                if n == 0 { return (out, true) }
                if n < 0 {
                    if errno == EINTR { continue }
                    return (out, false)
                }
                out += buffer[0..<n]
            }
        }
    }

    /// Whether the server ends the connection before the guard expires: an end of stream, or a reset
    /// (a server that closes a connection whose bytes it has not read yet resets it); `false` when the
    /// guard expired first. What arrived is dropped.
    public func closedByServer() async -> Bool {
        await blocking {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                if n == 0 { return true }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno == ECONNRESET
                }
            }
        }
    }

    /// One response: the head and a `Content-Length` body (or what came before the connection
    /// closed).
    public func readResponse() async -> String {
        await blocking {
            var out: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                if let end = Self.responseEnd(out) { return String(decoding: out[..<end], as: UTF8.self) }
                let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return String(decoding: out, as: UTF8.self) }
                out += buffer[0..<n]
            }
        }
    }

    /// Where a complete response ends in `bytes`, if it is complete.
    public static func responseEnd(_ bytes: [UInt8]) -> Int? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard bytes.count >= 4,
            let headEnd = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<$0 + 4]) == separator })
        else { return nil }
        let head = String(decoding: bytes[..<headEnd], as: UTF8.self).lowercased()
        var length = 0
        for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        let end = headEnd + 4 + length
        return bytes.count >= end ? end : nil
    }

    private func blocking<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }
}
