import Geo
import NMEA

/// Fixes from a recorded NMEA log: a file, standard input (`-`) or a gzip file.
///
/// As fast as possible by default; with a ``Options/speed`` the fixes are paced by their
/// timestamps (`speed` 1 is real time, 60 is a minute per second), waited for on the clock passed
/// at creation (the wall clock by default). With ``Options/loop`` the log starts again at its end,
/// its times shifted so that the pass's first fix comes a second after the last one: time keeps
/// moving forward.
///
/// ``logClock`` is driven by the fix times: every fix with a date advances it to the fix's time
/// before the fix is delivered, so timers downstream (filters, dwell, budgets) run on log time and
/// a day replayed in seconds expires them exactly as living through it would.
///
/// Reading happens on the consumer's task: the next chunk is read when the fixes of the previous
/// one have been consumed, so a fast replay never drops anything.
public final class NMEALogSource: FixSource {
    public struct Options: Sendable {
        public var path: String
        /// Time factor: `nil` (the default) replays as fast as possible.
        public var speed: Double?
        /// Start again at the end. The default is `false`.
        public var loop: Bool = false
        /// Decoder settings; its `sourceName` defaults to the path.
        public var decoder = NMEADecoder.Options()

        public init(path: String, speed: Double? = nil, loop: Bool = false) {
            self.path = path
            self.speed = speed
            self.loop = loop
        }
    }

    /// How far the replay has got, for progress lines, with the decoder counters.
    public typealias Progress = ReplayProgress<NMEAStatistics>

    public let options: Options
    private let state: ReplayState<NMEAStatistics>
    /// The clock that follows the log's fix times.
    public var logClock: ManualClock { state.logClock }

    /// - Parameters:
    ///   - options: what to replay and how.
    ///   - clock: the clock pacing waits on (tests pass a ``ManualClock``). The default is the
    ///     wall clock.
    public init(options: Options, clock: any EpochClock = WallClock()) {
        self.options = options
        self.state = ReplayState(clock: clock, statistics: NMEAStatistics())
    }

    public var name: String { "log \(options.path == "-" ? "<stdin>" : options.path)" }

    /// Progress so far.
    public var progress: Progress { state.current }

    public func makeAsyncIterator() -> Iterator {
        Iterator(source: self)
    }

    /// Reads the log chunk by chunk as fixes are requested.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SourceElement
        public typealias Failure = Never

        var replay: FileReplay<NMEAReplay>

        init(source: NMEALogSource) {
            var options = source.options.decoder
            if options.sourceName == nil {
                options.sourceName = source.options.path == "-" ? "<stdin>" : source.options.path
            }
            replay = FileReplay(
                state: source.state, path: source.options.path, sourceName: source.name, speed: source.options.speed,
                loop: source.options.loop,
                format: NMEAReplay(path: source.options.path, decoder: NMEADecoder(options: options)))
        }

        public mutating func next() async -> SourceElement? { await replay.next() }
    }
}

/// An NMEA log's bytes through the decoder, for ``FileReplay``.
struct NMEAReplay: ReplayFormat {
    /// The log's path, as given.
    let path: String
    var decoder: NMEADecoder

    static var clockOnlyForward: Bool { false }
    static var inputNoun: String { "log" }

    var statistics: NMEAStatistics { decoder.statistics }

    mutating func startPass() {
        decoder = NMEADecoder(options: decoder.options)
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(GPSInputError) {
        do throws(NMEAError) {
            try decoder.decode(bytes, emit)
        } catch {
            throw failure(.unreadable, error)
        }
    }

    mutating func finish(_ emit: (Fix) -> Void) throws(GPSInputError) {
        do throws(NMEAError) {
            try decoder.finish(emit)
        } catch {
            throw failure(.unreadable, error)
        }
    }

    mutating func readFailed(_ error: NMEAError, _ emit: (Fix) -> Void) -> GPSInputError {
        // The epoch in progress goes out before the error.
        decoder.finishAfterInputError(emit)
        return failure(.unreadable, error)
    }

    func openFailed(_ error: NMEAError) -> GPSInputError { failure(.cannotOpen, error) }

    func prepared(_ fix: Fix) -> Fix { fix }

    /// The log's error, with where it happened.
    func failure(_ code: GPSInputError.Code, _ error: NMEAError) -> GPSInputError {
        GPSInputError(
            code, path: path, line: error.line, byteOffset: error.byteOffset, errno: error.errno, underlying: error)
    }
}
