import Formats
import Geo
import Lifecycle
import LocationService
import Logging
import ServiceLifecycle
import Synchronization
import SystemIO
import Upload

/// The tracker a program embeds: any `FixSource` in, the location service's decisions
/// (`LocationManager`), the lifecycle's reactions (``KeepAlive``, suspension, wakes), the trail
/// recorded into a durable outbox and uploaded, every event out to a ``TrackerEventSink``.
///
/// A swift-service-lifecycle `Service`: run ``services`` in one `ServiceGroup` (the uploader, when
/// uploads are configured, then the tracker), which stops them in the right order on SIGTERM: the
/// source first, then the outbox is uploaded within ``UploadSettings/shutdownTimeout``.
///
/// ```swift
/// let tracker = try Tracker(source: NMEALogSource(options: .init(path: "walk.nmea")),
///                           configuration: configuration, sink: JSONLinesSink(), clock: WallClock())
/// try await ServiceGroup(configuration: .init(services: tracker.services, logger: logger)).run()
/// ```
///
/// Time comes from `clock`: the wall clock live, the log's clock in a replay, a manual clock in
/// tests and `keeptrack simulate`, so a day-long log gives the same events as living through it.
/// Uploads wait on the wall clock (their waits are the network's).
public final class Tracker: Service, Sendable {
    public let configuration: Configuration
    /// The app whose lifecycle the tracker runs (state, background tasks, budget).
    public var application: Application { core.app }
    /// The outbox, when uploads are configured.
    public var outbox: Outbox? { core.outbox }
    /// The uploader's service, when uploads are configured: run it in the same group, before the
    /// tracker (``services`` does).
    public let uploadService: UploadService?
    let core: TrackerCore
    let body: @Sendable () async throws -> Void
    /// The location manager, gated by calls (standard updates on and off, the app suspended).
    let manager: any LocationManagerGate
    let regionState: @Sendable (String) -> RegionState?

    /// - Parameters:
    ///   - source: where fixes come from (gpsd, a serial receiver, a log, a synthetic motion).
    ///   - configuration: every location, lifecycle and upload setting.
    ///   - sink: where events go. The default discards them.
    ///   - releaser: the source's hold on the receiver, released while suspended (gpsd's watch).
    ///   - notifier: systemd's notification socket, told the state and pinged while fixes arrive.
    ///   - logger: where the tracker logs its start, source changes, lifecycle transitions and problems.
    ///   - clock: the time of the lifecycle, the location service and the records.
    /// - Throws: ``TrackerError`` when the region store or the outbox can't be opened, or the
    ///   uploader's settings can't be used.
    public init<S: FixSource>(
        source: S, configuration: Configuration, sink: any TrackerEventSink = DiscardingSink(),
        releaser: (any WatchReleasing)? = nil, notifier: SystemdNotifier? = nil,
        logger: Logger = Logger(label: "keeptrack.tracker"),
        clock: any EpochClock
    ) throws {
        self.configuration = configuration
        var regions = configuration.regions
        if let store = configuration.regionStore {
            do {
                regions = try store.loadMonitor()
            } catch {
                throw TrackerError(.regionStore, "", underlying: error)
            }
        }
        let app = Application(policy: configuration.policy, modes: configuration.modes, clock: clock)
        var outbox: Outbox?
        var uploadService: UploadService?
        if var upload = configuration.upload {
            // OwnTracks' transitions carry their waypoint's creation time: when the regions were stored.
            if let defined = configuration.regionStore?.definitionsStoredAt() {
                upload.uploader.formatSettings.regionsDefinedAt = defined
                for i in upload.otherTargets.indices {
                    upload.otherTargets[i].formatSettings.regionsDefinedAt = defined
                }
            }
            do {
                // A first run: the data directory may not exist yet.
                if let slash = upload.outboxPath.lastIndex(of: "/"), slash != upload.outboxPath.startIndex {
                    makeDirectories(String(upload.outboxPath[..<slash]))
                }
                outbox = try Outbox(path: upload.outboxPath, configuration: upload.outbox)
                uploadService = try UploadService(
                    outbox: outbox!, settings: upload, application: app, logger: logger,
                    clock: WallClock())
            } catch let error as TrackerError {
                throw error
            } catch {
                throw TrackerError(.upload, "", underlying: error)
            }
        }
        let core = TrackerCore(
            configuration: configuration, app: app, outbox: outbox, uploads: uploadService,
            sink: sink, releaser: releaser, notifier: notifier, logger: logger,
            clock: clock)
        let manager = LocationManager(
            source: GatedSource(upstream: source, core: core),
            configuration: configuration.locationManager, regions: regions,
            updatingLocation: configuration.updatesLocationAtStart,
            rejected: { [metrics = core.metrics, core] reason in
                metrics.filtered(reason)
                core.heartbeatFixRejected()
                switch reason {
                case .outOfOrder, .stale: core.state.withLock { $0.outOfOrder += 1 }
                case .noDate: core.state.withLock { $0.undated += 1 }
                default: break
                }
            }, clock: clock)
        core.gate(manager)
        core.regionSaving.withLock { $0 = RegionStateSaving(version: regions.insideVersion) }
        self.core = core
        self.manager = manager
        self.uploadService = uploadService
        // The loop runs on the source's reading thread when it has one (gpsd): a fix goes from
        // the report to the outbox and the output without a thread hand-off.
        let executor = source.preferredExecutor
        self.body = { try await withTaskExecutorPreference(executor) { try await core.consume(manager) } }
        self.regionState = { manager.regionState(for: $0) }
        uploadService?.tracker = core
    }

