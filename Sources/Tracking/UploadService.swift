import Formats
import Geo
import Lifecycle
import Logging
import ServiceLifecycle
import Synchronization
import Upload

/// The uploader as a service: sends the outbox while the tracker runs; on a graceful shutdown,
/// once the tracker has stopped, uploads what is left — everything at the end of a replay, for at
/// most ``Tracker/UploadSettings/shutdownTimeout`` on a stop — and keeps the rest for the next run.
public final class UploadService: Service, Sendable {
    public let outbox: Outbox
    let settings: Tracker.UploadSettings
    let application: Application?
    let logger: Logger
    /// What uploads wait on: batches filling, backoffs, the shutdown timeout.
    let clock: any EpochClock
    let current = Mutex<Uploader?>(nil)
    let trackerCore = Mutex<TrackerCore?>(nil)

    init(outbox: Outbox, settings: Tracker.UploadSettings, application: Application?, logger: Logger,
         clock: any EpochClock) throws {
        self.outbox = outbox
        self.settings = settings
        self.application = application
        self.logger = logger
        self.clock = clock
        // A URL known now is checked now (a bad one is a setting to fix, not a failure later).
        if settings.endpoint == nil {
            let uploader = try Uploader(outbox: outbox, configuration: settings.uploader, application: application,
                                        logger: logger, clock: clock)
            current.withLock { $0 = uploader }
        }
    }

    var tracker: TrackerCore? {
        get { trackerCore.withLock { $0 } }
        set { trackerCore.withLock { $0 = newValue } }
    }

    /// The uploader, once it exists (at once, or when an embedded endpoint gave its address).
    public var uploader: Uploader? { current.withLock { $0 } }

    /// What the uploader did so far.
    public var stats: Uploader.Stats? { uploader?.stats }

    /// What the upload did, one line without coordinates: `upload: 900 records acknowledged by
    /// HOST:PORT in 2 requests, 0 retries; 0 left in the outbox`, and why records are left.
    public var summary: String {
        let stats = self.stats ?? Uploader.Stats()
        let pending = (try? outbox.stats())?.pending ?? -1
        let url = uploader?.configuration.url ?? settings.uploader.url
        var line = "upload: \(grouped(stats.uploaded)) records acknowledged by \(Uploader.hostOf(url)) in "
            + "\(grouped(stats.requests)) requests, \(grouped(stats.retries)) retries"
        if stats.deadLettered > 0 { line += ", \(grouped(stats.deadLettered)) rejected (dead letters)" }
        line += "; \(grouped(pending)) left in the outbox"
        if pending > 0 { line += " (\(stats.lastError ?? "not sent")); they go with the next run" }
        return line
    }

    /// The device id the endpoint files this outbox's records under (OwnTracks: `user/device`).
    public var deviceOnServer: String {
        settings.uploader.format.deviceOnServer(outbox.device, settings: settings.uploader.formatSettings)
    }

    /// New records: look now.
    public func notify() { uploader?.notify() }

    public func run() async throws {
        let uploader: Uploader
        if let existing = self.uploader {
            uploader = existing
        } else {
            var c = settings.uploader
            if let endpoint = settings.endpoint { c.url = try await endpoint() }
            uploader = try Uploader(outbox: outbox, configuration: c, application: application, logger: logger,
                                    clock: clock)
            current.withLock { $0 = uploader }
        }
        // Until the group stops (the tracker, stopped before, appends nothing more).
        await cancelWhenGracefulShutdown { await uploader.run() }
        if tracker?.inputFinished ?? false {
            await uploader.run(drain: true)
        } else {
            let within = settings.shutdownTimeout
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await uploader.run(drain: true) }
                let deadline = clock.now.advanced(by: .seconds(within))
                group.addTask { [clock] in try? await clock.sleep(until: deadline, tolerance: nil) }
                await group.next()
                group.cancelAll()
            }
        }
        await uploader.shutdown()
    }
}
