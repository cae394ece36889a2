import Geo
import Logging
import ServiceLifecycle
import TrackStore

/// Deletes points older than ``retention`` in the background: a sweep at start, then one every
/// ``interval`` of `clock`, each sweep a series of bounded batches (``RetentionStore/deleteExpired(before:limit:)``),
/// each in its own transaction; the cutoff is counted back from the clock's now. The events older
/// than the same cutoff (their time is their cause's) go after the points, in batches too
/// (``EventStore/deleteExpiredEvents(before:limit:)``), except those a hook has still to get: those
/// wait until delivered or dead-lettered.
///
/// A sweep's next one is due `interval` after the sweep began (on `clock`), so a manual clock moved
/// on while a sweep runs is not missed.
public struct RetentionService: Service {
    public let store: any TrackStore
    /// How old a point may get, in seconds.
    public let retention: Double
    public let interval: Duration
    /// Points deleted per transaction.
    public let batch: Int
    let clock: any EpochClock
    let logger: Logger
    /// Called after each sweep with the points it deleted (tests wait for it).
    let onSweep: @Sendable (Int) async -> Void

    public init(
        store: any TrackStore, retention: Double, interval: Duration = .seconds(600), batch: Int = 1000,
        clock: any EpochClock, logger: Logger,
        onSweep: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        precondition(retention > 0 && batch > 0, "retention and its batches are positive")
        self.store = store
        self.retention = retention
        self.interval = interval
        self.batch = batch
        self.clock = clock
        self.logger = logger
        self.onSweep = onSweep
    }

    /// Deletes everything older than the retention, a batch at a time; returns how many points went.
    public func sweep() async throws -> Int {
        try await sweepAll().points
    }

    /// Deletes every point, then every event, older than the retention, a batch at a time; returns
    /// how many of each went.
    public func sweepAll() async throws -> (points: Int, events: Int) {
        let cutoff = clock.now.secondsSince1970 - retention
        var points = 0
        while !Task.isCancelled {
            let deleted = try await store.deleteExpired(before: cutoff, limit: batch)
            if deleted == 0 { break }
            points += deleted
            // Writers waiting for the store (ingest) go first.
            await Task.yield()
        }
        var events = 0
        while !Task.isCancelled {
            let deleted = try await store.deleteExpiredEvents(before: cutoff, limit: batch)
            if deleted == 0 { break }
            events += deleted
            await Task.yield()
        }
        return (points, events)
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let started = clock.now
                do {
                    let deleted = try await sweepAll()
                    if deleted.points > 0 || deleted.events > 0 {
                        logger.info(
                            "retention: old points and events deleted",
                            metadata: [
                                "serve.deleted": "\(deleted.points)", "serve.events.deleted": "\(deleted.events)",
                            ])
                    }
                    await onSweep(deleted.points)
                } catch {
                    logger.error("retention: the sweep failed", metadata: ["serve.error": "\(error)"])
                }
                try? await clock.sleep(until: started.advanced(by: interval), tolerance: nil)
            }
        }
    }
}