    /// The services to run in one `ServiceGroup`, in order: the uploader (when configured), then the
    /// tracker, whose end (a log's end, a terminated app) shuts the group down gracefully. A graceful
    /// shutdown stops them in reverse: the input first, then the upload of what is left. Put an
    /// endpoint the uploader sends to before them, and a control socket after.
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        var out: [ServiceGroupConfiguration.ServiceConfiguration] = []
        // It returns first at a log's end, once everything is sent: the tracker's return stops the group.
        if let uploadService { out.append(.init(service: uploadService, successTerminationBehavior: .ignore)) }
        out.append(.init(service: self, successTerminationBehavior: .gracefullyShutdownGroup))
        return out
    }

    /// Runs ``services`` in one service group that shuts down gracefully on SIGTERM, SIGINT and SIGHUP
    /// (a closed terminal; there is nothing to reload):
    /// `before` first (an endpoint the uploader sends to: stopped last), a control socket at
    /// `control` after (stopped first), until the input ends or a signal stops it.
    ///
    /// - Throws: ``TrackerError`` when the control socket cannot be served (before anything starts).
    public func runGroup(before: [any Service] = [], control: String? = nil, logger: Logger) async throws {
        var services = before.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) } + self.services
        if let control { services.append(.init(service: try ControlSocket(path: control, tracker: self))) }
        let group = ServiceGroup(
            configuration: .init(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint, .sighup],
                logger: logger))
        try await group.run()
    }

    /// Reads the source until it ends, the app is terminated, or a graceful shutdown (or
    /// cancellation) stops it; the outbox keeps every record for the uploader.
    ///
    /// At the input's end (a log's), it returns once the uploader has sent what the outbox holds
    /// (``UploadService/inputEnded()``): the group stops after that, so that a signal meanwhile stops
    /// the upload as it would during the input, within the shutdown timeout.
    public func run() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            if configuration.deadlineTimer { group.addTask { await self.core.runDeadlines() } }
            try await cancelWhenGracefulShutdown { [body, core, uploadService] in
                try await body()
                if core.inputFinished { await uploadService?.inputEnded() }
            }
            group.cancelAll()
        }
    }

    /// Starts standard updates (CLLocationManager's `startUpdatingLocation`): the location keep-alive
    /// holds again while they run.
    public func startUpdatingLocation() {
        manager.startUpdatingLocation()
        if configuration.standardUpdates != nil { application.setLocationUpdates(active: true) }
    }

    /// Stops standard updates; significant changes and regions go on.
    public func stopUpdatingLocation() {
        manager.stopUpdatingLocation()
        application.setLocationUpdates(active: false)
    }

    /// Sends the app to the background (`keeptrack ctl background`, SIGUSR1).
    public func enterBackground() {
        application.enterBackground()
        core.timer.fire()
    }

    /// Brings the app to the foreground (`keeptrack ctl foreground`, SIGUSR2).
    public func enterForeground() {
        application.enterForeground()
        core.timer.fire()
    }

    /// The state as one JSON object: `{"state":...,"policy":...,"modes":[...],
    /// "backgroundTimeRemaining":...,"tasks":[...],"lastFixAge":...,"locationUpdates":...,
    /// "inputLost":...}`, the last of them the input's problem while it lasts (an unplugged
    /// receiver, a dead gpsd), `null` otherwise.
    public func statusJSON() -> String {
        core.effects.statusJSON(now: application.now, inputLost: core.state.withLock { $0.sourceLost })
    }

    /// Sets the gauges (state, budget, outbox depth and age, last upload) to their values now;
    /// counters are always current.
    public func refreshGauges() { core.refreshGauges() }

    /// The current state of a monitored region, like CLLocationManager's `requestState(for:)`
    /// (`unknown` before its first evidence); `nil` when no region has that id.
    public func state(ofRegion id: String) -> RegionState? { regionState(id) }

    /// Whether the source ended by itself (end of a log) rather than by a stop.
    public var inputFinished: Bool { core.inputFinished }

    /// The source's last `error` event, `nil` when it reported none: a log that cannot be opened or
    /// breaks off (a replay that read it ends there), or a live source's failure, which it retries.
    /// Reported whether or not a fix had arrived before it.
    public var sourceError: SourceEvent? { core.state.withLock { $0.sourceError } }

    /// The fixes standard updates did not deliver for their time: no newer than the last location
    /// (`RejectReason.outOfOrder`) or older than the clock allows (stale). A location is never
    /// older than the one before it, as in CoreLocation, and a replay's clock never goes back, so
    /// an input out of time order loses them.
    public var fixesOutOfOrder: Int { core.state.withLock { $0.outOfOrder } }

    /// The fixes with a position at a time of day but no date (an NMEA log without RMC or ZDA),
    /// which no location can be made of (`RejectReason.noDate`).
    public var fixesWithoutDate: Int { core.state.withLock { $0.undated } }
}

