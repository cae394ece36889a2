import Dispatch
import Formats
import Geo
import Synchronization

/// Progress for long work, as one status line redrawn while the work runs and erased when it ends.
///
/// Whoever runs the work decides whether a line is wanted (the command line draws one only when
/// standard error is a terminal and standard output is not, so nothing is drawn into a pipe or a
/// log, nor over the output's own lines). The lines are built from counters, never from
/// coordinates.
public enum ProgressLine {
    /// Runs `work`, calling `draw` with `line()` every `interval` while it runs (a `nil` line draws
    /// nothing), and `draw("")` once it has ended when anything was drawn. With no `draw`, just runs
    /// `work`.
    ///
    /// The line is drawn from a Dispatch timer, not a task: work that keeps Swift's cooperative
    /// threads busy (a replay as fast as possible, on two cores) would hold a task's ticks back
    /// until it ends, and the line would jump from a few percent to done.
    public static func during<T: Sendable>(
        every interval: Duration = .milliseconds(250), draw: (@Sendable (String) -> Void)?,
        line: @escaping @Sendable () -> String?, _ work: () async throws -> T
    ) async throws -> T {
        guard let draw else { return try await work() }
        let queue = DispatchQueue(label: "keeptrack.progress")
        let drawn = Atomic(false)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds =
            Int(interval.components.seconds) * 1_000_000_000
            + Int(interval.components.attoseconds / 1_000_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
        timer.setEventHandler {
            guard let text = line() else { return }
            draw(text)
            drawn.store(true, ordering: .relaxed)
        }
        timer.resume()
        let result: Result<T, any Error>
        do {
            result = .success(try await work())
        } catch {
            result = .failure(error)
        }
        timer.cancel()
        // After the last tick already queued: the erase comes after every line drawn.
        queue.sync {
            if drawn.load(ordering: .relaxed) { draw("") }
        }
        return try result.get()
    }
}

/// The upload of a backlog, read as it goes: how many of how many were sent, how fast, how long
/// is left (what `keeptrack` draws as `uploading: 3,400 of 10,000 sent  1,906/s  ETA 3 s`).
///
/// The first reading is the start: records sent before it do not count, records appended after it
/// (a tracker still running) join the total. Time is passed in.
public final class BacklogProgress: Sendable {
    struct Start {
        var sent: Int
        var time: Double
        var total: Int
    }

    /// One reading of the backlog's upload.
    public struct Reading: Hashable, Sendable {
        /// Records sent since the first reading.
        public var sent: Int
        /// The backlog: what waited at the first reading and what joined it since.
        public var total: Int
        /// Records sent a second since the first reading, once any were sent.
        public var rate: Double?
        /// Seconds until what waits is sent, at that rate.
        public var secondsLeft: Int?
    }

    private let start = Mutex<Start?>(nil)

    public init() {}

    /// The reading for `sent` records acknowledged so far (the uploader's count since it started)
    /// and `waiting` records left, at `now` (seconds); `nil` when nothing waits.
    public func reading(sent: Int, waiting: Int, now: Double) -> Reading? {
        let s = start.withLock { state -> Start in
            guard var s = state else {
                let first = Start(sent: sent, time: now, total: waiting)
                state = first
                return first
            }
            s.total = Swift.max(s.total, sent - s.sent + waiting)
            state = s
            return s
        }
        guard waiting > 0 else { return nil }
        let done = Swift.max(0, sent - s.sent)
        var reading = Reading(sent: done, total: s.total)
        let elapsed = now - s.time
        if done > 0 && elapsed > 0 {
            let rate = Double(done) / elapsed
            (reading.rate, reading.secondsLeft) = (rate, Int((Double(waiting) / rate).rounded()))
        }
        return reading
    }
}

extension ProgressLine {
    /// A progress line for synchronous work that reports as it goes (an export reading pages):
    /// drawn at most every quarter second of `clock`, erased by ``end()``.
    public final class Throttled {
        private let draw: (String) -> Void
        private let clock: any EpochClock
        private var last: EpochInstant?
        private var drawn = false

        /// - Parameters:
        ///   - clock: the clock the quarter seconds are on. The default is the wall clock.
        ///   - draw: draws one state of the line (the terminal's, in the command line).
        public init(clock: any EpochClock = WallClock(), draw: @escaping (String) -> Void) {
            self.clock = clock
            self.draw = draw
        }

        /// Draws `text` unless a line was drawn less than a quarter second ago.
        public func update(_ text: @autoclosure () -> String) {
            let t = clock.now
            if let last, last.duration(to: t) < .milliseconds(250) { return }
            (last, drawn) = (t, true)
            draw(text())
        }

        /// Erases the line, if one was drawn.
        public func end() { if drawn { draw("") } }
    }
}

/// How far a run has come: its input (a replay's log), then the upload of what is left.
public enum RunProgress: Hashable, Sendable {
    /// The input is still read: `elapsed` seconds since the run started, with the outbox's depth
    /// when there is one.
    case input(elapsed: Double, outboxWaiting: Int?)
    /// The input has ended; the backlog is uploaded.
    case upload(BacklogProgress.Reading)
}

extension Tracker {
    /// How far the run has come, read each time it is called: the input's elapsed time on `clock`
    /// (from this call) with the outbox's depth while the input lasts, then the upload of what is
    /// left (``BacklogProgress``); `nil` once nothing is left. The default clock is the wall clock
    /// (not the tracker's: a replay's runs on the log's time).
    public func progress(clock: any EpochClock = WallClock()) -> @Sendable () -> RunProgress? {
        let started = clock.now, backlog = BacklogProgress()
        return { [self] in
            let t = started.duration(to: clock.now) / .seconds(1), waiting = outbox?.waiting
            guard inputFinished else { return .input(elapsed: t, outboxWaiting: waiting) }
            return waiting.flatMap { backlog.reading(sent: uploadService?.stats?.uploaded ?? 0, waiting: $0, now: t) }
                .map(RunProgress.upload)
        }
    }
}
