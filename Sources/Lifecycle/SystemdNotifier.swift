#if canImport(Glibc)
    import Glibc
#endif

/// Sends systemd's `sd_notify` messages (`READY=1`, `WATCHDOG=1`, `STATUS=...`) to the datagram
/// socket named by `NOTIFY_SOCKET`, as a `Type=notify` service with `WatchdogSec=` must.
///
/// The protocol is one datagram per message on an `AF_UNIX` socket: a path, or an abstract name
/// when it starts with `@`. Sending never blocks (`MSG_DONTWAIT`): a message the socket cannot take
/// now is dropped, as systemd's own `sd_notify` would rather do than stall the service.
public struct SystemdNotifier: Sendable {
    /// The socket's address as given (`/run/systemd/notify` or `@name`).
    public let socketPath: String
    /// The watchdog interval systemd expects pings within (`WATCHDOG_USEC`), if it set one.
    public let watchdogInterval: Double?

    /// The notifier for this process's environment, or `nil` when `NOTIFY_SOCKET` is not set.
    public init?(environment: [String: String]) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        socketPath = path
        if let usec = environment["WATCHDOG_USEC"].flatMap(Double.init), usec > 0 {
            watchdogInterval = usec / 1e6
        } else {
            watchdogInterval = nil
        }
    }

    /// A notifier for the socket at `path`.
    public init(socketPath path: String, watchdogInterval: Double? = nil) {
        socketPath = path
        self.watchdogInterval = watchdogInterval
    }

    /// Sends `message` (lines of `KEY=value`). Returns whether the datagram was sent.
    @discardableResult
    public func notify(_ message: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bytes.withUnsafeBytes { b in
                    sendto(fd, b.baseAddress, b.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), sa, length)
                }
            }
        }
        return sent == bytes.count
    }
}
