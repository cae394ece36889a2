/// An NMEA decoding error: what was wrong and where.
///
/// The decoder reports one for every sentence it rejects. In lenient mode (the default) it counts
/// it, tells the decoder's diagnostic handler and goes on; in strict mode decoding stops with it.
/// ``text`` holds the offending bytes (escaped, at most 120 characters), which may include a
/// position: print it only where the user asked for diagnostics.
public struct NMEAError: Error, Hashable, Sendable {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The `*hh` checksum does not match the XOR of the sentence's bytes.
        public static let badChecksum = Code(rawValue: "bad-checksum")
        /// The sentence ended without a `*hh` checksum.
        public static let missingChecksum = Code(rawValue: "missing-checksum")
        /// The two characters after `*` are not hexadecimal digits.
        public static let invalidChecksumField = Code(rawValue: "invalid-checksum-field")
        /// A new sentence started (`$`/`!`) before the previous one ended.
        public static let truncatedSentence = Code(rawValue: "truncated-sentence")
        /// The line exceeded the maximum sentence length without ending.
        public static let lineTooLong = Code(rawValue: "line-too-long")
        /// A control or non-ASCII byte inside a sentence.
        public static let invalidCharacter = Code(rawValue: "invalid-character")
        /// Bytes between the checksum and the end of the line.
        public static let trailingCharacters = Code(rawValue: "trailing-characters")
        /// The address field is not a talker and sentence type.
        public static let invalidAddress = Code(rawValue: "invalid-address")
        /// The sentence has fewer fields than its type requires.
        public static let tooFewFields = Code(rawValue: "too-few-fields")
        /// The sentence has more fields than any known sentence.
        public static let tooManyFields = Code(rawValue: "too-many-fields")
        /// A field does not have the expected syntax (letters in a number, ...).
        public static let malformedField = Code(rawValue: "malformed-field")
        /// A field is well-formed but its value is impossible (minutes ≥ 60, month 13, ...).
        public static let fieldOutOfRange = Code(rawValue: "field-out-of-range")
        /// Reading the input failed.
        public static let io = Code(rawValue: "io")

        /// Every code the decoder itself produces (not ``io``), in a stable order.
        public static let decoderCodes: [Code] = [
            .badChecksum, .missingChecksum, .invalidChecksumField, .truncatedSentence, .lineTooLong,
            .invalidCharacter, .trailingCharacters, .invalidAddress, .tooFewFields, .tooManyFields,
            .malformedField, .fieldOutOfRange,
        ]
    }

    public var code: Code
    /// A sentence saying what was wrong, without the offending bytes.
    public var message: String
    /// The input's name (a path, `<stdin>`), when known.
    public var file: String?
    /// 1-based line of the input where the offending sentence starts.
    public var line: Int
    /// 0-based byte offset of the sentence's first byte (`$`) in the input.
    public var byteOffset: Int64
    /// The offending bytes, escaped (`\xNN`), at most 120 characters.
    public var text: String
    /// The 1-based field index the problem is in, when it is in one field.
    public var field: Int?
    /// The underlying system error number, for ``Code/io``.
    public var errno: Int32?

    public init(
        _ code: Code, _ message: String, file: String? = nil, line: Int, byteOffset: Int64, text: String = "",
        field: Int? = nil, errno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
        self.byteOffset = byteOffset
        self.text = text
        self.field = field
        self.errno = errno
    }

    /// Escapes bytes for display: printable ASCII as is, everything else as `\xNN`, cut at 120 characters.
    public static func escape<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = ""
        for b in bytes {
            if out.utf8.count >= 120 {
                out += "…"
                break
            }
            if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "\\") {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                let hex = Array("0123456789ABCDEF")
                out += "\\x\(hex[Int(b >> 4)])\(hex[Int(b & 15)])"
            }
        }
        return out
    }
}

extension NMEAError: CustomStringConvertible {
    /// `walk.nmea:12: byte 345: bad-checksum: stated 4D, computed 4F: $GPGGA,...*4D`; a file's own
    /// failure without the line it has none of, nor a code: `walk.nmea: cannot open: No such file or
    /// directory`, `day.nmea.gz: byte 300000: gzip data ends early (truncated file?)`.
    public var description: String {
        var s = file ?? "<input>"
        if line > 0 { s += ":\(line)" }
        if line > 0 || byteOffset > 0 { s += ": byte \(byteOffset)" }
        s += code == .io ? ": \(message)" : ": \(code): \(message)"
        if !text.isEmpty { s += ": \(text)" }
        return s
    }
}
