import Geo
import NMEA
import Synchronization

/// What a file replay does with the fixes whatever the file's format: it keeps what was read
/// ahead, paces the fixes by their times (``speed``) on the replay's clock, shifts a looped pass
/// forward, drives the log clock and says how far into the file the fixes delivered reach.
/// ``FileReplay`` reads each format into it.
struct PacedReplay {
    /// Time factor: `nil` replays as fast as possible.
    let speed: Double?
    /// The clock pacing waits on (the wall clock live, a manual clock in tests).
    let clock: any EpochClock
    /// The clock that follows the fixes' times.
    let logClock: ManualClock
    /// Whether the log clock only moves forward (a track file's times may go back: a waypoint before
    /// its track); else it follows every fix.
    let clockOnlyForward: Bool

    /// What was read and not yet delivered, from ``head`` on.
    var queue: [SourceElement] = []
    var head = 0
    var firstFixNanos: Int64?
    /// When the first paced fix went out, on ``clock``.
    var paceStart: EpochInstant?
    var shift: Int64 = 0
    var lastNanos: Int64?
    /// The first fix time of the file itself (unshifted), learned on the first pass.
    var firstLogNanos: Int64?
    /// The chunk whose fixes are being delivered: its bytes, its fixes, how many went out.
    var chunk = (start: Int64(0), end: Int64(0), fixes: 0, delivered: 0)

    init(speed: Double?, clock: any EpochClock, logClock: ManualClock, clockOnlyForward: Bool) {
        self.speed = speed
        self.clock = clock
        self.logClock = logClock
        self.clockOnlyForward = clockOnlyForward
    }

    /// The next element read ahead, if any.
    mutating func takeQueued() -> SourceElement? {
        guard head < queue.count else { return nil }
        let element = queue[head]
        head += 1
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        }
        return element
    }

    /// A new pass starts only once the previous pass's fixes were all delivered: it is shifted so
    /// that its first fix follows the last delivered one by one second.
    mutating func startPass(after passes: Int) {
        if passes > 0, let last = lastNanos, let first = firstLogNanos {
            shift = last + 1_000_000_000 - first
        }
    }

    /// Paces, shifts for looping, advances the log clock. Returns the fix and how far into the file
    /// the fixes delivered reach (within the chunk, in proportion to its fixes delivered).
    mutating func deliver(_ prepared: Fix) async -> (fix: Fix, position: Int64) {
        var fix = prepared
        if firstLogNanos == nil { firstLogNanos = prepared.time?.nanosecondsSince1970 }
        if shift != 0, let t = fix.time, let n = t.nanosecondsSince1970 {
            fix.time = GNSSTime(nanosecondsSince1970: n + shift, fractionDigits: t.fractionDigits)
        }
        if let n = fix.time?.nanosecondsSince1970 {
            if let speed, speed > 0 {
                // Due when the log's time since its first fix, divided by the speed, has passed.
                if firstFixNanos == nil {
                    firstFixNanos = n
                    paceStart = clock.now
                }
                let due = paceStart!.advanced(by: .nanoseconds(Int64(Double(n - firstFixNanos!) / speed)))
                if clock.now < due { try? await clock.sleep(until: due, tolerance: nil) }
            }
            if !clockOnlyForward || n > (lastNanos ?? Int64.min) {
                logClock.advance(to: ManualClock.Instant(offset: .nanoseconds(n)))
                lastNanos = n
            }
        }
        chunk.delivered += 1
        let c = chunk
        let position =
            c.start + (c.end - c.start) * Int64(Swift.min(c.delivered, c.fixes)) / Int64(Swift.max(c.fixes, 1))
        return (fix, position)
    }
}

/// What a file replay's source shares with its iterators: the pacing, the clock that follows the
/// fixes' times and the progress, with the steps of a pass every file format goes through.
final class ReplayState<Statistics: Hashable & Sendable>: Sendable {
    /// The clock pacing waits on.
    let clock: any EpochClock
    /// The clock that follows the fixes' times.
    let logClock: ManualClock
    let progress: Mutex<ReplayProgress<Statistics>>

    init(clock: any EpochClock, statistics: Statistics) {
        self.clock = clock
        self.logClock = ManualClock()
        self.progress = Mutex(ReplayProgress(statistics: statistics))
    }

    /// Progress so far.
    var current: ReplayProgress<Statistics> { progress.withLock { $0 } }

    /// A replay that paces on this state's clock and drives its log clock.
    func makeReplay(speed: Double?, clockOnlyForward: Bool) -> PacedReplay {
        PacedReplay(speed: speed, clock: clock, logClock: logClock, clockOnlyForward: clockOnlyForward)
    }

    /// `file` was opened for a pass of `replay`: returns the event that says so on the first pass
    /// (`nil` on the next ones), for the source named `source`.
    func opened(
        _ file: NMEAFileReader, source: String, speed: Double?, replay: inout PacedReplay
    ) -> SourceElement? {
        replay.chunk = (start: 0, end: 0, fixes: 0, delivered: 0)
        let passes = progress.withLock {
            $0.size = file.size
            $0.position = 0
            $0.read = 0
            return $0.passes
        }
        guard passes == 0 else { return nil }
        let pace = speed.map { " at \($0)x" } ?? " as fast as possible"
        return .event(SourceEvent(.connected, source: source, message: "replaying \(file.name)" + pace))
    }

    /// The file was read up to `end`, with `fixes` fixes read ahead: a chunk without fixes is
    /// passed at once, one with fixes as they go out.
    func read(upTo end: Int64, fixes: Int, statistics: Statistics) {
        progress.withLock {
            if fixes == 0 { $0.position = end }
            $0.read = end
            $0.statistics = statistics
        }
    }

    /// One more fix was delivered, and the fixes delivered reach `position` of the file.
    func delivered(reaching position: Int64) {
        progress.withLock {
            $0.fixes += 1
            $0.position = position
        }
    }

    /// A pass ended: returns the number of passes completed.
    func passEnded() -> Int {
        progress.withLock {
            $0.passes += 1
            return $0.passes
        }
    }
}
