import Formats
import Geo
import Lifecycle
import LocationService
import Synchronization

/// How an app tries to keep running in the background (the strategies of the field reports).
public enum Strategy: String, CaseIterable, Sendable {
    /// Nothing: enter the background and hope.
    case none
    /// One background task, ended by its expiration handler.
    case task
    /// A new task begun in every expiration handler, before ending the old one.
    case taskRestart = "task-restart"
    /// One background task never ended (the bug that gets apps killed).
    case unendedTask = "unended-task"
    /// Standard location updates with the `location` background mode.
    case location
    /// The `location` mode, one task open, location switched on for 1 s every 60 s.
    case locationPulse = "location-pulse"
    /// Significant-change monitoring: suspended, woken by each ≥ 500 m move; each wake uploads
    /// inside a 2 s task.
    case significantChange = "significant-change"
    /// Visit monitoring alone: suspended, woken by each visit's arrival and departure; each wake
    /// uploads inside a 2 s task.
    case visits
    /// The `audio` mode with continuous playback.
    case audio

    var modes: BackgroundModes {
        switch self {
        case .location, .locationPulse: .location
        case .audio: .audio
        default: []
        }
    }
}

/// What happened to one strategy under one policy.
public struct SimulationResult: Sendable, Hashable {
    public var policy: String
    public var strategy: Strategy
    /// Seconds the app's code ran after entering the background.
    public var ran: Double
    /// The simulated span.
    public var duration: Double
    /// When it first stopped running (suspended or terminated), from entering the background.
    public var firstStop: Double?
    public var finalState: AppLifecycle.State
    /// The reason of the first stop.
    public var firstStopReason: AppLifecycle.Reason?
    public var wakes: Int
    public var suspensions: Int
    public var refreshes: Int
    /// Every transition, in order (for comparing runs).
    public var transitions: [AppLifecycle.Transition]
}

/// A motion: the fixes a receiver would deliver, in time order.
public struct MotionProfile: Sendable {
    public var name: String
    public var fixes: [Fix]

    public init(name: String, fixes: [Fix]) {
        self.name = name
        self.fixes = fixes
    }

    /// A synthetic commute at 1 Hz: still for 10 minutes, then 5 minutes east at 10 m/s (3 km),
    /// repeated for `duration` seconds.
    public static func commute(duration: Double) -> MotionProfile {
        let start = Coordinate(latitude: 48.137154, longitude: 11.576124)
        let t0 = 1_767_225_600.0  // 2026-01-01T00:00:00Z
        var travelled = 0.0
        var out: [Fix] = []
        out.reserveCapacity(Int(duration) + 1)
        for i in 0...Int(duration) {
            let phase = i % 900
            let moving = phase >= 600
            if moving && i > 0 { travelled += 10 }
            let c = Geodesy.destination(from: start, bearing: 90, distance: travelled)
            let time = GNSSTime(nanosecondsSince1970: Int64(t0 + Double(i)) * 1_000_000_000, fractionDigits: 0)
            out.append(
                Fix(
                    time: time, coordinate: c, speed: moving ? 10 : 0, course: 90, mode: .twoD,
                    horizontalAccuracy: 5))
        }
        return MotionProfile(name: "synthetic commute (10 min still, 5 min at 10 m/s, repeated)", fixes: out)
    }

    /// The usable fixes of a recording, in time order (those before an earlier one are left out), for
    /// at most `duration` seconds.
    ///
    /// - Throws: ``TrackerError`` when the source reports an error or gives fewer than two usable fixes.
    public static func recorded<S: FixSource>(_ source: S, name: String, duration: Double? = nil) async throws
        -> MotionProfile
    {
        var fixes: [Fix] = []
        var first: Double?, last: Double?
        reading: for await element in source {
            switch element {
            case .fix(let fix):
                guard let l = Location(fix), l.horizontalAccuracy >= 0 else { continue }
                if let duration, let first, l.timestamp - first > duration { break reading }
                if let last, l.timestamp <= last { continue }
                first = first ?? l.timestamp
                last = l.timestamp
                fixes.append(fix)
            case .event(let e) where e.kind == .error:
                throw TrackerError(.source, e.message)
            default: break
            }
        }
        guard fixes.count >= 2 else { throw TrackerError(.tooFewFixes, "fewer than two usable fixes") }
        return MotionProfile(name: name, fixes: fixes)
    }

