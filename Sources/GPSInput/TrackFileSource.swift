import Geo
import NMEA
import Synchronization
import TrackFiles

/// Fixes from a track file that is not NMEA: GPX, GeoJSON, CSV, an OwnTracks `.rec` file or
/// Google Takeout location history (``TrackFiles/TrackFileFormat``), gzip-compressed or not.
///
/// It replays as ``NMEALogSource`` does: as fast as possible, or paced by the fixes' times with
/// ``Options/speed``; ``logClock`` follows the fix times, so that the location service, visits and
/// the outbox run on the file's time; ``Options/loop`` starts again with times shifted forward.
/// The file (a file: a pipe would block the consumer's task) is read in 256 KiB chunks as the
/// fixes are consumed, by a streaming reader: memory does not grow with the file. A malformed file
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
    ///   - clock: the clock pacing measures real time on (tests pass a ``ManualClock``).
    public init<C: Clock>(options: Options, clock: C = ContinuousClock()) where C.Duration == Duration {
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
    public struct Iterator: AsyncIteratorProtocol, PacedReplayIterator {
        public typealias Element = SourceElement
        public typealias Failure = Never

        let source: TrackFileSource
        var file: NMEAFileReader?
        var reader: any TrackReader
        /// What was read ahead, pacing and looping.
        var replay: PacedReplay
        var finished = false
        var started = false
        let buffer: ReadBuffer

        init(source: TrackFileSource) {
            self.source = source
            self.reader = source.options.format.makeReader()!
            self.buffer = ReadBuffer(size: 256 * 1024)
            self.replay = source.state.makeReplay(speed: source.options.speed, clockOnlyForward: true)
        }

        public mutating func next() async -> SourceElement? { await nextElement() }

        func prepared(_ fix: Fix) -> Fix {
            var fix = fix
            if fix.horizontalAccuracy == nil, let assumed = source.options.assumedAccuracy {
                fix.horizontalAccuracy = assumed
            }
            return fix
        }

        func delivered(reaching position: Int64) { source.state.delivered(reaching: position) }

        mutating func fill() async {
            await Task.yield()
            if !started {
                started = true
                replay.startPass(after: source.progress.passes)
                open()
                if finished { return }
            }
            guard let file else {
                finished = true
                return
            }
            var collected: [SourceElement] = []
            swap(&collected, &replay.queue)
            defer { swap(&collected, &replay.queue) }
            do throws(TrackFileError) {
                let n: Int
                do {
                    n = try buffer.read(from: file)
                } catch {
                    throw TrackFileError(.io, "cannot read", byteOffset: error.byteOffset, underlying: error)
                }
                if n > 0 {
                    try reader.feed(UnsafeRawBufferPointer(rebasing: buffer.storage[0..<n])) {
                        collected.append(.fix($0))
                    }
                    let stats = reader.statistics
                    let fixes = collected.count
                    replay.chunk = (start: replay.chunk.end, end: file.position, fixes: fixes, delivered: 0)
                    source.state.read(upTo: replay.chunk.end, fixes: fixes, statistics: stats)
                    return
                }
                try reader.finish { collected.append(.fix($0)) }
                // The end of the file: every byte was read (a gzip trailer included).
                replay.chunk = (start: replay.chunk.end, end: file.position, fixes: collected.count, delivered: 0)
                source.state.read(upTo: replay.chunk.end, fixes: replay.chunk.fixes, statistics: reader.statistics)
                endOfPass(&collected)
            } catch {
                var e = error
                e.file = source.options.path
                let failure = GPSInputError(
                    .unreadable, path: source.options.path, line: e.line > 0 ? e.line : nil,
                    byteOffset: e.byteOffset >= 0 ? e.byteOffset : nil, underlying: e)
                collected.append(.event(SourceEvent(.error, source: source.name, error: failure)))
                let stats = reader.statistics
                source.state.progress.withLock { $0.statistics = stats }
                finished = true
            }
        }

        mutating func open() {
            do {
                let f = try NMEAFileReader(path: source.options.path)
                file = f
                reader = source.options.format.makeReader()!
                if let event = source.state.opened(f, source: source.name, speed: source.options.speed, replay: &replay)
                {
                    replay.queue.append(event)
                }
            } catch {
                let e = TrackFileError(.io, "cannot open", file: source.options.path, underlying: error)
                let failure = GPSInputError(.cannotOpen, path: source.options.path, errno: error.errno, underlying: e)
                replay.queue.append(.event(SourceEvent(.error, source: source.name, error: failure)))
                finished = true
            }
        }

        mutating func endOfPass(_ collected: inout [SourceElement]) {
            let passes = source.state.passEnded()
            collected.append(
                .event(SourceEvent(.endOfInput, source: source.name, message: "end of file after pass \(passes)")))
            guard source.options.loop, source.options.path != "-" else {
                finished = true
                file = nil
                return
            }
            file = nil
            started = false
        }
    }
}
