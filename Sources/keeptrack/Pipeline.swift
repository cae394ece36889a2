import ArgumentParser
import Formats
import Logging
import Upload
import GPSInput
import Geo
import Lifecycle
import LocationService
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The background-budget options of `replay` and `track`.
struct LifecycleOptions: ParsableArguments {
    @Flag(help: "Start in the background: the budget counts from the start (README, \"The background budget\").")
    var background = false

    @Option(help: ArgumentHelp(
        "Declared background modes: location, audio, fetch, processing (comma-separated), or none. The default is location.",
        valueName: "modes"))
    var backgroundModes: String = "location"

    @OptionGroup var policyOptions: PolicyOptions

    @Option(help: ArgumentHelp(
        "While suspended, take one fix this often for significant changes and regions. The default is 60.",
        valueName: "seconds"))
    var sampleInterval: Double = 60

    /// Whether any option asks for the lifecycle to matter (it always runs; in the foreground it
    /// changes nothing until moved to the background).
    var isSet: Bool { background || policyOptions.policy != nil || policyOptions.isCustom }

    var modes: BackgroundModes { BackgroundModes(list: backgroundModes) ?? [] }

    func validate() throws {
        if BackgroundModes(list: backgroundModes) == nil {
            throw ValidationError("--background-modes takes location, audio, fetch, processing (comma-separated) or "
                + "none, got '\(backgroundModes)'.")
        }
        if !(sampleInterval > 0 && sampleInterval.isFinite) {
            throw ValidationError("--sample-interval must be a positive number of seconds.")
        }
        _ = try policyOptions.resolved()
    }
}

/// A source whose hold on the receiver can be given up while the app is suspended.
protocol WatchReleasing: Sendable {
    func releaseWatch()
    func acquireWatch()
}

extension GPSDSource: WatchReleasing {}

/// The lifecycle's real effects on Linux: the watch released while suspended and taken back for a
/// sample every `sampleInterval` and on a wake; systemd told the state and pinged while fixes
/// arrive.
final class LifecycleRuntime: Sendable {
    struct Shared {
        /// When the last fix arrived (on the pipeline's clock).
        var lastFix: Double?
        /// Monotonic time of the last watchdog ping.
        var lastPing = -Double.infinity
        /// When to take the watch back for a sample while suspended.
        var nextSample = Double.infinity
    }

    let app: Application
    let notifier: SystemdNotifier?
    /// Sets the gauges before metrics are read.
    let refresh = Mutex<(@Sendable () -> Void)?>(nil)
    var refreshGauges: (@Sendable () -> Void)? {
        get { refresh.withLock { $0 } }
        set { refresh.withLock { $0 = newValue } }
    }
    let releaser: (any WatchReleasing)?
    let sampleInterval: Double
    let shared = Mutex(Shared())

    init(app: Application, notifier: SystemdNotifier?, releaser: (any WatchReleasing)?, sampleInterval: Double) {
        self.app = app
        self.notifier = notifier
        self.releaser = releaser
        self.sampleInterval = sampleInterval
        app.observe { [weak self] event in self?.perform(event) }
    }

    /// The effect of one lifecycle event.
    func perform(_ event: AppLifecycle.Event) {
        guard case .transition(let t) = event else { return }
        if t.to == .suspended {
            releaser?.releaseWatch()
            let next = t.time + sampleInterval
            shared.withLock { $0.nextSample = next }
        } else if t.from == .suspended {
            shared.withLock { $0.nextSample = .infinity }
            releaser?.acquireWatch()
        }
        notifier?.notify("STATUS=\(statusLine(state: t.to, at: t.time))")
        if t.to == .terminated { notifier?.notify("STOPPING=1") }
    }

    /// Called for every fix: pings the watchdog (at most once a second).
    func fixArrived(at t: Double) {
        let m = monotonicSeconds()
        let ping = shared.withLock { s -> Bool in
            s.lastFix = t
            guard m - s.lastPing >= 1 else { return false }
            s.lastPing = m
            return true
        }
        if ping, let notifier {
            notifier.notify("WATCHDOG=1\nSTATUS=\(statusLine(state: app.state, at: t))")
        }
    }

    /// A fix was sampled while suspended: give the watch up again until the next sample.
    func sampled(at t: Double) {
        guard let releaser else { return }
        releaser.releaseWatch()
        shared.withLock { $0.nextSample = t + sampleInterval }
    }

