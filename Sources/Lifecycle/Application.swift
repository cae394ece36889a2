import Geo
import Synchronization

/// The UIApplication of Linux: an ``AppLifecycle`` with a clock, expiration handlers and
/// observers, safe to call from any thread.
///
/// Inputs take the time from ``clock`` (in seconds since 1970). Expiration handlers run on the
/// thread that calls ``advance()`` (or the input that made them due), outside the lock, so they may
/// end their tasks, and do so at the time they were due: ``now`` reports that time while a handler
/// runs. Observers see every ``AppLifecycle/Event`` in order, synchronously: the place to perform
/// the real effects of a suspension (release the GPS watch) or a wake.
public final class Application: Sendable {
    struct Inner: Sendable {
        var lifecycle: AppLifecycle
        var handlers: [AppLifecycle.TaskIdentifier: @Sendable () -> Void] = [:]
        var observers: [@Sendable (AppLifecycle.Event) -> Void] = []
        var pending: [AppLifecycle.Event] = []
        /// The time of the deadline being processed, while its handlers run.
        var handlerTime: Double?
    }

    private let inner: Mutex<Inner>
    /// The owner's clock: live, the wall clock; in a replay, the log's; in tests, a manual clock.
    public let clock: any EpochClock
    public let policy: BackgroundPolicy
    public let modes: BackgroundModes

    /// - Parameters:
    ///   - policy: the background-time rules. The default is ``BackgroundPolicy/ios7``.
    ///   - modes: the declared background modes. The default is none.
    ///   - clock: where the time comes from.
    public init(policy: BackgroundPolicy = .ios7, modes: BackgroundModes = [], clock: any EpochClock) {
        inner = Mutex(Inner(lifecycle: AppLifecycle(policy: policy, modes: modes)))
        self.clock = clock
        self.policy = policy
        self.modes = modes
    }

    /// The current time: the owner's clock, or a due deadline's time while its handlers run.
    public var now: Double { inner.withLock { $0.handlerTime } ?? clock.now.secondsSince1970 }

    /// A snapshot of the state machine.
    public var lifecycle: AppLifecycle { inner.withLock { $0.lifecycle } }

    public var state: AppLifecycle.State { inner.withLock { $0.lifecycle.state } }

    public var backgroundTimeRemaining: Double {
        let t = now
        return inner.withLock { $0.lifecycle.backgroundTimeRemaining(at: t) }
    }

    /// Calls `observer` with every event from now on, synchronously, in order.
    public func observe(_ observer: @escaping @Sendable (AppLifecycle.Event) -> Void) {
        inner.withLock { $0.observers.append(observer) }
    }

    /// The events since the last call, in order (for an event stream).
    public func takeEvents() -> [AppLifecycle.Event] {
        inner.withLock { s in
            defer { s.pending.removeAll() }
            return s.pending
        }
    }

    // MARK: - Inputs (each processes the deadlines due first)

    public func launch(inBackground: Bool = false) {
        input { l, t in l.launch(at: t, inBackground: inBackground) }
    }

    public func enterBackground() { input { l, t in l.enterBackground(at: t) } }

    public func enterForeground() { input { l, t in l.enterForeground(at: t) } }

    public func resignActive() { input { l, t in l.resignActive(at: t) } }

    public func becomeActive() { input { l, t in l.becomeActive(at: t) } }

    public func setLocationUpdates(active: Bool) {
        input { l, t in
            l.setLocationUpdates(active: active, at: t)
            return []
        }
    }

    public func setAudio(playing: Bool) {
        input { l, t in
            l.setAudio(playing: playing, at: t)
            return []
        }
    }

    public func locationDelivered() { input { l, t in l.locationDelivered(at: t) } }

    public func wake(_ reason: AppLifecycle.WakeReason) { input { l, t in l.wake(reason, at: t) } }

    public func terminate() { input { l, t in l.terminate(at: t) } }

    /// Begins a background task (`beginBackgroundTask(withName:expirationHandler:)`): its handler
    /// runs shortly before the background time runs out and should end the task. Returns
    /// ``AppLifecycle/TaskIdentifier/invalid`` when the app may not begin one.
    public func beginBackgroundTask(name: String, expirationHandler: (@Sendable () -> Void)? = nil)
        -> AppLifecycle.TaskIdentifier
    {
        advance()
        let t = now
        return inner.withLock { s in
            let id = s.lifecycle.begin(name: name, at: t)
            if id != .invalid, let expirationHandler { s.handlers[id] = expirationHandler }
            return id
        }
    }

    /// Ends a background task (`endBackgroundTask`). Unknown and invalid ids are ignored.
    public func endBackgroundTask(_ id: AppLifecycle.TaskIdentifier) {
        let t = now
        inner.withLock { s in
            s.lifecycle.end(id, at: t)
            s.handlers[id] = nil
        }
        advance()
    }

    /// Processes the deadlines due by now, running expiration handlers between them.
    public func advance() {
        let t = clock.now.secondsSince1970
        while true {
            let step: (events: [AppLifecycle.Event], handlers: [@Sendable () -> Void], time: Double)? =
                inner.withLock { s in
                    guard s.handlerTime == nil, let d = s.lifecycle.nextDeadline, d <= t else { return nil }
                    let events = s.lifecycle.advance(to: d)
                    var handlers: [@Sendable () -> Void] = []
                    for case .expiring(let id, _, _) in events {
                        if let h = s.handlers.removeValue(forKey: id) { handlers.append(h) }
                    }
                    if s.lifecycle.state == .terminated { s.handlers.removeAll() }
                    s.handlerTime = d
                    return (events, handlers, d)
                }
            guard let step else { return }
            publish(step.events)
            for h in step.handlers { h() }
            inner.withLock { $0.handlerTime = nil }
        }
    }

    /// Seconds until time alone changes something, or `nil`.
    public var nextDeadline: Double? { inner.withLock { $0.lifecycle.nextDeadline } }

    private func input(_ body: (inout AppLifecycle, Double) -> [AppLifecycle.Event]) {
        advance()
        let t = now
        let events = inner.withLock { body(&$0.lifecycle, t) }
        publish(events)
    }

    private func publish(_ events: [AppLifecycle.Event]) {
        guard !events.isEmpty else { return }
        let observers = inner.withLock { s in
            s.pending += events
            return s.observers
        }
        for e in events {
            for o in observers { o(e) }
        }
    }
}
