/// TrackServer's error for settings: what (``code``, ``message``) and which (``field`` of ``Faults``
/// or of the configuration, ``value``). The stores' own failures are `TrackStoreError`, an export's
/// `TrailExportError`; an HTTP refusal is an ``ErrorAnswer``.
public struct TrackServerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A value of ``Faults`` can't be used (``TrackServerError/field`` names it).
        public static let invalidFaults = Code(rawValue: "invalid-faults")
        /// An origin of ``TrackServer/Configuration/corsOrigins`` has no `://` (``TrackServerError/value``).
        public static let corsOriginNotAnOrigin = Code(rawValue: "cors-origin-not-an-origin")
        /// An origin of ``TrackServer/Configuration/corsOrigins`` has no scheme before `://`.
        public static let corsOriginWithoutScheme = Code(rawValue: "cors-origin-without-scheme")
        /// An origin of ``TrackServer/Configuration/corsOrigins`` has a path, a trailing slash, a space or a comma.
        public static let corsOriginWithPath = Code(rawValue: "cors-origin-with-path")
        /// An address cannot be listened on (``TrackServerError/value``: the address; the message says why).
        public static let cannotListen = Code(rawValue: "cannot-listen")
    }

    public var code: Code
    /// What is wrong, in a sentence.
    public var message: String
    /// The key of ``Faults`` that is wrong (`failRate`), for ``Code/invalidFaults``.
    public var field: String?
    /// The value that is wrong (an origin of ``TrackServer/Configuration/corsOrigins``).
    public var value: String?

    public init(_ code: Code, _ message: String, field: String? = nil, value: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
        self.value = value
    }

    public var description: String { message }
}
