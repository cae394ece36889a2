/// The app's life as iOS runs it: states, background tasks and the background-time budget, as a
/// pure value type. It reads no clock and does no I/O: every input carries the time (seconds on
/// whatever clock the owner uses: the wall clock live, the log's clock in a replay, a manual clock
/// in tests), and every input returns the ``Event``s it caused. ``nextDeadline`` says when time
/// alone will cause the next one; the owner calls ``advance(to:)`` then.
///
/// The keep-alive rules (each has its tests in `LifecycleTests`):
/// 1. **Grace.** In the background with no open task and no keep-alive, the app is suspended
///    ``BackgroundPolicy/grace`` after it became so (entered the background, ended its last task,
///    lost its keep-alive), or at the end of a wake window if that is later — never after its
///    background time ran out.
/// 2. **Budget.** Entering the background starts the countdown ``backgroundTimeRemaining`` at the
///    policy's budget. Open tasks keep the app running until it reaches zero;
///    ``BackgroundPolicy/warningLead`` before that, each open task's expiration handler runs once
///    (``Event/expiring(_:name:time:)``), and when the handlers ended every task the app is idle and
///    suspended the grace after (rule 1: at zero with the defaults' equal lead and grace).
/// 3. **Termination.** A task still open when the countdown reaches zero gets the app terminated,
///    with a reason naming the task.
/// 4. **No extension.** Beginning a task never adds time. It is refused (``TaskIdentifier/invalid``)
///    when the app is not running, and in the background once the expiration handlers are due
///    (remaining time ≤ warning lead): restarting tasks in the handlers ends at the budget anyway.
/// 5. **Total cap.** Task time in one background stretch never goes past the stretch's start plus
///    ``BackgroundPolicy/totalCap`` (10 minutes on iOS 6/7), even across wakes.
/// 6. **Location.** With the `location` mode and standard updates active, each delivered location
///    sets the countdown back to the full budget and starts a new stretch: a tracker that keeps
///    receiving locations runs indefinitely. While updates are active the app is not idle; it is
///    suspended when a whole budget passes without a delivered location.
/// 7. **Audio.** With the `audio` mode and playback running, the app runs without a countdown.
/// 8. **Wake.** A significant change, a region entry, exit or dwell (or, with the `fetch` mode, the
///    fetch interval) wakes a suspended app into the background for the policy's wake window
///    (`backgroundTimeRemaining` shows it); the first task begun then gets the budget again,
///    counted from the wake, within the cap.
/// 9. **Foreground.** In the foreground (active or inactive) time is unbounded and open tasks never
///    expire; returning to the background starts a new stretch.
public struct AppLifecycle: Sendable {
    /// The app's state, as UIApplication's plus the two ends of a process's life.
    public enum State: String, Hashable, Sendable, CaseIterable {
        case notRunning = "not-running"
        case active
        case inactive
        case background
        case suspended
        case terminated

        /// Whether the app's code runs in this state.
        public var isRunning: Bool { self == .active || self == .inactive || self == .background }
        /// Whether this is a foreground state (unbounded time).
        public var isForeground: Bool { self == .active || self == .inactive }
    }

