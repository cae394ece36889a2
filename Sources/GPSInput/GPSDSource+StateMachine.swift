import CGPS
import Geo

/// The decisions of one gpsd connection, as a value: when to connect, when to retry and after how
/// long, what to report, when an epoch is due, when to close.
///
/// The owner (``GPSDWorker``) performs the I/O and tells the machine what happened: each event is a
/// `mutating func` that returns the ``Action`` to take next. Nothing here reads a clock or touches a
/// socket: times are passed in (monotonic seconds), and fixes leave through the `deliver` closure of
/// the events that can end an epoch, in order, before the action returned is performed.
///
/// An action is either an effect to perform at once (``Action/report(_:_:then:)``,
/// ``Action/close(then:)``, ``Action/sendWatch``) followed by its `then`, or a step that waits
/// (``Action/connect``, ``Action/waitToReconnect(seconds:)``, ``Action/read(flushAt:)``,
/// ``Action/waitForWatch``), before which the owner looks for a stop (``stop(deliver:)``) or a change
/// of the wanted watch (``watchReleased(deliver:)``, ``watchResumed()``, against ``isWatchWanted``).
/// Events that cannot happen in the current state are a `preconditionFailure`.
struct GPSDConnectionStateMachine {
    /// The first wait before a reconnection; it doubles after each failed attempt.
    static let firstBackoff = 0.25

    /// What the owner does next. (Only the effects that lead to another action are boxed: a report
    /// read allocates nothing.)
    enum Action: Equatable {
        /// Open a connection to gpsd, then call ``connectionOpened()`` or ``connectionFailed(reason:)``.
        case connect
        /// Send gpsd the `WATCH` request on the open connection, then call ``watchAccepted()`` or
        /// ``watchRefused()``.
        case sendWatch
        /// Wait this long (a stop or a change of the watch ends it early), then call
        /// ``backoffElapsed()``.
        case waitToReconnect(seconds: Double)
        /// Take the next report read, or wait for gpsd's socket, until `flushAt` (monotonic seconds)
        /// when an epoch is in progress, without limit otherwise. Then call ``reportRead(_:now:deliver:)``,
        /// ``connectionLost(_:deliver:)``, or ``waitEnded(now:deliver:)`` when the wait ended
        /// without data. Bytes read without a complete report: read again.
        case read(flushAt: Double?)
        /// Wait until the watch is wanted again (``watchResumed()``) or a stop.
        case waitForWatch
        /// Report a source event, then do `then`.
        indirect case report(SourceEvent.Kind, Notice, then: Action)
        /// Close the connection to gpsd, then do `then`.
        indirect case close(then: Action)
        /// The connection is closed; the worker returns.
        case exit
    }

    /// What a source event says (the owner words it).
    enum Notice: Equatable {
        /// Watching gpsd.
        case watching
        /// Watching gpsd again after the watch was released.
        case watchingAgain
        /// The watch was given up.
        case released
        /// gpsd could not be reached (gpsd's own reason).
        case cannotConnect(reason: String)
        /// gpsd refused the `WATCH` request.
        case watchRefused
        /// The connection was lost while watching.
        case lost(Loss)
    }

    /// Why a watching connection ended.
    enum Loss: Equatable {
        /// gpsd closed it.
        case closed
        /// Reading failed with this `errno`.
        case failed(errno: Int32)
        /// gpsd sent a line longer than the reader keeps.
        case lineTooLong
    }

    /// How the next connection goes, while there is none.
    struct Retry: Equatable {
        /// The wait after the next failed attempt.
        var backoff = GPSDConnectionStateMachine.firstBackoff
        /// Whether gpsd's absence was reported already (later failed attempts are quiet).
        var reportedDown = false
        /// Whether the watch was released (and said so): the next watch is announced as taken back.
        var released = false
        /// Whether a watch ever started (a failure is then a disconnection, not an error).
        var hasWatched = false
    }

    enum State: Equatable {
        /// Not started.
        case idle
        /// No connection, the watch wanted: connecting, or waiting to.
        case connecting(Retry)
        /// Connected, the `WATCH` request not yet sent.
        case opened(Retry)
        /// Watching; the time of the last report, if any came.
        case watching(lastReport: Double?)
        /// The watch given up: no connection until it is wanted again.
        case released(Retry)
        /// Stopped: the worker returns.
        case stopped
    }

    private(set) var state = State.idle
    /// Epochs in progress and delivered: kept across connections (a straggler of the epoch delivered
    /// when a connection was lost is dropped after the next one).
    private(set) var merger = TPVMerger()
    let maxBackoff: Double
    let idleFlush: Double
    let fallbackFlush: Double

    /// - Parameters:
    ///   - maxBackoff: the longest wait between reconnection attempts.
    ///   - idleFlush: quiet time after a report that ends an epoch while gpsd's cycle is unknown.
    ///   - fallbackFlush: quiet time that ends an epoch once the cycle is known.
    init(maxBackoff: Double, idleFlush: Double, fallbackFlush: Double) {
        self.maxBackoff = maxBackoff
        self.idleFlush = idleFlush
        self.fallbackFlush = fallbackFlush
    }

    init(options: GPSDSource.Options) {
        self.init(maxBackoff: options.maxBackoff, idleFlush: options.idleFlush, fallbackFlush: options.fallbackFlush)
    }

    /// Whether the machine holds (or is trying to get) the watch: the owner compares it with what is
    /// wanted before each wait, and calls ``watchReleased(deliver:)`` or ``watchResumed()``.
    var isWatchWanted: Bool {
        if case .released = state { return false }
        return true
    }