/// The calls a tracker gates its ``LocationManager`` with, whatever the manager's source.
protocol LocationManagerGate: AnyObject, Sendable {
    var isUpdatingLocation: Bool { get }
    func startUpdatingLocation()
    func stopUpdatingLocation()
    func setSuspended(_ suspended: Bool)
}

extension LocationManager: LocationManagerGate {}

/// Tracking's error: a tracker could not start or run. What (``code``), where (``path``), and the
/// cause (``underlying``: the region store's `LocationError`, the outbox's `UploadError`, ...).
public struct TrackerError: Error, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The stored regions can't be read (``TrackerError/underlying`` is the `LocationError`).
        public static let regionStore = Code(rawValue: "region-store")
        /// A regions file can't be read or is not GeoJSON regions (``TrackerError/path``).
        public static let regionsFile = Code(rawValue: "regions-file")
        /// The outbox can't be opened or the uploader's settings can't be used (the `UploadError`).
        public static let upload = Code(rawValue: "upload")
        /// Another process sends this outbox (``TrackerError/path`` is the outbox, ``TrackerError/holder``
        /// the other process's id when known): two senders would send its records twice.
        public static let outboxBusy = Code(rawValue: "outbox-busy")
        /// The control socket can't be served (``TrackerError/path``; the `FileError`).
        public static let controlSocket = Code(rawValue: "control-socket")
        /// The fix source reported an error.
        public static let source = Code(rawValue: "source")
        /// A source gave fewer than two usable fixes (a motion profile needs two).
        public static let tooFewFixes = Code(rawValue: "too-few-fixes")
        /// Output could not be written (a closed pipe, a full disk; ``TrackerError/errno`` says why).
        public static let output = Code(rawValue: "output")
        /// Anything else.
        public static let other = Code(rawValue: "other")
    }

    public var code: Code
    /// What failed and where, without the cause (empty when the cause says it all).
    public var message: String
    /// The file or socket, when one is the problem.
    public var path: String?
    /// The error this one comes from, when there is one.
    public var underlying: (any Error)?
    /// The system's error number, for ``Code/output``.
    public var errno: Int32?
    /// The process that sends the outbox, for ``Code/outboxBusy``.
    public var holder: Int32?

    public init(_ code: Code, _ message: String, path: String? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    /// Output could not be written: ``Code/output`` with the system's error number.
    public init(errno: Int32) {
        self.init(.output, "cannot write output: \(errnoText(errno))")
        self.errno = errno
    }

    /// The message, then the cause's own description.
    public var description: String {
        guard let underlying else { return message }
        return message.isEmpty ? "\(underlying)" : "\(message): \(underlying)"
    }
}

