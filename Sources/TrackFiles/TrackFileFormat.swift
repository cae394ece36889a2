import Geo
import NMEA

/// The track file formats `keeptrack replay` reads, told apart by content, never by name.
public enum TrackFileFormat: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// NMEA 0183 sentences (read by `NMEADecoder`, not by a ``TrackReader``).
    case nmea
    /// GPX 1.0 or 1.1.
    case gpx
    /// GeoJSON (a FeatureCollection, a Feature, a geometry; Overland batches).
    case geojson
    /// Google Takeout location history (`Records.json`, `Location History.json`).
    case takeout
    /// CSV with a header naming latitude, longitude and time columns.
    case csv
    /// An OwnTracks Recorder `.rec` file.
    case owntracksRec = "owntracks-rec"

    public var description: String { rawValue }

    /// How many leading bytes ``sniff(_:isWholeFile:)`` looks at, at most.
    public static let sniffLength = 64 * 1024

    /// The format of a file that starts with `head`.
    ///
    /// XML is GPX, JSON with `latitudeE7` or `timestampMs` keys is Takeout and other JSON GeoJSON;
    /// a first line of `time TAB topic TAB` is a `.rec` file, a first line of two columns or more
    /// naming a latitude, a longitude or a time column a CSV header; anything else is NMEA, whose decoder skips what is not a
    /// sentence and counts it (as `replay` always did).
    ///
    /// - Parameters:
    ///   - head: the file's first bytes (decompressed), up to ``sniffLength``.
    ///   - isWholeFile: whether `head` is the whole file (a first line without a line end is complete).
    public static func sniff(_ head: UnsafeRawBufferPointer, isWholeFile: Bool = false) -> TrackFileFormat {
        var i = 0
        if head.count >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF { i = 3 }
        let textStart = i
        while i < head.count, head[i] == 0x20 || head[i] == 0x0A || head[i] == 0x0D || head[i] == 0x09 { i += 1 }
        guard i < head.count else { return .nmea }
        switch head[i] {
        case UInt8(ascii: "<"): return .gpx
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if contains(head, "\"latitudeE7\"") || contains(head, "\"timestampMs\"") { return .takeout }
            return .geojson
        default: break
        }
        let rest = UnsafeRawBufferPointer(rebasing: head[textStart...])
        let lineEnd = rest.firstIndex(of: 0x0A)
        guard lineEnd != nil || isWholeFile else { return .nmea }
        let line = UnsafeRawBufferPointer(rebasing: rest[..<(lineEnd ?? rest.endIndex)])
        if RecReader.isRecLine(line) { return .owntracksRec }
        if line.first != UInt8(ascii: "$") && line.first != UInt8(ascii: "!") && CSVReader.isHeader(line) {
            return .csv
        }
        return .nmea
    }

    static func contains(_ bytes: UnsafeRawBufferPointer, _ s: StaticString) -> Bool {
        let needle = UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)
        guard bytes.count >= needle.count else { return false }
        var k = 0
        while k <= bytes.count - needle.count {
            if bytes[k] == needle[0]
                && needle.elementsEqual(UnsafeRawBufferPointer(rebasing: bytes[k..<k + needle.count]))
            {
                return true
            }
            k += 1
        }
        return false
    }

    /// The format of the file at `path` (gzip decompressed first), from its first bytes (those
    /// before a read error, when one comes within them).
    ///
    /// - Throws: ``TrackFileError`` with code ``TrackFileError/Code/io`` when nothing can be read.
    public static func sniff(path: String) throws(TrackFileError) -> TrackFileFormat {
        let reader: NMEAFileReader
        do {
            reader = try NMEAFileReader(path: path)
        } catch {
            throw TrackFileError(.io, "cannot open", file: path, underlying: error)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: sniffLength, alignment: 16)
        defer { buffer.deallocate() }
        var filled = 0
        var ended = false
        while filled < sniffLength {
            let n: Int
            do {
                n = try reader.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            } catch {
                // A file cut short (a gzip that ends early) is still told by what came before: its
                // reader then delivers that, and says the same error where it comes.
                guard filled > 0 else {
                    throw TrackFileError(
                        .io, "cannot read", file: path, byteOffset: error.byteOffset, underlying: error)
                }
                break
            }
            if n == 0 {
                ended = true
                break
            }
            filled += n
        }
        return sniff(UnsafeRawBufferPointer(rebasing: buffer[..<filled]), isWholeFile: ended)
    }

    /// A reader for this format; `nil` for ``nmea``, which `NMEADecoder` reads.
    public func makeReader() -> (any TrackReader)? {
        switch self {
        case .nmea: nil
        case .gpx: GPXReader()
        case .geojson, .takeout: JSONTrackReader(format: self)
        case .csv: CSVReader()
        case .owntracksRec: RecReader()
        }
    }
}

/// A streaming reader of one track file format: bytes in, fixes out.
///
/// Fed any split of a file (byte by byte included) it delivers the same fixes; its memory does not
/// grow with the file. At the first problem it throws, after every fix before it was delivered.
public protocol TrackReader {
    /// Where the reader is: bytes consumed and the line of the next one.
    var position: TrackFilePosition { get }
    /// Fixes delivered and points left out so far.
    var statistics: TrackFileStatistics { get }
    /// Reads the next bytes, delivering each fix they complete.
    ///
    /// - Throws: ``TrackFileError`` naming the line and byte offset of the first problem.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(TrackFileError)
    /// The end of the input: delivers what is pending and checks the file is complete.
    ///
    /// - Throws: ``TrackFileError`` for a file that ends early (a truncated document).
    mutating func finish(_ emit: (Fix) -> Void) throws(TrackFileError)
}

extension TrackReader {
    /// Reads a whole file (gzip decompressed) in 256 KiB chunks.
    ///
    /// - Throws: ``TrackFileError`` naming `path`; every fix before the problem was delivered.
    public mutating func readFile(_ path: String, _ emit: (Fix) -> Void) throws(TrackFileError) {
        let reader: NMEAFileReader
        do {
            reader = try NMEAFileReader(path: path)
        } catch {
            throw TrackFileError(.io, "cannot open", file: path, underlying: error)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 64)
        defer { buffer.deallocate() }
        do throws(TrackFileError) {
            while true {
                let n: Int
                do {
                    n = try reader.read(into: buffer)
                } catch {
                    throw TrackFileError(.io, "cannot read", byteOffset: error.byteOffset, underlying: error)
                }
                if n == 0 { break }
                try feed(UnsafeRawBufferPointer(rebasing: buffer[..<n]), emit)
            }
            try finish(emit)
        } catch {
            var e = error
            e.file = path
            throw e
        }
    }

    /// Reads complete in-memory input; convenient for tests.
    public mutating func read(_ bytes: [UInt8], _ emit: (Fix) -> Void) throws(TrackFileError) {
        try bytes.withBytes { b throws(TrackFileError) in try feed(b, emit) }
        try finish(emit)
    }
}

extension TrackFileError {
    /// The error with its format set, when it has none.
    func `in`(_ format: TrackFileFormat) -> TrackFileError {
        var e = self
        if e.format == nil { e.format = format }
        return e
    }

    /// Runs `body`, setting `format` in the error it throws when the error has none.
    @inline(__always)
    static func reading<R>(
        _ format: TrackFileFormat, _ body: () throws(TrackFileError) -> R
    ) throws(TrackFileError) -> R {
        do {
            return try body()
        } catch {
            throw error.in(format)
        }
    }
}