    var start: Double { fixes.first?.time?.secondsSince1970 ?? 0 }
    var end: Double { fixes.last?.time?.secondsSince1970 ?? 0 }
}

/// Runs a ``Tracker`` over a motion on a manual clock, the app sent to the background at the start,
/// with one strategy's behaviour on top: no real time passes. The keep-alive rules are the
/// tracker's own (``KeepAlive``): a simulation can't disagree with the tracker it models.
public struct BudgetSimulation: Sendable {
    public var policy: BackgroundPolicy
    public var strategy: Strategy
    public var profile: MotionProfile

    public init(policy: BackgroundPolicy, strategy: Strategy, profile: MotionProfile) {
        self.policy = policy
        self.strategy = strategy
        self.profile = profile
    }

    public func run() async throws -> SimulationResult {
        precondition(profile.fixes.count >= 2, "a motion needs two fixes or more")
        let t0 = profile.start
        let end = profile.end
        let clock = ManualClock(now: .init(secondsSince1970: t0))
        var c = Tracker.Configuration()
        c.policy = policy
        c.modes = strategy.modes
        c.startInBackground = true
        c.deadlineTimer = false
        // The system's significant-change and visit services see every fix, whatever the app's state.
        c.sampleInterval = 0
        switch strategy {
        case .location: break
        case .locationPulse: c.updatesLocationAtStart = false
        case .significantChange:
            c.standardUpdates = nil
            c.significantChanges = SignificantChangeMonitor()
        case .visits:
            c.standardUpdates = nil
            c.visits = VisitDetector.Configuration()
        default: c.standardUpdates = nil
        }
        let script = Script(strategy: strategy, t0: t0)
        let tracker = try Tracker(
            source: SimulatedMotion(profile: profile, clock: clock, script: script),
            configuration: c, sink: ClosureSink { event in script.observe(event) },
            clock: clock)
        script.tracker.withLock { $0 = tracker }
        try await tracker.run()
        let app = tracker.application
        clock.advance(to: .init(secondsSince1970: end))
        app.advance()
        var transitions = script.state.withLock { $0.transitions }
        for case .transition(let t) in app.takeEvents() { transitions.append(t) }

        // Account the transitions.
        var ran = 0.0
        var runningSince: Double? = t0
        var firstStop: Double?
        var firstReason: AppLifecycle.Reason?
        var wakes = 0
        var suspensions = 0
        for tr in transitions {
            if tr.to.isRunning, runningSince == nil { runningSince = tr.time }
            if !tr.to.isRunning, let since = runningSince {
                ran += tr.time - since
                runningSince = nil
                if firstStop == nil {
                    firstStop = tr.time - t0
                    firstReason = tr.reason
                }
            }
            if tr.to == .suspended { suspensions += 1 }
            if case .woken = tr.reason { wakes += 1 }
        }
        if let since = runningSince { ran += end - since }
        return SimulationResult(
            policy: policy.name, strategy: strategy, ran: ran, duration: end - t0,
            firstStop: firstStop, finalState: app.state, firstStopReason: firstReason,
            wakes: wakes, suspensions: suspensions,
            refreshes: script.state.withLock { $0.refreshes }, transitions: transitions)
    }

    /// What the app does on top of the tracker: its tasks, its pulses, its uploads after a wake.
    final class Script: Sendable {
        struct State {
            var started = false
            var pendingEnds: [(time: Double, id: AppLifecycle.TaskIdentifier)] = []
            var pulseOff: Double?
            var refreshes = 0
            var transitions: [AppLifecycle.Transition] = []
        }

        let strategy: Strategy
        let t0: Double
        let state = Mutex(State())
        let tracker = Mutex<Tracker?>(nil)

