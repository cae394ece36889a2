import Formats
import Geo
import NMEA

/// Fixes from a recorded NMEA log: a file, standard input (`-`) or a gzip file.
///
/// As fast as possible by default; with a ``Options/speed`` the fixes are paced by their
/// timestamps (`speed` 1 is real time, 60 is a minute per second), measured on the clock passed
/// at creation (the continuous clock by default). With ``Options/loop`` the log starts again at
/// its end, its times shifted by the log's span so time keeps moving forward.
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
    ///   - clock: the clock pacing measures real time on (tests pass a ``ManualClock``).
    public init<C: Clock>(options: Options, clock: C = ContinuousClock()) where C.Duration == Duration {
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
    public struct Iterator: AsyncIteratorProtocol, PacedReplayIterator {
        public typealias Element = SourceElement
        public typealias Failure = Never

        let source: NMEALogSource
        var reader: NMEAFileReader?
        var decoder: NMEADecoder
        /// What was read ahead, pacing and looping.
        var replay: PacedReplay
        var finished = false
        var started = false
        let buffer: ReadBuffer

        init(source: NMEALogSource) {
            self.source = source
            var options = source.options.decoder
            if options.sourceName == nil {
                options.sourceName = source.options.path == "-" ? "<stdin>" : source.options.path
            }
            self.decoder = NMEADecoder(options: options)
            self.buffer = ReadBuffer(size: 256 * 1024)
            self.replay = source.state.makeReplay(speed: source.options.speed, clockOnlyForward: false)
        }

        public mutating func next() async -> SourceElement? { await nextElement() }

        func prepared(_ fix: Fix) -> Fix { fix }

        func delivered(reaching position: Int64) { source.state.delivered(reaching: position) }

        mutating func fill() async {
            // A chunk decodes without suspending: let the rest of the program (and the other
            // tasks of the cooperative pool) run between chunks, as they would between fixes.
            await Task.yield()
            if !started {
                started = true
                replay.startPass(after: source.progress.passes)
                open()
                if finished { return }
            }
            guard let reader else {
                finished = true
                return
            }
            // A pipe or terminal (`-`) may stay silent: wait for input off the thread, looking
            // again every 50 ms, so that cancelling the consumer stops the replay at once.
            while !reader.isReadable() {
                if Task.isCancelled {
                    finished = true
                    return
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
            do {
                let n: Int
                do throws(NMEAError) {
                    n = try buffer.read(from: reader)
                } catch {
                    // Nothing read before a read error is lost: the epoch in progress goes out first.
                    var collected: [SourceElement] = []
                    decoder.finishAfterInputError { collected.append(.fix($0)) }
                    replay.queue.append(contentsOf: collected)
                    throw error
                }
                if n > 0 {
                    var collected: [SourceElement] = []
                    swap(&collected, &replay.queue)
                    try buffer.decode(count: n, with: &decoder) { collected.append(.fix($0)) }
                    swap(&collected, &replay.queue)
                    let stats = decoder.statistics
                    let fixes = replay.queue.count(where: { if case .fix = $0 { true } else { false } })
                    replay.chunk = (start: replay.chunk.end, end: reader.position, fixes: fixes, delivered: 0)
                    source.state.read(upTo: replay.chunk.end, fixes: fixes, statistics: stats)
                    return
                }
                var collected: [SourceElement] = []
                try decoder.finish { collected.append(.fix($0)) }
                replay.queue.append(contentsOf: collected)
                // The last epoch, if any, goes out at the end of the file.
                replay.chunk = (start: replay.chunk.end, end: replay.chunk.end, fixes: collected.count, delivered: 0)
                endOfPass()
            } catch {
                let problem = failure(.unreadable, error)
                replay.queue.append(.event(SourceEvent(.error, source: source.name, error: problem)))
                finished = true
            }
        }

        /// The log's error, with where it happened when the cause says.
        func failure(_ code: GPSInputError.Code, _ error: any Error) -> GPSInputError {
            let nmea = error as? NMEAError
            return GPSInputError(
                code, path: source.options.path, line: nmea?.line, byteOffset: nmea?.byteOffset, errno: nmea?.errno,
                underlying: error)
        }

        mutating func open() {
            do {
                let r = try NMEAFileReader(path: source.options.path)
                reader = r
                if let event = source.state.opened(r, source: source.name, speed: source.options.speed, replay: &replay)
                {
                    replay.queue.append(event)
                }
            } catch {
                let problem = failure(.cannotOpen, error)
                replay.queue.append(.event(SourceEvent(.error, source: source.name, error: problem)))
                finished = true
            }
        }

        mutating func endOfPass() {
            let passes = source.state.passEnded()
            replay.queue.append(
                .event(
                    SourceEvent(
                        .endOfInput, source: source.name,
                        message: "end of log after pass \(passes)")))
            guard source.options.loop, source.options.path != "-" else {
                finished = true
                reader = nil
                return
            }
            var options = decoder.options
            options.sourceName = decoder.options.sourceName
            decoder = NMEADecoder(options: options)
            reader = nil
            started = false
        }

    }
}

/// Real-time pacing on an injected clock.
struct Pacer: Sendable {
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async throws -> Void

    init<C: Clock>(clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleep = { try await clock.sleep(for: $0) }
    }
}

/// The chunk buffer of a log iterator (a class so the iterator stays cheap to copy).
final class ReadBuffer {
    let storage: UnsafeMutableRawBufferPointer

    init(size: Int) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
    }

    deinit { storage.deallocate() }

    func read(from reader: NMEAFileReader) throws(NMEAError) -> Int {
        try reader.read(into: storage)
    }

    func decode(count: Int, with decoder: inout NMEADecoder, _ emit: (Fix) -> Void) throws(NMEAError) {
        try decoder.decode(UnsafeRawBufferPointer(rebasing: storage[0..<count]), emit)
    }
}