/// The runtime behind a ``Tracker``: what its loop, its source gate, its timer and its uploader share.
final class TrackerCore: Sendable {
    struct State {
        var launched = false
        var inputFinished = false
        var failure: (any Error)?
        /// The source's last `error` event (not a disconnection it recovers from).
        var sourceError: SourceEvent?
        /// The last source problem's message, until the source connects again (`nil`: none).
        var sourceLost: String?
        /// Fixes standard updates refused for being no newer than the last location, or stale.
        var outOfOrder = 0
        /// Fixes with a position but no date (a log of times of day only).
        var undated = 0
    }

    let configuration: Tracker.Configuration
    let app: Application
    let outbox: Outbox?
    let uploads: UploadService?
    let sink: any TrackerEventSink
    let releaser: (any WatchReleasing)?
    let effects: LifecycleEffects
    /// The location manager the tracker gates, set once made (after this core, which its source
    /// holds: weak, or the two would keep each other alive).
    private let gated = Mutex(GatedManager())
    let metrics: TrackerMetrics
    let logger: Logger
    let clock: any EpochClock
    let timer = Signal()
    let state = Mutex(State())
    /// When the regions' states were last saved (``Configuration/regionStore``).
    let regionSaving = Mutex(RegionStateSaving(version: 0))
    /// When the outbox's depth was last worth a warning.
    let depthAlarm: Mutex<OutboxDepthAlarm>
    /// The records decided and not yet committed (held while a group commits, so that groups
    /// commit in order).
    let unsaved: Mutex<OutboxGroupCommit>
    /// When a stationary device's latest location is recorded again (``Configuration/heartbeat``).
    let heartbeat: Mutex<HeartbeatState>

    init(
        configuration: Tracker.Configuration, app: Application, outbox: Outbox?, uploads: UploadService?,
        sink: any TrackerEventSink, releaser: (any WatchReleasing)?, notifier: SystemdNotifier?,
        logger: Logger, clock: any EpochClock
    ) {
        self.configuration = configuration
        self.app = app
        self.outbox = outbox
        self.uploads = uploads
        metrics = TrackerMetrics(uploadTargets: uploads?.targets.compactMap(\.target) ?? [])
        self.sink = sink
        self.releaser = releaser
        self.logger = logger
        self.clock = clock
        depthAlarm = Mutex(OutboxDepthAlarm(cap: outbox?.configuration.maxCount ?? 0))
        let upload = configuration.upload
        heartbeat = Mutex(HeartbeatState(interval: configuration.heartbeat))
        unsaved = Mutex(
            OutboxGroupCommit(maxRecords: upload?.commitMaxRecords ?? 1, maxDelay: upload?.commitWithin ?? 0))
        effects = LifecycleEffects(
            app: app, notifier: notifier, releaser: releaser,
            sampleInterval: configuration.sampleInterval)
    }

    /// Now on the tracker's clock, in seconds since 1970.
    func now() -> Double { clock.now.secondsSince1970 }

    var inputFinished: Bool { state.withLock { $0.inputFinished } }

    struct GatedManager {
        weak var manager: (any LocationManagerGate)?
    }

    /// Gates `manager`: the source's gate and the launch call it.
    func gate(_ manager: any LocationManagerGate) { gated.withLock { $0.manager = manager } }