        init(strategy: Strategy, t0: Double) {
            self.strategy = strategy
            self.t0 = t0
        }

        /// Before the fix at `t` reaches the tracker (the clock is at `t`, the app advanced).
        func before(_ t: Double) {
            guard let tracker = tracker.withLock({ $0 }) else { return }
            let app = tracker.application
            if !state.withLock({ s in
                defer { s.started = true }; return s.started
            }) {
                switch strategy {
                case .task, .locationPulse: Self.beginEndingInHandler(app, name: strategy.rawValue)
                case .taskRestart: Self.beginRestartingInHandler(app)
                case .unendedTask: _ = app.beginBackgroundTask(name: "unended")
                case .audio: app.setAudio(playing: true)
                default: break
                }
            }
            let due = state.withLock { s -> [AppLifecycle.TaskIdentifier] in
                var ids: [AppLifecycle.TaskIdentifier] = []
                while let e = s.pendingEnds.first, e.time <= t {
                    s.pendingEnds.removeFirst()
                    ids.append(e.id)
                }
                return ids
            }
            for id in due { app.endBackgroundTask(id) }
            let off = state.withLock { s -> Bool in
                guard let off = s.pulseOff, off <= t else { return false }
                s.pulseOff = nil
                return true
            }
            if off { tracker.stopUpdatingLocation() }
            if strategy == .locationPulse, app.state.isRunning, (t - t0).truncatingRemainder(dividingBy: 60) == 0,
                t > t0
            {
                tracker.startUpdatingLocation()
                state.withLock { $0.pulseOff = t + 1 }
            }
        }

        /// What the tracker reported.
        func observe(_ event: TrackerEvent) {
            switch event {
            case .lifecycle(.transition(let t), _):
                state.withLock { $0.transitions.append(t) }
            case .location(.location):
                state.withLock { $0.refreshes += 1 }
            case .location(.significantChange(let l)) where strategy == .significantChange && l.timestamp > t0:
                upload(at: l.timestamp)
            case .location(.visit(_, let l)) where strategy == .visits:
                upload(at: l.timestamp)
            default: break
            }
        }

        /// A wake's upload: a 2 s background task begun at `t`.
        func upload(at t: Double) {
            guard let app = tracker.withLock({ $0 })?.application, app.state.isRunning else { return }
            let id = app.beginBackgroundTask(name: "upload")
            if id != .invalid { state.withLock { $0.pendingEnds.append((t + 2, id)) } }
        }

        static func beginEndingInHandler(_ app: Application, name: String) {
            let id = Box()
            id.value = app.beginBackgroundTask(name: name) { app.endBackgroundTask(id.value) }
        }

        static func beginRestartingInHandler(_ app: Application) {
            let id = Box()
            id.value = app.beginBackgroundTask(name: "task-restart") {
                let old = id.value
                beginRestartingInHandler(app)
                app.endBackgroundTask(old)
            }
        }
    }
}

/// The motion as a fix source: each fix moves the manual clock to its time and lets the script act
/// before the tracker sees it.
struct SimulatedMotion: FixSource {
    let profile: MotionProfile
    let clock: ManualClock
    let script: BudgetSimulation.Script

    var name: String { "simulation" }

    func makeAsyncIterator() -> Iterator { Iterator(source: self) }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = SourceElement
        typealias Failure = Never
        let source: SimulatedMotion
        var index = 0

        mutating func next() async -> SourceElement? {
            guard index < source.profile.fixes.count else { return nil }
            let fix = source.profile.fixes[index]
            index += 1
            let t = fix.time?.secondsSince1970 ?? 0
            source.clock.advance(to: .init(secondsSince1970: t))
            source.script.tracker.withLock { $0 }?.application.advance()
            source.script.before(t)
            return .fix(fix)
        }
    }
}

/// A task identifier a handler can read after `begin` returned it.
final class Box: Sendable {
    private let storage = Mutex(AppLifecycle.TaskIdentifier.invalid)
    var value: AppLifecycle.TaskIdentifier {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
