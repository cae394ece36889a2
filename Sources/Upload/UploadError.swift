/// Upload's error: a code, a sentence naming what and where, and the cause (``underlying``).
public struct UploadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The outbox file cannot be opened, read or written (a full disk, permissions).
        public static let storage = Code(rawValue: "storage")
        /// The outbox belongs to another device.
        public static let deviceMismatch = Code(rawValue: "device-mismatch")
        /// The endpoint's URL or TLS settings cannot be used.
        public static let configuration = Code(rawValue: "configuration")
    }

    /// A setting of the uploader that a failure says to check; the command line names its option.
    public enum Setting: String, Hashable, Sendable, CaseIterable {
        /// The endpoint's URL (for MQTT, with the user name and password in it).
        case url
        /// The upload format.
        case format
        /// The device id the records are filed under.
        case deviceID
        /// The bearer token.
        case token
        /// The CA file trusted for TLS.
        case caFile
        /// The secret OwnTracks payloads are encrypted with.
        case secret
    }

    public var code: Code
    /// What failed and where (`cannot open the outbox PATH`), without the cause.
    public var message: String
    /// The outbox's path, for ``Code/storage``.
    public var path: String?
    /// The error this one comes from (GRDB's, the MQTT transport's), when there is one.
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, path: String? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    /// Equal when they say the same thing about the same outbox (the cause is compared by its description).
    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.message == b.message && a.path == b.path
            && a.underlying.map { "\($0)" } == b.underlying.map { "\($0)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(path)
    }

    /// The message, then the cause's own description.
    public var description: String { underlying.map { "\(message): \($0)" } ?? message }
}
