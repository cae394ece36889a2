import Formats
import Geo
import Lifecycle
import Logging
import ServiceLifecycle
import Synchronization
import SystemIO
import Upload

/// The uploader as a service: sends the outbox while the tracker runs; at the end of its input (a
/// replay's log), everything, however long the endpoints take, before the tracker lets the group
/// stop; on a graceful shutdown (a signal, also during that last upload), what is left for at most
/// ``Tracker/UploadSettings/shutdownTimeout``, and keeps the rest for the next run.
///
/// Without a tracker (``sending(_:logger:clock:)``), ``send()`` sends what waits in an outbox to
/// every target once, with the same uploaders, and says what each target got.
public final class UploadService: Service, Sendable {
    public let outbox: Outbox
    let settings: Tracker.UploadSettings
    let application: Application?
    let logger: Logger
    /// What uploads wait on: batches filling, backoffs, the shutdown timeout.
    let clock: any EpochClock
    let current = Mutex<[Uploader]>([])
    let trackerCore = Mutex<TrackerCore?>(nil)
    /// The targets' configurations, each with its name (`Uploader.Configuration.target`).
    let targets: [Uploader.Configuration]
    /// Registered targets this run does not upload to that still lack records, found at start.
    public let orphans: [Outbox.TargetStatus]
    /// Held while this service lives: one sender per outbox (``sendingLockPath(outbox:)``).
    let sendingLock: FileLock
    /// Fired by the tracker at its input's end (``inputEnded()``).
    let inputEnd = Signal()
    /// Fired when the upload after the input's end is over (sent, or given up for now).
    let uploadedAtEnd = Signal()
    /// Whether ``run()`` has started.
    let running = Atomic<Bool>(false)
    /// Whether the tracker waits in ``inputEnded()`` for the upload at its input's end: a graceful
    /// shutdown then is a signal's (bounded), not the input's end itself.
    let trackerWaits = Atomic<Bool>(false)

    init(
        outbox: Outbox, settings: Tracker.UploadSettings, application: Application?, logger: Logger,
        clock: any EpochClock
    ) throws {
        sendingLock = try Self.lockSending(outbox.path)
        self.outbox = outbox
        self.settings = settings
        self.application = application
        self.logger = logger
        self.clock = clock
        var targets = settings.targets
        for i in targets.indices {
            targets[i].target = targets[i].target ?? Uploader.targetName(targets[i].url)
            targets[i].labelMetrics = targets.count > 1
        }
        self.targets = targets
        orphans = try outbox.useTargets(targets.map { Outbox.Target(name: $0.target!, url: Uploader.redacted($0.url)) })
            .orphans
        // URLs known now are checked now (a bad one is a setting to fix, not a failure later).
        if settings.endpoint == nil {
            let uploaders = try targets.map {
                try Uploader(outbox: outbox, configuration: $0, application: application, logger: logger, clock: clock)
            }
            current.withLock { $0 = uploaders }
        }
    }

    /// An upload service over the outbox at ``Tracker/UploadSettings/outboxPath`` alone, with no
    /// tracker and no lifecycle, to ``send()`` what waits in it (`keeptrack outbox send`).
    ///
    /// - Parameters:
    ///   - settings: the outbox and its targets, as a run would upload to them.
    ///   - logger: where the uploaders log.
    ///   - clock: what retries back off on. The default is the wall clock.
    /// - Throws: ``TrackerError`` (``TrackerError/Code/upload``, the `UploadError` underlying)
    ///   when the outbox can't be opened or a target's settings can't be used.
    public static func sending(
        _ settings: Tracker.UploadSettings, logger: Logger, clock: any EpochClock = WallClock()
    ) throws -> UploadService {
        do {
            let outbox = try Outbox(path: settings.outboxPath, configuration: settings.outbox)
            return try UploadService(outbox: outbox, settings: settings, application: nil, logger: logger, clock: clock)
        } catch let error as TrackerError {
            throw error
        } catch {
            throw TrackerError(.upload, "", underlying: error)
        }
    }