    /// The worker starts: it connects.
    mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("start() in \(state)") }
        state = .connecting(Retry())
        return .connect
    }

    /// The connection could not be opened (`reason` is gpsd's). The first failure is reported; the
    /// next attempt waits the backoff, which doubles up to ``maxBackoff``.
    mutating func connectionFailed(reason: String) -> Action {
        guard case .connecting(var retry) = state else { preconditionFailure("connectionFailed in \(state)") }
        let wait = Action.waitToReconnect(seconds: retry.backoff)
        let report = !retry.reportedDown
        retry.reportedDown = true
        retry.backoff = min(retry.backoff * 2, maxBackoff)
        state = .connecting(retry)
        guard report else { return wait }
        return .report(retry.hasWatched ? .disconnected : .error, .cannotConnect(reason: reason), then: wait)
    }

    /// The connection is open: the watch is requested.
    mutating func connectionOpened() -> Action {
        guard case .connecting(let retry) = state else { preconditionFailure("connectionOpened in \(state)") }
        state = .opened(retry)
        return .sendWatch
    }

    /// gpsd refused the `WATCH` request: the connection closes, the refusal is reported, and the
    /// next attempt comes after the current backoff (not doubled).
    mutating func watchRefused() -> Action {
        guard case .opened(let retry) = state else { preconditionFailure("watchRefused in \(state)") }
        state = .connecting(retry)
        return .close(then: .report(.error, .watchRefused, then: .waitToReconnect(seconds: retry.backoff)))
    }

    /// gpsd took the `WATCH` request: reports follow. The report cycle is learned again (another
    /// gpsd, or the same restarted, may have another); the watch is announced as connected, or as
    /// acquired after a release.
    mutating func watchAccepted() -> Action {
        guard case .opened(let retry) = state else { preconditionFailure("watchAccepted in \(state)") }
        state = .watching(lastReport: nil)
        merger.forgetCycle()
        return retry.released
            ? .report(.acquired, .watchingAgain, then: .read(flushAt: nil))
            : .report(.connected, .watching, then: .read(flushAt: nil))
    }

    /// The wait before a reconnection is over.
    mutating func backoffElapsed() -> Action {
        guard case .connecting = state else { preconditionFailure("backoffElapsed in \(state)") }
        return .connect
    }

    /// A report arrived at `now` (parsed by libgps into `data`): TPVs and SKYs go into the epoch
    /// in progress, and an epoch they complete is delivered.
    mutating func reportRead(_ data: UnsafePointer<gps_data_t>, now: Double, deliver: (Fix) -> Void) -> Action {
        guard case .watching(var lastReport) = state else { preconditionFailure("reportRead in \(state)") }
        let set = UInt64(data.pointee.set)
        if set & keeptrack_tpv_mask() != 0 {
            merger.tpv(data, deliver: deliver)
            lastReport = now
        }
        if set & keeptrack_sky_mask() != 0 {
            merger.sky(data, deliver: deliver)
            lastReport = now
        }
        state = .watching(lastReport: lastReport)
        return .read(flushAt: flushAt(lastReport))
    }

    /// A wait for a report ended at `now` without one (its deadline came, or it was woken): the
    /// epoch in progress is delivered if its quiet time is over.
    mutating func waitEnded(now: Double, deliver: (Fix) -> Void) -> Action {
        guard case .watching(let lastReport) = state else { preconditionFailure("waitEnded in \(state)") }
        if let lastReport, merger.hasPending, now - lastReport >= quietTime {
            merger.flush(deliver)
        }
        return .read(flushAt: flushAt(lastReport))
    }

    /// The watching connection ended (`loss`): the epoch in progress is delivered, the connection
    /// closes, the loss is reported, and a new connection is tried at once (quietly if it fails).
    mutating func connectionLost(_ loss: Loss, deliver: (Fix) -> Void) -> Action {
        guard case .watching = state else { preconditionFailure("connectionLost in \(state)") }
        merger.flush(deliver)
        state = .connecting(Retry(reportedDown: true, hasWatched: true))
        return .close(then: .report(.disconnected, .lost(loss), then: .connect))
    }

    /// The watch is no longer wanted: the epoch in progress is delivered, the connection (if any)
    /// closes, and the release is reported once.
    mutating func watchReleased(deliver: (Fix) -> Void) -> Action {
        switch state {
        case .watching:
            merger.flush(deliver)
            state = .released(Retry(released: true, hasWatched: true))
            return .close(then: .report(.released, .released, then: .waitForWatch))
        case .connecting(var retry):
            let announce = !retry.released
            retry.released = true
            state = .released(retry)
            return announce ? .report(.released, .released, then: .waitForWatch) : .waitForWatch
        case .idle, .opened, .released, .stopped:
            preconditionFailure("watchReleased in \(state)")
        }
    }

    /// The watch is wanted again: connect at once.
    mutating func watchResumed() -> Action {
        guard case .released(let retry) = state else { preconditionFailure("watchResumed in \(state)") }
        state = .connecting(retry)
        return .connect
    }

    /// The worker stops: the epoch in progress is delivered and the connection, if any, closes.
    mutating func stop(deliver: (Fix) -> Void) -> Action {
        switch state {
        case .watching:
            merger.flush(deliver)
            state = .stopped
            return .close(then: .exit)
        case .connecting, .released:
            state = .stopped
            return .exit
        case .idle, .opened, .stopped:
            preconditionFailure("stop in \(state)")
        }
    }

    /// Quiet time after the last report that ends an epoch: short until gpsd's cycle is known.
    private var quietTime: Double { merger.knowsCycle ? fallbackFlush : idleFlush }

    private func flushAt(_ lastReport: Double?) -> Double? {
        guard merger.hasPending, let lastReport else { return nil }
        return lastReport + quietTime
    }
}
