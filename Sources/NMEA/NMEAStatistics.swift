/// Counters a decoder keeps while it runs.
public struct NMEAStatistics: Hashable, Sendable {
    /// Bytes fed to the decoder.
    public var bytes: Int64 = 0
    /// Lines seen: line feeds, plus one for a last line without one. Line numbers count line
    /// feeds only, as editors and `grep -n` do; a lone CR ends a sentence but not a line.
    public var lines: Int = 0
    /// Sentences framed with a valid checksum, of any type.
    public var sentences: Int = 0
    /// Sentences decoded into a fix (GGA, RMC, GLL, GSA, GSV, VTG, GNS, ZDA, GST).
    public var decodedSentences: Int = 0
    /// Epochs emitted as fixes.
    public var fixes: Int = 0
    /// Emitted fixes with a 2D/3D position.
    public var positionFixes: Int = 0
    /// Bytes outside any sentence (garbage, binary packets, comments), line ends excluded.
    public var skippedBytes: Int64 = 0
    /// Sentences with a valid checksum but a type we do not decode (`$GPXYZ`, `!AIVDM`...).
    public var unknownSentences: Int = 0
    /// Proprietary sentences (`$P...`), counted and skipped.
    public var proprietarySentences: Int = 0
    /// Sentences of a known type whose time differed from their epoch's only by arriving late
    /// (after the epoch had been emitted), dropped.
    public var lateSentences: Int = 0
    /// Rejected sentences by error code.
    public var errors: [NMEAError.Code: Int] = [:]

    public init() {}

    /// All rejected sentences.
    public var rejected: Int { errors.values.reduce(0, +) }

    /// Sentences rejected with a bad checksum.
    public var badChecksums: Int { errors[.badChecksum, default: 0] }
}