    /// The lock file beside the outbox at `path` that its one sender holds.
    public static func sendingLockPath(outbox path: String) -> String { path + "-sending.lock" }

    /// One sender per outbox: a tracker and `keeptrack outbox send`, or two trackers, on the same
    /// outbox would each send its records (twice to a server that does not deduplicate). Held until
    /// the service goes, or its process ends however it ends.
    /// - Throws: ``TrackerError`` ``TrackerError/Code/outboxBusy`` when another process holds it,
    ///   ``TrackerError/Code/upload`` (the `FileError`) when the lock file can't be opened.
    static func lockSending(_ outbox: String) throws(TrackerError) -> FileLock {
        let path = sendingLockPath(outbox: outbox)
        let outcome: FileLock.Outcome
        do {
            outcome = try FileLock.tryExclusive(path)
        } catch {
            throw TrackerError(.upload, "", path: path, underlying: error)
        }
        switch outcome {
        case .acquired(let lock): return lock
        case .held(let pid):
            var error = TrackerError(
                .outboxBusy, "another process sends the outbox \(outbox)" + (pid.map { " (pid \($0))" } ?? ""),
                path: outbox)
            error.holder = pid
            throw error
        }
    }

    /// Sends what waits in the outbox to every target now, each a lane of its own as in a run (the
    /// same `Uploader`s: batches, retries with backoff, dead letters, idempotent ids), until each
    /// target has every record, or gave up after `Uploader.Configuration.drainAttempts` failures
    /// in a row, or met a settings problem; then closes its connections.
    ///
    /// - Returns: each target's report, in the order of the settings: a target with records
    ///   ``TargetReport/pending`` still refuses them (its `Uploader.Stats.lastError` says why).
    /// - Throws: what an embedded endpoint's address (``Tracker/UploadSettings/endpoint``) throws.
    public func send() async throws -> [TargetReport] {
        let lanes = try await startedUploaders()
        await withTaskGroup(of: Void.self) { group in
            for uploader in lanes { group.addTask { await uploader.run(drain: true) } }
        }
        for uploader in lanes { await uploader.shutdown() }
        return targetReports
    }

    var tracker: TrackerCore? {
        get { trackerCore.withLock { $0 } }
        set { trackerCore.withLock { $0 = newValue } }
    }

    /// The first target's uploader, once it exists (at once, or when an embedded endpoint gave its
    /// address).
    public var uploader: Uploader? { current.withLock { $0.first } }

    /// Every target's uploader, in the order of the settings, once they exist.
    public var uploaders: [Uploader] { current.withLock { $0 } }

    /// What the first target's uploader did so far.
    public var stats: Uploader.Stats? { uploader?.stats }

    /// What one target's lane did: its name, host, counters, and the records it still lacks. The
    /// caller words it (`keeptrack` says `upload: 900 records acknowledged by HOST in 2 requests, 0
    /// retries; 0 left in the outbox`, and why records are left).
    public struct TargetReport: Sendable, Hashable {
        /// The name its acknowledgements are filed under (`Uploader.Configuration.target`).
        public var name: String
        /// The endpoint's host (and port), without credentials, path or query.
        public var host: String
        public var stats: Uploader.Stats
        /// Records in the outbox it has not acknowledged (with a single target, every record the
        /// outbox holds); -1 when the outbox could not be read.
        public var pending: Int

        public init(name: String, host: String, stats: Uploader.Stats, pending: Int) {
            (self.name, self.host, self.stats, self.pending) = (name, host, stats, pending)
        }
    }

    /// Each target's ``TargetReport``, in the order of the settings.
    public var targetReports: [TargetReport] {
        let uploaders = self.uploaders
        let several = targets.count > 1
        // With one target, what it lacks is what the outbox holds.
        let statuses = several ? (try? outbox.targetStatuses()) ?? [] : []
        let held = several ? -1 : (try? outbox.stats())?.pending ?? -1
        return targets.enumerated().map { i, target in
            let name = target.target ?? ""
            let uploader = i < uploaders.count ? uploaders[i] : nil
            return TargetReport(
                name: name, host: Uploader.hostOf(uploader?.configuration.url ?? target.url),
                stats: uploader?.stats ?? Uploader.Stats(),
                pending: several ? statuses.first { $0.target.name == name }?.pending ?? -1 : held)
        }
    }

