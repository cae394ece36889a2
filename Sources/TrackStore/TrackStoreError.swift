/// A store's error: what (``code``, ``message``) and where (the database, the device), with the cause
/// (GRDB's or PostgreSQL's error) kept in ``underlying``.
public struct TrackStoreError: Error, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A record's device or region id holds a NUL byte, which no store keeps: nothing of the batch
        /// is stored.
        public static let nulByte = Code(rawValue: "nul-byte")
        /// A PostgreSQL URL that can't be one (the message names the part).
        public static let invalidURL = Code(rawValue: "invalid-url")
        /// The database did not answer, or refused the connection (the cause says which).
        public static let unreachable = Code(rawValue: "unreachable")
        /// The database answered, but can't be opened as a store: a file that is not SQLite, a
        /// migration failing, a role without the rights.
        public static let cannotOpen = Code(rawValue: "cannot-open")
        /// The PostgreSQL database has no PostGIS, and this role may not create it.
        public static let postGISMissing = Code(rawValue: "postgis-missing")
        /// A device id can't be given a token (empty, too long, a control character): ``TrackStoreError/device``.
        public static let invalidDeviceID = Code(rawValue: "invalid-device-id")
        /// The device has a token already: ``TrackStoreError/device``.
        public static let tokenExists = Code(rawValue: "token-exists")
        /// What the store kept does not read back (the geofences, a device's event state).
        public static let corrupt = Code(rawValue: "corrupt")
        /// A share link can't be made so (an expiry not ahead or too far, a window out of order).
        public static let invalidShare = Code(rawValue: "invalid-share")
    }

    public var code: Code
    /// What failed and where, without the cause.
    public var message: String
    /// The device id, for the credentials' codes.
    public var device: String?
    /// The cause in words, when its own description hides them (PostgreSQL's message and hint).
    public var reason: String?
    /// The error this one comes from, when there is one.
    public var underlying: (any Error)?

    public init(
        _ code: Code, _ message: String, device: String? = nil, reason: String? = nil, underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.device = device
        self.reason = reason
        self.underlying = underlying
    }

    /// The message, then the cause: its words, or its own description.
    public var description: String {
        if let reason { return "\(message): \(reason)" }
        return underlying.map { "\(message): \($0)" } ?? message
    }
}