    /// A background task's identifier. ``invalid`` (0) is what a refused `begin` returns.
    public struct TaskIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Returned when a task may not begin (UIBackgroundTaskInvalid).
        public static let invalid = TaskIdentifier(rawValue: 0)
        public var description: String { "#\(rawValue)" }
    }

    /// An open background task.
    public struct BackgroundTask: Hashable, Sendable {
        public var id: TaskIdentifier
        public var name: String
        /// When it began.
        public var begun: Double
        /// Whether its expiration handler was called in the current stretch.
        public var warned: Bool
    }

    /// What wakes a suspended app.
    public enum WakeReason: Hashable, Sendable, CustomStringConvertible {
        case significantChange
        /// A region entry, exit or dwell, with the region's identifier.
        case region(String)
        /// A visit's arrival or departure (`startMonitoringVisits`).
        case visit
        /// A background fetch (the `fetch` mode).
        case fetch

        public var description: String {
            switch self {
            case .significantChange: "significant change"
            case .region(let id): "region event (\(id))"
            case .visit: "visit"
            case .fetch: "background fetch"
            }
        }
    }

    /// Why a transition happened.
    public enum Reason: Hashable, Sendable, CustomStringConvertible {
        case launched
        case activated
        case deactivated
        case movedToBackground
        case movedToForeground
        /// Rule 1: nothing kept the app running.
        case noBackgroundWork(grace: Double)
        /// Rule 2 or 6: the background time ran out with no task left open.
        case backgroundTimeExpired(budget: Double)
        /// Rule 3: these tasks were still open at zero.
        case tasksNotEnded([String])
        /// Rule 8: the window a wake ran the app for ended, and no task was begun during it.
        case wakeWindowEnded(window: Double)
        /// Rule 8.
        case woken(WakeReason)
        /// The owner ended the process.
        case exited

        public var description: String {
            switch self {
            case .launched: "launched"
            case .activated: "became active"
            case .deactivated: "resigned active"
            case .movedToBackground: "moved to the background"
            case .movedToForeground: "moved to the foreground"
            case .noBackgroundWork(let g):
                "no background task and no keep-alive (suspended \(seconds(g)) after running out of work)"
            case .backgroundTimeExpired(let b): "background time ran out (budget \(seconds(b)))"
            case .tasksNotEnded(let names):
                "background task\(names.count == 1 ? "" : "s") "
                    + names.map { "'\($0)'" }.joined(separator: ", ")
                    + " not ended before the background time ran out"
            case .woken(let w): "woken by a \(w)"
            case .wakeWindowEnded(let w): "the wake window ended (\(seconds(w))) with no background task begun"
            case .exited: "exited"
            }
        }
    }

    /// A state change.
    public struct Transition: Hashable, Sendable {
        public var from: State
        public var to: State
        public var time: Double
        public var reason: Reason
    }

    /// What an input or the passing of time caused, in order.
    public enum Event: Hashable, Sendable {
        /// The state changed.
        case transition(Transition)
        /// A task's expiration handler must run now (the owner runs it; it should end the task).
        case expiring(TaskIdentifier, name: String, time: Double)
        /// A delivered location reset the countdown to the full budget (rule 6).
        case refreshed(time: Double, until: Double)
    }

    public let policy: BackgroundPolicy
    public let modes: BackgroundModes
    public private(set) var state: State = .notRunning
    /// The open background tasks, oldest first.
    public private(set) var tasks: [BackgroundTask] = []
    /// Whether standard location updates run (the owner says so; rule 6).
    public private(set) var locationUpdatesActive = false
    /// Whether playback runs (the owner says so; rule 7).
    public private(set) var audioPlaying = false
    /// When the last location refreshed the budget.
    public private(set) var lastRefresh: Double?

    var nextTaskID = 1
    /// When the countdown reaches zero (background); `.infinity` while audio plays.
    var budgetEnd = Double.infinity
    /// The stretch's cap (rule 5).
    var capEnd = Double.infinity
    /// The app runs at least until then even when idle (grace or wake window).
    var runUntil = -Double.infinity
    /// When the app became idle in the background, or `nil` while something keeps it running.
    var idleSince: Double?
    /// When a suspended app with the fetch mode was last woken (or suspended).
    var lastFetch = 0.0
    /// The countdown's end a task begun during this wake gets (rule 8); `nil` outside wakes.
    var wakeGrant: Double?

    public init(policy: BackgroundPolicy = .ios7, modes: BackgroundModes = []) {
        precondition(policy.problem == nil, "invalid policy: \(policy.problem!)")
        self.policy = policy
        self.modes = modes
    }

    /// Whether a declared mode keeps the app running right now (rules 6 and 7).
    public var keepAlive: Bool {
        (modes.contains(.location) && locationUpdatesActive) || (modes.contains(.audio) && audioPlaying)
    }

    /// Seconds of background time left: unbounded (`.greatestFiniteMagnitude`) in the foreground
    /// or while audio plays, 0 when not running.
    public func backgroundTimeRemaining(at now: Double) -> Double {
        switch state {
        case .active, .inactive: return .greatestFiniteMagnitude
        case .background: return budgetEnd.isFinite ? max(0, budgetEnd - now) : .greatestFiniteMagnitude
        case .notRunning, .suspended, .terminated: return 0
        }
    }

    // MARK: - Inputs

    /// Starts the app: active, or in the background when launched by a wake.
    public mutating func launch(at now: Double, inBackground: Bool = false) -> [Event] {
        precondition(state == .notRunning, "launch from \(state)")
        if inBackground {
            let events = [move(to: .background, now, .launched)]
            startStretch(now)
            runUntil = now + policy.wakeWindow
            budgetEnd = audioKeepsAlive ? .infinity : runUntil
            wakeGrant = max(runUntil, min(now + policy.budget, capEnd))
            idleSince = isIdle ? now : nil
            return events
        }
        return [move(to: .active, now, .launched)]
    }

    /// Active → inactive (an interruption, or on the way to the background).
    public mutating func resignActive(at now: Double) -> [Event] {
        guard state == .active else { return [] }
        return [move(to: .inactive, now, .deactivated)]
    }

    /// Inactive → active.
    public mutating func becomeActive(at now: Double) -> [Event] {
        guard state == .inactive else { return [] }
        return [move(to: .active, now, .activated)]
    }

    /// Moves a foreground app to the background (through inactive), starting a stretch (rule 2).
    public mutating func enterBackground(at now: Double) -> [Event] {
        var events = resignActive(at: now)
        guard state == .inactive else { return events }
        events.append(move(to: .background, now, .movedToBackground))
        startStretch(now)
        runUntil = now + policy.grace
        budgetEnd = audioKeepsAlive ? .infinity : min(now + policy.budget, capEnd)
        wakeGrant = nil
        for i in tasks.indices { tasks[i].warned = false }
        idleSince = isIdle ? now : nil
        return events
    }

    /// Brings a background or suspended app to the foreground (through inactive): time is
    /// unbounded again (rule 9).
    public mutating func enterForeground(at now: Double) -> [Event] {
        guard state == .background || state == .suspended else { return [] }
        let events = [move(to: .inactive, now, .movedToForeground), move(to: .active, now, .activated)]
        budgetEnd = .infinity
        wakeGrant = nil
        idleSince = nil
        for i in tasks.indices { tasks[i].warned = false }
        return events
    }

    /// Begins a background task; ``TaskIdentifier/invalid`` when not allowed (rule 4).
    public mutating func begin(name: String, at now: Double) -> TaskIdentifier {
        switch state {
        case .active, .inactive: break
        case .background:
            // The first task of a wake gets the budget (rule 8), within the cap (rule 5).
            if let grant = wakeGrant {
                budgetEnd = max(budgetEnd, grant)
                wakeGrant = nil
            }
            if budgetEnd.isFinite && budgetEnd - now <= policy.warningLead { return .invalid }
        case .notRunning, .suspended, .terminated: return .invalid
        }
        let id = TaskIdentifier(rawValue: nextTaskID)
        nextTaskID += 1
        tasks.append(BackgroundTask(id: id, name: name, begun: now, warned: false))
        idleSince = nil
        return id
    }

    /// Ends a task. Ending ``TaskIdentifier/invalid`` or a task already ended does nothing and
    /// returns `false`, as ending an unknown task does on iOS.
    @discardableResult
    public mutating func end(_ id: TaskIdentifier, at now: Double) -> Bool {
        guard let i = tasks.firstIndex(where: { $0.id == id }) else { return false }
        tasks.remove(at: i)
        becameIdleIfSo(now)
        return true
    }

    /// Standard updates started or stopped (paused when stationary, or turned off).
    public mutating func setLocationUpdates(active: Bool, at now: Double) {
        locationUpdatesActive = active
        if keepAlive { idleSince = nil } else { becameIdleIfSo(now) }
    }

    /// Playback started or stopped.
    public mutating func setAudio(playing: Bool, at now: Double) {
        let was = audioKeepsAlive
        audioPlaying = playing
        guard state == .background else { return }
        if audioKeepsAlive {
            budgetEnd = .infinity
            idleSince = nil
        } else if was {
            startStretch(now)
            budgetEnd = min(now + policy.budget, capEnd)
            becameIdleIfSo(now)
        }
    }

    /// A location was delivered to the app: with the location mode and updates active, the
    /// countdown starts again at the full budget (rule 6).
    public mutating func locationDelivered(at now: Double) -> [Event] {
        guard state == .background, modes.contains(.location), locationUpdatesActive else { return [] }
        startStretch(now)
        lastRefresh = now
        if !audioKeepsAlive { budgetEnd = now + policy.budget }
        wakeGrant = nil
        for i in tasks.indices { tasks[i].warned = false }
        return [.refreshed(time: now, until: budgetEnd)]
    }

    /// A significant change, region event, visit or fetch: wakes a suspended app (rule 8). A running app
    /// in the background gets at least the wake window to handle it.
    public mutating func wake(_ reason: WakeReason, at now: Double) -> [Event] {
        switch state {
        case .suspended:
            let event = move(to: .background, now, .woken(reason))
            runUntil = now + policy.wakeWindow
            budgetEnd = audioKeepsAlive ? .infinity : runUntil
            wakeGrant = max(runUntil, min(now + policy.budget, capEnd))
            lastFetch = now
            idleSince = isIdle ? now : nil
            return [event]
        case .notRunning:
            return launch(at: now, inBackground: true)
        case .background:
            runUntil = max(runUntil, now + policy.wakeWindow)
            if budgetEnd < runUntil { budgetEnd = runUntil }
            return []
        case .active, .inactive, .terminated:
            return []
        }
    }

    /// Ends the process (the owner exits).
    public mutating func terminate(at now: Double) -> [Event] {
        guard state != .terminated else { return [] }
        tasks.removeAll()
        return [move(to: .terminated, now, .exited)]
    }

    // MARK: - Time

    /// When time alone causes the next event, or `nil` if it never will in this state.
    public var nextDeadline: Double? {
        switch state {
        case .background:
            var next = Double.infinity
            if tasks.contains(where: { !$0.warned }) { next = min(next, budgetEnd - policy.warningLead) }
            if !tasks.isEmpty || keepAlive { next = min(next, budgetEnd) }
            if let idle = idleSuspension { next = min(next, idle) }
            return next.isFinite ? next : nil
        case .suspended:
            return modes.contains(.fetch) ? lastFetch + policy.fetchInterval : nil
        default:
            return nil
        }
    }

    /// Processes every deadline up to `now`, in order, each at its own time. An owner that runs
    /// expiration handlers calls it with ``nextDeadline`` while that is not after `now`, running
    /// the handlers between calls, so they can end their tasks before the countdown reaches zero.
    public mutating func advance(to now: Double) -> [Event] {
        var events: [Event] = []
        while let t = nextDeadline, t <= now {
            events += fire(at: t)
        }
        return events
    }

    mutating func fire(at t: Double) -> [Event] {
        switch state {
        case .background:
            var events: [Event] = []
            if budgetEnd - policy.warningLead <= t {
                for i in tasks.indices where !tasks[i].warned {
                    tasks[i].warned = true
                    events.append(.expiring(tasks[i].id, name: tasks[i].name, time: t))
                }
                if !events.isEmpty { return events }
            }
            if budgetEnd <= t && !tasks.isEmpty {
                let names = tasks.map(\.name)
                tasks.removeAll()
                return [move(to: .terminated, t, .tasksNotEnded(names))]
            }
            if budgetEnd <= t && keepAlive {
                return [move(to: .suspended, t, .backgroundTimeExpired(budget: policy.budget))]
            }
            if let idle = idleSuspension, idle <= t {
                // The time ran out only if it did: tasks the expiration handlers ended before zero
                // leave the app idle, suspended after the grace like any other end of its work.
                // A wake's budget is its window until a task takes the grant (rule 8): at its end,
                // it was the window that ran out, not the policy's budget.
                let reason: Reason =
                    budgetEnd > t
                    ? .noBackgroundWork(grace: policy.grace)
                    : wakeGrant != nil
                        ? .wakeWindowEnded(window: policy.wakeWindow) : .backgroundTimeExpired(budget: policy.budget)
                lastFetch = t
                return [move(to: .suspended, t, reason)]
            }
            return []
        case .suspended:
            return wake(.fetch, at: t)
        default:
            return []
        }
    }

    // MARK: - Internals

    var audioKeepsAlive: Bool { modes.contains(.audio) && audioPlaying }
    var isIdle: Bool { tasks.isEmpty && !keepAlive }

    /// When an idle app is suspended (rule 1).
    var idleSuspension: Double? {
        guard state == .background, let idleSince, isIdle else { return nil }
        return min(max(idleSince + policy.grace, runUntil), budgetEnd)
    }

    mutating func becameIdleIfSo(_ now: Double) {
        if state == .background && isIdle && idleSince == nil { idleSince = now }
    }

    mutating func startStretch(_ now: Double) {
        capEnd = policy.totalCap.map { now + $0 } ?? .infinity
    }

    mutating func move(to new: State, _ time: Double, _ reason: Reason) -> Event {
        let from = state
        state = new
        if new != .background { idleSince = nil }
        return .transition(Transition(from: from, to: new, time: time, reason: reason))
    }
}
