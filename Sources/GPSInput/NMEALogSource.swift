import Formats
import Geo
import NMEA
import Synchronization

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
    /// The clock that follows the log's fix times.
    public let logClock: ManualClock
    private let pacer: Pacer
    private let progressState = Mutex(Progress())

    /// - Parameters:
    ///   - options: what to replay and how.
    ///   - clock: the clock pacing measures real time on (tests pass a ``ManualClock``).
    public init<C: Clock>(options: Options, clock: C = ContinuousClock()) where C.Duration == Duration {
        self.options = options
        self.logClock = ManualClock()
        self.pacer = Pacer(clock: clock)
    }

    public var name: String { "log \(options.path == "-" ? "<stdin>" : options.path)" }

    /// Progress so far.
    public var progress: Progress { progressState.withLock { $0 } }

    public func makeAsyncIterator() -> Iterator {
        Iterator(source: self)
    }

    /// Reads the log chunk by chunk as fixes are requested.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SourceElement
        public typealias Failure = Never

        let source: NMEALogSource
        var reader: NMEAFileReader?
        var decoder: NMEADecoder
        var queue: [SourceElement] = []
        var head = 0
        var finished = false
        var started = false
        let buffer: ReadBuffer
        // Pacing and looping.
        var firstFixNanos: Int64?
        var paceStart: Duration?
        var shift: Int64 = 0
        var lastNanos: Int64?
        /// The first fix time of the log itself (unshifted), learned on the first pass.
        var firstLogNanos: Int64?
        /// The chunk whose fixes are being delivered: its bytes, its fixes, how many went out.
        var chunk = (start: Int64(0), end: Int64(0), fixes: 0, delivered: 0)

        init(source: NMEALogSource) {
            self.source = source
            var options = source.options.decoder
            if options.sourceName == nil { options.sourceName = source.options.path == "-" ? "<stdin>" : source.options.path }
            self.decoder = NMEADecoder(options: options)
            self.buffer = ReadBuffer(size: 256 * 1024)
        }

        public mutating func next() async -> SourceElement? {
            while true {
                if head < queue.count {
                    let element = queue[head]
                    head += 1
                    if head == queue.count {
                        queue.removeAll(keepingCapacity: true)
                        head = 0
                    }
                    if case .fix(let fix) = element {
                        return await deliver(fix)
                    }
                    return element
                }
                if finished || Task.isCancelled { return nil }
                await fill()
            }
        }

        /// Paces, shifts for looping, advances the log clock, counts.
        mutating func deliver(_ original: Fix) async -> SourceElement {
            var fix = original
            if firstLogNanos == nil { firstLogNanos = original.time?.nanosecondsSince1970 }
            if shift != 0, let t = fix.time, let n = t.nanosecondsSince1970 {
                fix.time = GNSSTime(nanosecondsSince1970: n + shift, fractionDigits: t.fractionDigits)
            }
            if let n = fix.time?.nanosecondsSince1970 {
                if let speed = source.options.speed, speed > 0 {
                    if firstFixNanos == nil {
                        firstFixNanos = n
                        paceStart = source.pacer.elapsed()
                    }
                    let logElapsed = Double(n - firstFixNanos!) / 1e9 / speed
                    let due = paceStart! + .nanoseconds(Int64(logElapsed * 1e9))
                    let wait = due - source.pacer.elapsed()
                    if wait > .zero { try? await source.pacer.sleep(wait) }
                }
                source.logClock.advance(to: ManualClock.Instant(offset: .nanoseconds(n)))
                lastNanos = n
            }
            chunk.delivered += 1
            let c = chunk
            source.progressState.withLock {
                $0.fixes += 1
                $0.position = c.start + (c.end - c.start) * Int64(Swift.min(c.delivered, c.fixes)) / Int64(Swift.max(c.fixes, 1))
            }
            return .fix(fix)
        }

        mutating func fill() async {
            // A chunk decodes without suspending: let the rest of the program (and the other
            // tasks of the cooperative pool) run between chunks, as they would between fixes.
            await Task.yield()
            if !started {
                started = true
                // A new pass starts only once the previous pass's fixes were all delivered: shift it
                // so its first fix follows the last delivered one by one second.
                if source.progress.passes > 0, let last = lastNanos, let first = firstLogNanos {
                    shift = last + 1_000_000_000 - first
                }
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
                    queue.append(contentsOf: collected)
                    throw error
                }
                if n > 0 {
                    var collected: [SourceElement] = []
                    swap(&collected, &queue)
                    try buffer.decode(count: n, with: &decoder) { collected.append(.fix($0)) }
                    swap(&collected, &queue)
                    let stats = decoder.statistics
                    let fixes = queue.count(where: { if case .fix = $0 { true } else { false } })
                    chunk = (start: chunk.end, end: reader.position, fixes: fixes, delivered: 0)
                    let c = chunk
                    source.progressState.withLock {
                        // A chunk without fixes is passed at once; one with fixes as they go out.
                        if fixes == 0 { $0.position = c.end }
                        $0.read = c.end
                        $0.statistics = stats
                    }
                    return
                }
                var collected: [SourceElement] = []
                try decoder.finish { collected.append(.fix($0)) }
                queue.append(contentsOf: collected)
                // The last epoch, if any, goes out at the end of the file.
                chunk = (start: chunk.end, end: chunk.end, fixes: collected.count, delivered: 0)
                endOfPass()
            } catch {
                queue.append(.event(SourceEvent(.error, source: source.name, error: failure(.unreadable, error))))
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
                chunk = (start: 0, end: 0, fixes: 0, delivered: 0)
                source.progressState.withLock {
                    $0.size = r.size
                    $0.position = 0
                    $0.read = 0
                }
                if source.progress.passes == 0 {
                    queue.append(.event(SourceEvent(.connected, source: source.name, message: "replaying \(r.name)"
                        + (source.options.speed.map { " at \($0)x" } ?? " as fast as possible"))))
                }
            } catch {
                queue.append(.event(SourceEvent(.error, source: source.name, error: failure(.cannotOpen, error))))
                finished = true
            }
        }

        mutating func endOfPass() {
            let passes = source.progressState.withLock { p -> Int in
                p.passes += 1
                return p.passes
            }
            queue.append(.event(SourceEvent(.endOfInput, source: source.name,
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
