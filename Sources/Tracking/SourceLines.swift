import Formats
import Geo
import SystemIO

/// Writes source output as JSON Lines: fixes in the `decode` schema, events as
/// `{"event":"source","kind":...,"source":...,"message":...}`.
public struct SourceLines {
    var out = OutputBuffer()
    /// Epochs without a position too (mode `none`).
    public var includeAll: Bool
    /// Flush after every line (live sources) or in 64 KiB blocks (fast replay).
    public var lineBuffered: Bool
    /// Give back the clean pages start-up touched (`CleanPages`) once the first position is
    /// written: a live `track` then keeps its working set resident, not its start-up. The default
    /// is `false`.
    public var releasesStartupPages = false
    /// The message of the last error event ``pump(_:clock:tick:)`` wrote, for the caller to say.
    public private(set) var lastError: String?
    /// Called with each problem of the source (lost, failing; `back` false) and with its first
    /// connection after one (`back` true): a live `track` says them on standard error, as its
    /// tracker does with location options.
    public var onProblem: (@Sendable (_ event: SourceEvent, _ back: Bool) -> Void)?
    var lost = false

    public init(includeAll: Bool = false, lineBuffered: Bool = true) {
        self.includeAll = includeAll
        self.lineBuffered = lineBuffered
    }

    public mutating func write(_ element: SourceElement) throws(TrackerError) {
        switch element {
        case .fix(let fix):
            guard includeAll || fix.hasPosition else { return }
            FixWriter.appendJSON(fix, to: &out.bytes)
        case .event(let event):
            _ = JSONLinesSink.append(.source(event), to: &out.bytes)
        }
        try out.endRecord(lineBuffered: lineBuffered)
    }

    public mutating func finish() throws(TrackerError) { try out.flush() }

    /// Writes every element of `source` until it ends or the task is cancelled (Ctrl-C, SIGTERM),
    /// then flushes. `tick`, when given, is called at most four times a second of `clock` (the wall
    /// clock by default) with the seconds since the start (a progress line), and once more with
    /// `nil` at the end.
    ///
    /// - Returns: whether the source reported an error event (``lastError`` says the last).
    @discardableResult
    public mutating func pump<S: FixSource>(
        _ source: S, clock: any EpochClock = WallClock(), tick: ((Double?) -> Void)? = nil
    ) async throws(TrackerError) -> Bool {
        // On the source's reading thread when it has one (gpsd): no thread hand-off per fix.
        try await withTaskExecutorPreference(source.preferredExecutor) { () async throws(TrackerError) -> Bool in
            let started = clock.now
            var lastTick = started
            var failed = false
            var settled = !releasesStartupPages
            for await element in source {
                if Task.isCancelled { break }
                if case .event(let e) = element, e.kind == .error {
                    failed = true
                    lastError = e.message
                }
                // Said before it is written: a reader of the output finds it said already.
                if case .event(let e) = element, let said = onProblem {
                    switch e.kind {
                    case .disconnected, .error:
                        lost = true
                        said(e, false)
                    case .connected where lost:
                        lost = false
                        said(e, true)
                    default: break
                    }
                }
                try write(element)
                if !settled, element.fix?.hasPosition == true {
                    settled = true
                    CleanPages.release()
                }
                if let tick {
                    let now = clock.now
                    if lastTick.duration(to: now) >= .milliseconds(250) {
                        lastTick = now
                        tick(started.duration(to: now) / .seconds(1))
                    }
                }
            }
            try finish()
            tick?(nil)
            return failed
        }
    }
}