    /// The device id the endpoint files this outbox's records under (OwnTracks: `user/device`).
    public var deviceOnServer: String { deviceOnServer(target: 0) }

    /// The device id the `index`-th target files this outbox's records under.
    public func deviceOnServer(target index: Int) -> String {
        let c = targets[index]
        return c.format.deviceOnServer(c.deviceID ?? outbox.device, settings: c.formatSettings)
    }

    /// New records: look now.
    public func notify() {
        for uploader in uploaders { uploader.notify() }
    }

    /// The targets' uploaders, made now if an embedded endpoint had to give its address first.
    func startedUploaders() async throws -> [Uploader] {
        let uploaders = self.uploaders
        guard uploaders.isEmpty else { return uploaders }
        // An embedded endpoint's address replaces the URL `embedded` (or the first target's).
        let url = try await settings.endpoint?()
        let embedded = targets.firstIndex { $0.url == "embedded" } ?? 0
        let made = try targets.enumerated().map { i, target in
            var c = target
            if let url, i == embedded { c.url = url }
            return try Uploader(
                outbox: outbox, configuration: c, application: application, logger: logger,
                clock: clock)
        }
        current.withLock { $0 = made }
        return made
    }

    /// Says the tracker's input has ended (a log's end): returns once what the outbox holds has been
    /// sent (or given up for now: it stays for the next run), or when the caller is cancelled (a
    /// graceful shutdown, which bounds the rest by the shutdown timeout).
    public func inputEnded() async {
        inputEnd.fire()
        // Not run (a tracker run alone, its outbox read afterwards), or not yet: nothing to wait for
        // (run() finds the input ended and sends everything then).
        guard running.load(ordering: .sequentiallyConsistent) else { return }
        trackerWaits.store(true, ordering: .sequentiallyConsistent)
        await uploadedAtEnd.wait()
    }

    public func run() async throws {
        let uploaders = try await startedUploaders()
        // Each target is a lane of its own: one that is down or refusing holds no other back.
        let lanes = uploaders
        @Sendable func all(drain: Bool) async {
            await withTaskGroup(of: Void.self) { group in
                for uploader in lanes { group.addTask { await uploader.run(drain: drain) } }
            }
        }
        running.store(true, ordering: .sequentiallyConsistent)
        // Until the group stops or the input ends: then everything, unless the group stops meanwhile.
        let end = await cancelWhenGracefulShutdown { [inputEnd] () async -> End in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await all(drain: false) }
                group.addTask { await inputEnd.wait() }
                await group.next()
                group.cancelAll()
            }
            guard !Task.isCancelled else { return .stopped }
            await all(drain: true)
            return Task.isCancelled ? .stoppedAtTheEnd : .uploaded
        }
        uploadedAtEnd.fire()
        switch end {
        case .uploaded:
            // The tracker returns now and stops the group (this service's early return is ignored).
            break
        case .stopped where tracker?.inputFinished ?? false && !trackerWaits.load(ordering: .sequentiallyConsistent):
            // The input ended before this service ran (a short log), and the group stops for that:
            // everything, as at an end.
            await all(drain: true)
        case .stopped, .stoppedAtTheEnd:
            // A stop: what is left, for the shutdown timeout at most (its request in flight cancelled then).
            let within = settings.shutdownTimeout
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await all(drain: true) }
                let deadline = clock.now.advanced(by: .seconds(within))
                group.addTask { [clock] in try? await clock.sleep(until: deadline, tolerance: nil) }
                await group.next()
                group.cancelAll()
            }
        }
        for uploader in uploaders { await uploader.shutdown() }
    }

    /// How the upload ended: everything sent at the input's end, or stopped by a graceful shutdown
    /// (during the input, or during that last upload).
    enum End: Sendable {
        case uploaded, stopped, stoppedAtTheEnd
    }
}
