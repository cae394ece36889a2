/// Formats' error: bytes or text that a format does not accept, what was wrong (``code``,
/// ``message``) and where (``byteOffset``, the key path at the start of ``message``:
/// `records[3].lat`).
///
/// The message names keys and values the reader could not use, never a position it read.
public struct FormatsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Well-formed, but a value is missing or not what the format allows (the default).
        public static let invalid = Code(rawValue: "invalid")
        /// The bytes are not JSON (``FormatsError/byteOffset`` says where; nil when they end early).
        public static let malformedJSON = Code(rawValue: "malformed-json")
        /// A body that only grows past its limit when inflated: an HTTP server answers it 413, like
        /// a body too large as sent.
        public static let tooLarge = Code(rawValue: "too-large")
        /// Well-formed, but of a kind this reader does not handle (an encrypted OwnTracks payload):
        /// an HTTP server answers it 415.
        public static let unsupported = Code(rawValue: "unsupported")
        /// A text that is not a duration (``DurationText``; ``FormatsError/text`` holds it).
        public static let notADuration = Code(rawValue: "not-a-duration")
        /// A record that no store keeps (``TrailRecord/problem(now:)``): ``FormatsError/field`` names
        /// the key (`lat`, `time`), the message says what is wrong.
        public static let invalidRecord = Code(rawValue: "invalid-record")
    }

    /// What was wrong, starting with where (`records[0].lat: missing`).
    public var message: String
    public var code: Code
    /// The 0-based byte offset of the problem in the input, when known.
    public var byteOffset: Int?
    /// The offending text as given, when the problem is one value (a duration).
    public var text: String?
    /// The key of the value that is wrong, for ``Code/invalidRecord`` (`lat`, `time`).
    public var field: String?

    public init(
        _ code: Code, _ message: String, byteOffset: Int? = nil, text: String? = nil, field: String? = nil
    ) {
        self.message = message
        self.code = code
        self.byteOffset = byteOffset
        self.text = text
        self.field = field
    }

    public var description: String { message }
}