    /// The manager gated, alive while its events are read (which is when the core calls it).
    var manager: any LocationManagerGate {
        guard let manager = gated.withLock({ $0.manager }) else { preconditionFailure("no location manager") }
        return manager
    }

    /// Launches the app (at start, or at the first fix of a replay).
    func launch() {
        state.withLock { $0.launched = true }
        effects.notifier?.notify("READY=1")
        app.launch()
        _ = app.takeEvents()  // launching is not news
        if configuration.startInBackground { app.enterBackground() }
        app.setLocationUpdates(active: configuration.standardUpdates != nil && manager.isUpdatingLocation)
    }

    var launched: Bool { state.withLock { $0.launched } }

    /// The tracker's loop: the location service's events, one at a time, into the outbox, the
    /// lifecycle and the sink.
    func consume<Gate: FixSource>(_ manager: LocationManager<Gate>) async throws {
        logStart()
        if !configuration.launchAtFirstFix { launch() }
        for failure in configuration.regionFailures {
            let error = LocationError(
                .regionMonitoringFailure, failure.description, region: failure.region, underlying: failure)
            try sink.receive(.location(.error(error)))
        }
        try emitLifecycle()
        var events = manager.events.makeAsyncIterator()
        var fix: [LocationEvent] = []
        while let event = await events.next() {
            // A fix's events are recorded together, then delivered.
            fix.append(event)
            if events.fixHasMoreEvents { continue }
            try handle(fix, regions: manager)
            fix.removeAll(keepingCapacity: true)
        }
        saveRegionStates(manager, atEnd: true)
        // The input ended or a stop came: what waits is committed before the uploader's last run.
        try commitRecords()
        let ended = !Task.isCancelled
        state.withLock { $0.inputFinished = ended }
        if let failure = state.withLock({ $0.failure }) { throw failure }
        try emitLifecycle()
        try sink.flush()
    }

    /// The location events of one fix: recorded, then each applied to the lifecycle and reported.
    ///
    /// Durable before delivered: with commits per fix (``Tracker/UploadSettings/commitWithin`` 0,
    /// the default), the fix's records are committed to the outbox in one transaction before any of
    /// its events reaches the sink, so whatever was printed survives a kill -9; a failed commit
    /// fails the tracker before anything is delivered. Grouped commits (`commitWithin` above 0) are
    /// an explicit opt-in that delivers first and commits within that window.
    func handle<Gate: FixSource>(_ events: [LocationEvent], regions: LocationManager<Gate>) throws {
        for event in events {
            metrics.count(event)
            switch event {
            case .significantChange(let l):
                logger.info("significant change", metadata: coordinates(l))
            case .visit(let v, let l):
                logger.info(v.departure == nil ? "visit arrival" : "visit departure", metadata: coordinates(l))
            default:
                break
            }
        }
        if let outbox { try record(events, into: outbox) }
        heartbeatObserve(events)
        for event in events {
            KeepAlive.apply(event, to: app)
            try emitLifecycle()
            try sink.receive(.location(event))
        }
        saveRegionStates(regions, atEnd: false)
    }

    /// Adds a fix's records to the waiting group and commits it when due: at once with commits per
    /// fix, else once the group is full or old enough (the timer's fallback deadline otherwise).
    func record(_ events: [LocationEvent], into outbox: Outbox) throws {
        let t = now()
        let (due, first) = unsaved.withLock { group -> (Bool, Bool) in
            let first = group.isEmpty
            var added = false
            for event in events {
                guard let record = Recorder.record(event, device: outbox.device) else { continue }
                _ = group.add(record, at: t)
                added = true
            }
            return (added && group.isDue(at: t), first && added)
        }
        if due {
            try commitRecords()
        } else if first && configuration.deadlineTimer {
            timer.fire()  // the timer's fallback deadline moved closer
        }
    }

