import Geo
import NMEA
import TrackFiles

/// Fixes from a track file that is not NMEA: GPX, GeoJSON, CSV, an OwnTracks `.rec` file or
/// Google Takeout location history (``TrackFiles/TrackFileFormat``), gzip-compressed or not.
///
/// It replays as ``NMEALogSource`` does: as fast as possible, or paced by the fixes' times with
/// ``Options/speed``; ``logClock`` follows the fix times, so that the location service, visits and
/// the outbox run on the file's time; ``Options/loop`` starts again with times shifted forward.
/// The file is read in 256 KiB chunks as the fixes are consumed, by a streaming reader: memory
/// does not grow with the file. A malformed file
/// ends the replay with an ``SourceEvent/Kind/error`` event naming the file, the line and the
/// byte, after every fix before the problem.
public final class TrackFileSource: FixSource {
    public struct Options: Sendable {
        public var path: String
        /// The file's format, as ``TrackFiles/TrackFileFormat/sniff(path:)`` found it (not NMEA).
        public var format: TrackFileFormat
        /// Time factor: `nil` (the default) replays as fast as possible.
        public var speed: Double?
        /// Start again at the end. The default is `false`.
        public var loop: Bool = false
        /// The horizontal accuracy, in metres, given to a fix whose file states none (nor a DOP): the
        /// location service takes no fix without one, and most GPX, GeoJSON and CSV files have none.
        /// `nil` leaves such fixes without one. The default is 10 m.
        public var assumedAccuracy: Double? = 10

        public init(path: String, format: TrackFileFormat, speed: Double? = nil, loop: Bool = false) {
            precondition(format != .nmea, "NMEA logs are NMEALogSource's")
            self.path = path
            self.format = format
            self.speed = speed
            self.loop = loop
        }
    }

    /// How far the replay has got, for progress lines, with the reader counters.
    public typealias Progress = ReplayProgress<TrackFileStatistics>

    public let options: Options
    private let state: ReplayState<TrackFileStatistics>
    /// The clock that follows the file's fix times.
    public var logClock: ManualClock { state.logClock }

    /// - Parameters:
    ///   - options: what to replay and how.
    ///   - clock: the clock pacing waits on (tests pass a ``ManualClock``). The default is the
    ///     wall clock.
    public init(options: Options, clock: any EpochClock = WallClock()) {
        self.options = options
        self.state = ReplayState(clock: clock, statistics: TrackFileStatistics())
    }

    public var name: String { "\(options.format) \(options.path == "-" ? "<stdin>" : options.path)" }

    /// Progress so far.
    public var progress: Progress { state.current }

    public func makeAsyncIterator() -> Iterator {
        Iterator(source: self)
    }

    /// Reads the file chunk by chunk as fixes are requested.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SourceElement
        public typealias Failure = Never

        var replay: FileReplay<TrackReplay>

        init(source: TrackFileSource) {
            let o = source.options
            replay = FileReplay(
                state: source.state, path: o.path, sourceName: source.name, speed: o.speed, loop: o.loop,
                format: TrackReplay(path: o.path, format: o.format, assumedAccuracy: o.assumedAccuracy))
        }

        public mutating func next() async -> SourceElement? { await replay.next() }
    }
}

/// A track file's bytes through its format's streaming reader, for ``FileReplay``.
struct TrackReplay: ReplayFormat {
    /// The file's path, as given.
    let path: String
    let format: TrackFileFormat
    let assumedAccuracy: Double?
    var reader: any TrackReader

    init(path: String, format: TrackFileFormat, assumedAccuracy: Double?) {
        self.path = path
        self.format = format
        self.assumedAccuracy = assumedAccuracy
        self.reader = format.makeReader()!
    }

    static var clockOnlyForward: Bool { true }
    static var inputNoun: String { "file" }

    var statistics: TrackFileStatistics { reader.statistics }

    mutating func startPass() {
        reader = format.makeReader()!
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(GPSInputError) {
        do throws(TrackFileError) {
            try reader.feed(bytes, emit)
        } catch {
            throw failure(error)
        }
    }

    mutating func finish(_ emit: (Fix) -> Void) throws(GPSInputError) {
        do throws(TrackFileError) {
            try reader.finish(emit)
        } catch {
            throw failure(error)
        }
    }

    mutating func readFailed(_ error: NMEAError, _ emit: (Fix) -> Void) -> GPSInputError {
        failure(TrackFileError(.io, "cannot read", byteOffset: error.byteOffset, underlying: error))
    }

    func openFailed(_ error: NMEAError) -> GPSInputError {
        let e = TrackFileError(.io, "cannot open", file: path, underlying: error)
        return GPSInputError(.cannotOpen, path: path, errno: error.errno, underlying: e)
    }

    /// A fix without an accuracy gets the assumed one: the location service takes no fix without one.
    func prepared(_ fix: Fix) -> Fix {
        var fix = fix
        if fix.horizontalAccuracy == nil, let assumedAccuracy { fix.horizontalAccuracy = assumedAccuracy }
        return fix
    }

    /// The file's error, named by its path, with the line and byte it happened at.
    func failure(_ error: TrackFileError) -> GPSInputError {
        var e = error
        e.file = path
        return GPSInputError(
            .unreadable, path: path, line: e.line > 0 ? e.line : nil,
            byteOffset: e.byteOffset >= 0 ? e.byteOffset : nil,
            underlying: e)
    }
}