    /// Takes the watch back when a sample is due; returns the next time to look.
    func sampleIfDue(at t: Double) -> Double? {
        guard releaser != nil, app.state == .suspended else { return nil }
        let due = shared.withLock { s -> Bool in
            guard s.nextSample <= t else { return false }
            s.nextSample = .infinity
            return true
        }
        if due { releaser?.acquireWatch() }
        let next = shared.withLock { $0.nextSample }
        return next.isFinite ? next : nil
    }

    func statusLine(state: AppLifecycle.State, at t: Double) -> String {
        let remaining = app.lifecycle.backgroundTimeRemaining(at: t)
        switch state {
        case .background:
            return remaining == .greatestFiniteMagnitude
                ? "background, running" : "background, \(Int(remaining.rounded())) s of background time left"
        case .suspended: return "suspended: GPS watch released, sampling every \(Int(sampleInterval)) s"
        default: return state.rawValue
        }
    }

    /// The answer to `keeptrack ctl status`, as one JSON object.
    func statusJSON(now t: Double) -> String {
        let l = app.lifecycle
        let remaining = l.backgroundTimeRemaining(at: t)
        var out = OutputBuffer()
        out.append("{\"state\":\"\(l.state.rawValue)\",\"policy\":\"\(l.policy.name)\",\"modes\":[")
        out.append(l.modes.names.map { "\"\($0)\"" }.joined(separator: ","))
        out.append("],\"backgroundTimeRemaining\":")
        out.append(remaining == .greatestFiniteMagnitude ? "null" : format3(remaining))
        out.append(",\"tasks\":[")
        for (i, task) in l.tasks.enumerated() {
            if i > 0 { out.append(",") }
            out.append("{\"name\":")
            out.appendJSONString(task.name)
            out.append(",\"age\":\(format3(t - task.begun))}")
        }
        out.append("],\"lastFixAge\":")
        if let last = shared.withLock({ $0.lastFix }) { out.append(format3(max(0, t - last))) } else { out.append("null") }
        out.append(",\"locationUpdates\":\(l.locationUpdatesActive)}")
        return String(decoding: out.bytes, as: UTF8.self)
    }
}

