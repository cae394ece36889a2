import Formats

/// Why an OwnTracks message could not be encrypted or decrypted: what was wrong, without the
/// message's content (which holds a position).
public struct OwnTracksCryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The envelope is not `{"_type":"encrypted","data":BASE64}` with room for a nonce and a
        /// MAC (``underlying`` says what).
        public static let malformed = Code(rawValue: "malformed")
        /// The envelope's `data` is longer than ``OwnTracksEnvelope/maxDataBytes``.
        public static let tooLarge = Code(rawValue: "too-large")
        /// The MAC does not match: another key, or bytes changed on the way.
        public static let notAuthentic = Code(rawValue: "not-authentic")
        /// The passphrase is empty (OwnTracks then sends in the clear).
        public static let emptySecret = Code(rawValue: "empty-secret")
        /// libsodium could not be initialised.
        public static let library = Code(rawValue: "library")
    }

    public var code: Code
    /// A sentence saying what was wrong.
    public var message: String
    /// The envelope's reading error, for ``Code/malformed`` and ``Code/tooLarge``.
    public var underlying: FormatsError?

    public init(_ code: Code, _ message: String, underlying: FormatsError? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}
