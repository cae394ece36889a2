import Geo
import Lifecycle
import LocationService
import Synchronization

/// How an app tries to keep running in the background (the strategies of the field reports).
enum Strategy: String, CaseIterable, Sendable {
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
struct SimulationResult: Sendable, Hashable {
    var policy: String
    var strategy: Strategy
    /// Seconds the app's code ran after entering the background.
    var ran: Double
    /// The simulated span.
    var duration: Double
    /// When it first stopped running (suspended or terminated), from entering the background.
    var firstStop: Double?
    var finalState: AppLifecycle.State
    /// The reason of the first stop.
    var firstStopReason: AppLifecycle.Reason?
    var wakes: Int
    var suspensions: Int
    var refreshes: Int

    /// One sentence: how long it ran and why it stopped.
    var why: String {
        guard let firstStop, let firstStopReason else {
            switch strategy {
            case .location, .locationPulse: return "ran throughout: \(grouped(refreshes)) locations refreshed the budget"
            case .audio: return "ran throughout: playback keeps the app running"
            default: return "ran throughout"
            }
        }
        if wakes > 0 {
            let perWake = Int(((ran - firstStop) / Double(wakes)).rounded())
            return "suspended between moves: woken \(grouped(wakes)) times by significant changes, ~\(perWake) s each"
        }
        return "\(firstStopReason)"
    }
}

/// A motion: one location per sample, times in seconds since 1970.
struct MotionProfile: Sendable {
    var name: String
    var locations: [Location]

    /// A synthetic commute at 1 Hz: still for 10 minutes, then 5 minutes east at 10 m/s (3 km),
    /// repeated for `duration` seconds.
    static func commute(duration: Double) -> MotionProfile {
        let start = Coordinate(latitude: 48.137154, longitude: 11.576124)
        let t0 = 1_767_225_600.0  // 2026-01-01T00:00:00Z
        var travelled = 0.0
        var out: [Location] = []
        out.reserveCapacity(Int(duration) + 1)
        for i in 0...Int(duration) {
            let phase = i % 900
            let moving = phase >= 600
            if moving && i > 0 { travelled += 10 }
            let c = Geodesy.destination(from: start, bearing: 90, distance: travelled)
            out.append(Location(coordinate: c, horizontalAccuracy: 5, speed: moving ? 10 : 0, course: 90,
                                timestamp: t0 + Double(i)))
        }
        return MotionProfile(name: "synthetic commute (10 min still, 5 min at 10 m/s, repeated)", locations: out)
    }
}

/// Runs the lifecycle model over a motion on a manual clock: no real time passes.
struct BudgetSimulation {
    var policy: BackgroundPolicy
    var strategy: Strategy
    var profile: MotionProfile

    func run() -> SimulationResult {
        let locations = profile.locations
        guard let first = locations.first else { preconditionFailure("empty motion profile") }
        let t0 = first.timestamp
        let end = locations.last!.timestamp
        let clock = ManualClock(now: .init(secondsSince1970: t0))
        let app = Application(policy: policy, modes: strategy.modes, now: { clock.now.secondsSince1970 })
        app.launch()
        app.enterBackground()

        switch strategy {
        case .none, .location, .significantChange: break
        case .task, .locationPulse:
            Self.beginEndingInHandler(app, name: strategy.rawValue)
        case .taskRestart:
            Self.beginRestartingInHandler(app)
        case .unendedTask:
            _ = app.beginBackgroundTask(name: "unended")
        case .audio:
            app.setAudio(playing: true)
        }
        if strategy == .location { app.setLocationUpdates(active: true) }

        var standard = StandardUpdateFilter()
        var significant = SignificantChangeMonitor()
        var pendingEnds: [(time: Double, id: AppLifecycle.TaskIdentifier)] = []
        var refreshes = 0
        var pulseOff: Double?
        for location in locations {
            let t = location.timestamp
            clock.advance(to: .init(secondsSince1970: t))
            app.advance()
            while let e = pendingEnds.first, e.time <= t {
                pendingEnds.removeFirst()
                app.endBackgroundTask(e.id)
            }
            if let off = pulseOff, off <= t {
                pulseOff = nil
                app.setLocationUpdates(active: false)
            }
            // The system's significant-change service runs whatever the app's state.
            if strategy == .significantChange, significant.process(location) != nil, t > t0 {
                if app.state == .suspended { app.wake(.significantChange) }
                if app.state.isRunning {
                    let id = app.beginBackgroundTask(name: "upload")
                    if id != .invalid { pendingEnds.append((t + 2, id)) }
                }
            }
            guard app.state.isRunning else { continue }
            switch strategy {
            case .location:
                for outcome in standard.process(location, now: t) {
                    guard case .deliver = outcome else { continue }
                    app.locationDelivered()
                    refreshes += 1
                }
            case .locationPulse where (t - t0).truncatingRemainder(dividingBy: 60) == 0 && t > t0:
                app.setLocationUpdates(active: true)
                app.locationDelivered()
                refreshes += 1
                pulseOff = t + 1
            default: break
            }
        }
        clock.advance(to: .init(secondsSince1970: end))
        app.advance()

        // Account the transitions.
        var ran = 0.0
        var runningSince: Double? = t0
        var firstStop: Double?
        var firstReason: AppLifecycle.Reason?
        var wakes = 0
        var suspensions = 0
        for case .transition(let tr) in app.takeEvents() {
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
        return SimulationResult(policy: policy.name, strategy: strategy, ran: ran, duration: end - t0,
                                firstStop: firstStop, finalState: app.state, firstStopReason: firstReason,
                                wakes: wakes, suspensions: suspensions, refreshes: refreshes)
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

/// A task identifier a handler can read after `begin` returned it.
final class Box: Sendable {
    private let storage = Mutex(AppLifecycle.TaskIdentifier.invalid)
    var value: AppLifecycle.TaskIdentifier {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
