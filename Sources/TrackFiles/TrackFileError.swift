/// A track file that cannot be read: what was wrong and where.
///
/// Readers stop at the first error; every fix accepted before it has been delivered already.
/// ``message`` never holds a coordinate or a time of the file: it is safe to print and log.
public struct TrackFileError: Error, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Opening or reading the file failed (``TrackFileError/underlying`` says why).
        public static let io = Code(rawValue: "io")
        /// The content is none of the formats the readers know.
        public static let unrecognized = Code(rawValue: "unrecognized")
        /// The bytes break the format's syntax (XML, JSON, CSV, a `.rec` line).
        public static let malformed = Code(rawValue: "malformed")
        /// An XML document type declaration: refused, since its entities could expand without bound.
        public static let doctype = Code(rawValue: "doctype")
        /// An XML entity other than the five predefined ones and numeric references.
        public static let entity = Code(rawValue: "entity")
        /// A name, a value, a line or a nesting beyond the reader's bounds.
        public static let tooLarge = Code(rawValue: "too-large")
        /// A well-formed value that cannot be a position or a time (latitude 91, month 13).
        public static let invalidValue = Code(rawValue: "invalid-value")
        /// A header or document without what the format needs (no latitude column, no `gpx` root).
        public static let missingField = Code(rawValue: "missing-field")
    }

    public var code: Code
    /// A sentence saying what was wrong, without the file's values.
    public var message: String
    /// The format being read, when it was known.
    public var format: TrackFileFormat?
    /// The input's name (a path), when known.
    public var file: String?
    /// 1-based line of the problem, 0 when it has none.
    public var line: Int
    /// 0-based byte offset of the problem (in the decompressed bytes of a gzip file), -1 when it has none.
    public var byteOffset: Int64
    /// The cause, when another module's error led to this one (a read error).
    public var underlying: (any Error & Sendable)?

    public init(
        _ code: Code, _ message: String, format: TrackFileFormat? = nil, file: String? = nil, line: Int = 0,
        byteOffset: Int64 = -1, underlying: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.format = format
        self.file = file
        self.line = line
        self.byteOffset = byteOffset
        self.underlying = underlying
    }

    /// `walk.gpx:12: byte 345: malformed: gpx: expected '>' after '/'`
    public var description: String {
        // A file that cannot be opened or read: its reader's own words already name the file and
        // the byte (`day.gpx.gz: byte 1484: gzip data ends early (truncated file?)`).
        if code == .io, let underlying { return "\(underlying)" }
        var s = file ?? "<input>"
        if line > 0 { s += ":\(line)" }
        if byteOffset >= 0 { s += ": byte \(byteOffset)" }
        s += ": \(code)"
        if let format { s += ": \(format)" }
        s += ": \(message)"
        if let underlying { s += " (\(underlying))" }
        return s
    }
}

/// Where a reader is in its input: the byte offset and line of the next byte.
public struct TrackFilePosition: Hashable, Sendable {
    /// Bytes consumed so far.
    public var offset: Int64 = 0
    /// 1-based line of the next byte.
    public var line: Int = 1

    public init() {}
}

/// What a reader accepted and left out so far.
public struct TrackFileStatistics: Hashable, Sendable {
    /// Fixes delivered.
    public var fixes = 0
    /// Points left out for lack of a time or a position (an untimed waypoint, an empty CSV cell).
    public var untimed = 0
    /// Records of other kinds left out (OwnTracks transitions, GeoJSON polygons, ...).
    public var otherRecords = 0
    /// The format's own version, when it states one (GPX `1.0` or `1.1`).
    public var version: String?

    public init() {}
}