    /// Saves the regions' states when they changed: at most once a second (a burst of transitions
    /// is one write), and once at the end if changes are left; each write is O(regions inside).
    func saveRegionStates<Gate: FixSource>(_ manager: LocationManager<Gate>, atEnd: Bool) {
        guard let store = configuration.regionStore else { return }
        let version = manager.withRegions { $0.insideVersion }
        let t = now()
        let due = regionSaving.withLock {
            atEnd ? $0.shouldSaveAtEnd(version: version) : $0.shouldSave(version: version, at: t)
        }
        guard due else { return }
        let failure = manager.withRegions { regions -> LocationError? in
            do throws(LocationError) {
                try store.saveStates(of: regions)
                return nil
            } catch {
                return error
            }
        }
        if let failure {
            logger.warning("cannot save the regions' states", metadata: ["reason": "\(failure)"])
        }
    }

    /// Commits the records waiting for their group, if any, in one transaction; with `dueAt`, only
    /// when the group is due then.
    func commitRecords(dueAt time: Double? = nil) throws {
        guard let outbox else { return }
        let evicted = try unsaved.withLock { group throws -> Outbox.Eviction? in
            guard !group.isEmpty, time.map({ group.isDue(at: $0) }) ?? true else { return nil }
            // Taken only once committed: a failed commit keeps them (the next record tries again).
            let evicted = try outbox.append(group.records).evicted
            _ = group.take()
            return evicted
        }
        guard let evicted else { return }
        uploads?.notify()
        checkOutboxDepth(outbox)
        if evicted.total > 0 {
            metrics.evicted.increment(by: evicted.total)
            try sink.receive(.outboxEvicted(evicted))
        }
    }

    /// Reports the lifecycle's events since the last call.
    func emitLifecycle() throws {
        for e in app.takeEvents() {
            if case .transition(let t) = e { log(transition: t) }
            var remaining: Double?
            if case .transition(let t) = e, t.to == .background {
                let left = app.lifecycle.backgroundTimeRemaining(at: t.time)
                remaining = left == .greatestFiniteMagnitude ? nil : left
            }
            try sink.receive(.lifecycle(e, backgroundTimeRemaining: remaining))
        }
    }

    /// Live tracking: the lifecycle's deadlines and the suspended sampling between fixes, on the
    /// tracker's clock; woken early when a deadline moves closer.
    func runDeadlines() async {
        while !Task.isCancelled {
            let t = app.now
            var next = app.nextDeadline ?? .infinity
            if let sample = effects.sampleIfDue(at: t) { next = min(next, sample) }
            // Records no new record came to commit (the receiver went quiet).
            if let commit = unsaved.withLock({ $0.fallbackDeadline }) {
                if commit > t {
                    next = min(next, commit)
                } else {
                    do {
                        try commitRecords(dueAt: t)
                        continue
                    } catch {
                        // Kept: the next record's commit tries again, and fails the tracker if it must.
                        logger.warning("cannot commit to the outbox", metadata: ["reason": "\(error)"])
                    }
                }
            }
            let wait = next.isFinite ? min(max(0, next - t), 3600) : nil
            await timer.wait(until: wait.map { clock.now.advanced(by: .seconds($0)) }, on: clock)
            if Task.isCancelled { return }
            app.advance()
        }
    }

    func refreshGauges() {
        let t = now()
        let l = app.lifecycle
        metrics.state(l.state)
        let left = l.backgroundTimeRemaining(at: t)
        metrics.budget.record(left == .greatestFiniteMagnitude ? -1 : left)
        if let outbox, let stats = try? outbox.stats() {
            metrics.outboxDepth.record(stats.pending)
            metrics.outboxOldest.record(stats.oldestAppended.map { max(0, WallClock.seconds() - $0) } ?? 0)
            for (gauge, uploader) in zip(metrics.lastUpload, uploads?.uploaders ?? []) {
                if let last = uploader.stats.lastSuccess { gauge.record(last) }
            }
        }
    }

    func fail(_ error: any Error) {
        state.withLock { if $0.failure == nil { $0.failure = error } }
    }

    /// A location's coordinates as log metadata: the numbers at debug level and below, redacted
    /// above (a trail is personal data).
    func coordinates(_ l: Location) -> Logger.Metadata {
        guard logger.logLevel <= .debug else { return ["lat": "<redacted>", "lon": "<redacted>"] }
        return ["lat": "\(l.coordinate.latitude)", "lon": "\(l.coordinate.longitude)"]
    }
}
