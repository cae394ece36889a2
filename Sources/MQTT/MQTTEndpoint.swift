/// A broker's address from an `mqtt://[USER[:PASS]@]HOST[:PORT][/TOPIC]` or `mqtts://...` URL.
///
/// The port is 1883 for `mqtt://` and 8883 for `mqtts://` (TLS) when absent. User and password may
/// be percent-encoded (`%40` for `@`). The path, without its first `/`, is the topic (`""` when
/// absent: the caller picks its default).
public struct MQTTEndpoint: Hashable, Sendable, CustomStringConvertible {
    public var tls: Bool
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var topic: String

    /// Whether `url` names a broker (`mqtt://` or `mqtts://`), well-formed or not.
    public static func isMQTT(_ url: String) -> Bool { url.hasPrefix("mqtt://") || url.hasPrefix("mqtts://") }

    /// - Parameter wildcards: whether the topic may hold `+` and `#` (a subscription's filter).
    /// - Throws: ``MQTTError`` (`.configuration`) naming what is wrong with `url` (the password is
    ///   never quoted).
    public init(parsing url: String, wildcards: Bool = false) throws(MQTTError) {
        let rest: Substring
        if url.hasPrefix("mqtts://") {
            tls = true
            rest = url.dropFirst("mqtts://".count)
        } else if url.hasPrefix("mqtt://") {
            tls = false
            rest = url.dropFirst("mqtt://".count)
        } else {
            throw MQTTError(.configuration, "the broker URL must start with mqtt:// or mqtts://")
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash]
        topic = slash < rest.endIndex ? String(rest[rest.index(after: slash)...]) : ""
        if !wildcards && (topic.contains("+") || topic.contains("#")) {
            throw MQTTError(
                .configuration,
                "the topic '\(topic)' of an mqtt:// URL must not contain + or # "
                    + "(wildcards are for subscriptions)")
        }
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            let parts = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let user = Self.percentDecoded(parts[0]), !user.isEmpty else {
                throw MQTTError(.configuration, "the user name in the mqtt:// URL is empty or badly percent-encoded")
            }
            username = user
            if parts.count == 2 {
                guard let pass = Self.percentDecoded(parts[1]) else {
                    throw MQTTError(.configuration, "the password in the mqtt:// URL is badly percent-encoded")
                }
                password = pass
            }
        }
        var hostPart = authority
        var portText: Substring?
        if hostPart.hasPrefix("[") {
            // [IPv6]:port
            guard let close = hostPart.firstIndex(of: "]") else {
                throw MQTTError(.configuration, "the host '\(hostPart)' of the mqtt:// URL has no closing ]")
            }
            let after = hostPart[hostPart.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw MQTTError(.configuration, "unexpected '\(after)' after the host of the mqtt:// URL")
            }
            hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
        } else if let colon = hostPart.lastIndex(of: ":") {
            portText = hostPart[hostPart.index(after: colon)...]
            hostPart = hostPart[..<colon]
        }
        guard !hostPart.isEmpty else { throw MQTTError(.configuration, "the mqtt:// URL has no host") }
        host = String(hostPart)
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else {
                throw MQTTError(
                    .configuration, "the port '\(portText)' of the mqtt:// URL is not a number from 1 to 65535")
            }
            port = p
        } else {
            port = tls ? 8883 : 1883
        }
    }

    /// `HOST:PORT`, for messages (no credentials, no topic).
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static func percentDecoded(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = Array(s.utf8).makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hi = hex(h), let lo = hex(l) else { return nil }
                bytes.append(hi << 4 | lo)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// MQTT's error: a code, a sentence naming the broker and what went wrong, and where: the CA
/// file (``caFile``) and the system's reason (``errno``) when a file is the problem.
public struct MQTTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The URL, TLS files or options cannot be used.
        public static let configuration = Code(rawValue: "configuration")
        /// The broker cannot be reached (refused, unresolvable, TLS handshake failed, timed out).
        public static let unreachable = Code(rawValue: "unreachable")
        /// The broker refused our user name or password, or says we are not authorised.
        public static let credentials = Code(rawValue: "credentials")
        /// The broker refused the connection for another reason.
        public static let refused = Code(rawValue: "refused")
        /// The connection was lost.
        public static let disconnected = Code(rawValue: "disconnected")
    }

    public var code: Code
    public var message: String
    /// The CA file that can't be used, for ``Code/configuration``.
    public var caFile: String?
    /// The system's error number, when the system said why.
    public var errno: Int32?

    public init(_ code: Code, _ message: String, caFile: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.caFile = caFile
        self.errno = errno
    }

    public var description: String { message }
}