/// Runs the location service and the lifecycle over `source` and prints their events. With a
/// `store`, the regions come from it (unless --regions names a file) and their states are saved
/// after each transition. `control` (live tracking) serves `keeptrack ctl`, SIGUSR1/SIGUSR2 and
/// the lifecycle's deadlines between fixes; without it (replay) deadlines are processed as the
/// log's time passes them, and the app launches at the log's first fix (`onLogTime`).
func runPipeline<S: FixSource>(
    _ source: S, options: LocationOptions, lifecycle: LifecycleOptions, lineBuffered: Bool,
    store: RegionStore? = nil, control: String? = nil, releaser: (any WatchReleasing)? = nil,
    onLogTime: Bool = false, upload uploadOptions: UploadOptions? = nil, dataDirectory: String? = nil,
    quiet: Bool = false, now: @escaping @Sendable () -> Double
) async throws {
    let c = options.configuration
    var configuration = LocationManager<S>.Configuration()
    configuration.standardUpdates = c.standardUpdates
    configuration.significantChanges = c.significantChanges
    var (regions, failures) = try options.regionMonitorAndFailures()
    let persist = options.regions == nil ? store : nil
    if let persist {
        do {
            regions = try persist.loadMonitor()
        } catch {
            throw ValidationError("\(error)")
        }
    }
    var decisions = Decisions(configuration: configuration, regions: regions)
    let app = Application(policy: try lifecycle.policyOptions.resolved(), modes: lifecycle.modes, now: now)
    var environment: [String: String] = [:]
    for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC"] {
        if let v = getenv(key) { environment[key] = String(cString: v) }
    }
    let runtime = LifecycleRuntime(app: app, notifier: SystemdNotifier(environment: environment), releaser: releaser,
                                   sampleInterval: lifecycle.sampleInterval)
    var output = EventOutput(lineBuffered: lineBuffered)
    var launched = false
    func launch() {
        launched = true
        runtime.notifier?.notify("READY=1")
        app.launch()
        _ = app.takeEvents()  // launching is not news
        if lifecycle.background { app.enterBackground() }
        app.setLocationUpdates(active: configuration.standardUpdates != nil)
    }
    // On log time the clock starts with the first fix.
    if !onLogTime { launch() }
    // Uploads: the outbox first, then the uploader in the background, inside the lifecycle.
    var upload: UploadRuntime?
    if let uploadOptions, uploadOptions.enabled, let dataDirectory {
        upload = try await UploadRuntime.start(uploadOptions, dataDirectory: dataDirectory, application: app)
    }
    let uploading = upload.map { u in Task { await u.uploader.run() } }
    let metrics = PipelineMetrics()
    let logger = Logger(label: "keeptrack.track")
    // Gauges are read when asked for (keeptrack status), not at every fix.
    runtime.refreshGauges = { [upload] in
        let t = now()
        let l = app.lifecycle
        metrics.state(l.state)
        let left = l.backgroundTimeRemaining(at: t)
        metrics.budget.record(left == .greatestFiniteMagnitude ? -1 : left)
        if let upload, let stats = try? upload.outbox.stats() {
            metrics.outboxDepth.record(stats.pending)
            metrics.outboxOldest.record(stats.oldestAppended.map { max(0, wallClockSeconds() - $0) } ?? 0)
            if let last = upload.uploader.stats.lastSuccess { metrics.lastUpload.record(last) }
        }
    }
    let controller = try control.map { try ControlServer(path: $0, runtime: runtime) }
    controller?.start()
    defer { controller?.stop() }

    // Like CoreLocation's monitoringDidFail: each region that cannot be monitored is an event; the
    // others are monitored.
    for failure in failures {
        try output.write(.error(LocationError(.regionMonitoringFailure, failure)))
    }
    try output.writeLifecycle(app.takeEvents(), app: app)
    var lastSample = -Double.infinity
    var deadline = app.nextDeadline
    var lastLocation: Location?
    var records: [TrailRecord] = []
    for await element in source {
        // A graceful shutdown cancels this task; a replay's source doesn't watch for that itself.
        if Task.isCancelled { break }
        if !launched {
            guard element.fix != nil else { continue }
            launch()
        }
        let t = now()
        if element.fix != nil {
            runtime.fixArrived(at: t)
            metrics.fixes.increment()
        }
        app.advance()
        try output.writeLifecycle(app.takeEvents(), app: app)
        if app.state == .terminated { break }
        let suspended = app.state == .suspended
        if suspended, element.fix != nil, releaser == nil {
            // Sources that cannot let go of the receiver are sampled by time instead.
            if t - lastSample < lifecycle.sampleInterval { continue }
            lastSample = t
        }
        decisions.isSuspended = suspended
        if let fix = element.fix, let l = Location(fix), l.horizontalAccuracy >= 0 { lastLocation = l }
        let events = decisions.handle(element, now: t)
        for reason in decisions.lastRejections { metrics.filtered(reason) }
        for event in events {
            switch event {
            case .location: metrics.locations.increment()
            case .significantChange(let l):
                metrics.significantChanges.increment()
                logger.info("significant change", metadata: logger.coordinates(l))
            case .region(.enter): metrics.regionEvents["enter"]?.increment()
            case .region(.exit): metrics.regionEvents["exit"]?.increment()
            case .region(.dwell): metrics.regionEvents["dwell"]?.increment()
            default: break
            }
            if let upload {
                // Into the outbox before anything else happens to it.
                switch event {
                case .location(let l):
                    records.append(TrailRecord(device: upload.outbox.device, sequence: 0, location: l))
                case .region(.enter(let id, let time)), .region(.exit(let id, let time)), .region(.dwell(let id, let time)):
                    if let at = lastLocation {
                        let kind: TrailRecord.Kind = switch event {
                        case .region(.enter): .enter
                        case .region(.exit): .exit
                        default: .dwell
                        }
                        var r = TrailRecord(device: upload.outbox.device, sequence: 0, location: at, kind: kind, region: id)
                        r.time = time
                        records.append(r)
                    }
                default: break
                }
                if !records.isEmpty {
                    let evicted = try upload.append(records)
                    records.removeAll(keepingCapacity: true)
                    if evicted.total > 0 {
                        metrics.evicted.increment(by: evicted.total)
                        output.out.append("{\"event\":\"outbox-evicted\",\"count\":\(evicted.total),"
                            + "\"byCount\":\(evicted.byCount),\"byAge\":\(evicted.byAge)}\n")
                    }
                }
            }
            switch event {
            case .location: app.locationDelivered()
            case .paused: app.setLocationUpdates(active: false)
            case .resumed: app.setLocationUpdates(active: true)
            case .significantChange: if app.state == .suspended { app.wake(.significantChange) }
            case .region(.enter(let id, _)), .region(.exit(let id, _)), .region(.dwell(let id, _)):
                if app.state == .suspended { app.wake(.region(id)) }
            default: break
            }
            try output.writeLifecycle(app.takeEvents(), app: app)
            try output.write(event)
            if let persist, case .region(let e) = event {
                if case .dwell = e { continue }
                do {
                    try persist.saveStates(of: decisions.regions)
                } catch {
                    printError("warning: \(error)")
                }
            }
        }
        if let e = element.event, e.kind == .released || e.kind == .acquired {
            try output.writeSource(e)
        }
        if suspended, app.state == .suspended, element.fix != nil { runtime.sampled(at: t) }
        // Wake the control thread when a deadline moved earlier.
        let next = app.nextDeadline
        if let next, next < (deadline ?? .infinity) { controller?.poke() }
        deadline = next
    }
    // A graceful shutdown (SIGTERM, SIGINT) cancels the input; what follows still runs.
    let interrupted = Task.isCancelled
    try output.writeLifecycle(app.takeEvents(), app: app)
    try output.out.flush()
    if let upload {
        uploading?.cancel()
        await uploading?.value
        let deadline = interrupted ? uploadOptions?.shutdownTimeout : nil
        try await Task { try await upload.finish(quiet: quiet && !interrupted, within: deadline) }.value
    }
    if app.state == .terminated {
        printError("keeptrack: the app was terminated (see the \"terminated\" event)")
        throw ExitCode(1)
    }
}

extension EventOutput {
    /// Writes lifecycle events: {"event":"background"|"suspended"|"resumed"|"active"|"inactive"|
    /// "terminated","time":...,"reason":...}, {"event":"expiring","task":...,"time":...}.
    mutating func writeLifecycle(_ events: [AppLifecycle.Event], app: Application) throws(OutputError) {
        guard !events.isEmpty else { return }
        for e in events {
            switch e {
            case .transition(let t):
                let name: StaticString
                switch t.to {
                case .active: name = "active"
                case .inactive: name = "inactive"
                case .background: name = t.from == .suspended ? "resumed" : "background"
                case .suspended: name = "suspended"
                case .terminated: name = "terminated"
                case .notRunning: continue
                }
                ByteWriting.appendStatic("{\"event\":\"", to: &out.bytes)
                ByteWriting.appendStatic(name, to: &out.bytes)
                ByteWriting.appendStatic("\",\"time\":\"", to: &out.bytes)
                Self.time(t.time).appendISO8601(to: &out.bytes)
                ByteWriting.appendStatic("\",\"reason\":", to: &out.bytes)
                ByteWriting.appendJSONString(t.reason.description, to: &out.bytes)
                if t.to == .background {
                    let left = app.lifecycle.backgroundTimeRemaining(at: t.time)
                    ByteWriting.appendStatic(",\"backgroundTimeRemaining\":", to: &out.bytes)
                    if left == .greatestFiniteMagnitude { ByteWriting.appendStatic("null", to: &out.bytes) } else {
                        ByteWriting.appendFixed(left, decimals: 3, to: &out.bytes)
                    }
                }
                ByteWriting.appendStatic("}\n", to: &out.bytes)
            case .expiring(_, let task, let time):
                ByteWriting.appendStatic("{\"event\":\"expiring\",\"task\":", to: &out.bytes)
                ByteWriting.appendJSONString(task, to: &out.bytes)
                ByteWriting.appendStatic(",\"time\":\"", to: &out.bytes)
                Self.time(time).appendISO8601(to: &out.bytes)
                ByteWriting.appendStatic("\"}\n", to: &out.bytes)
            case .refreshed:
                continue
            }
        }
        try out.endRecord(lineBuffered: lineBuffered)
    }

    /// Writes a source event in the `replay`/`track` schema.
    mutating func writeSource(_ e: SourceEvent) throws(OutputError) {
        out.appendStringObject(["event": "source", "kind": e.kind.rawValue, "source": e.source, "message": e.message])
        try out.endRecord(lineBuffered: lineBuffered)
    }
}
