import Geo
import Logging
import ServiceLifecycle
import TrackStore

/// Deletes points older than ``retention`` in the background: a sweep at start, then one every
/// ``interval`` of `clock`, each sweep a series of bounded batches (``RetentionStore/deleteExpired(before:limit:)``),
/// each in its own transaction; the cutoff is counted back from the clock's now.
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
        let cutoff = clock.now.secondsSince1970 - retention
        var total = 0
        while !Task.isCancelled {
            let deleted = try await store.deleteExpired(before: cutoff, limit: batch)
            if deleted == 0 { break }
            total += deleted
            // Writers waiting for the store (ingest) go first.
            await Task.yield()
        }
        return total
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let started = clock.now
                do {
                    let deleted = try await sweep()
                    if deleted > 0 {
                        logger.info("retention: old points deleted", metadata: ["serve.deleted": "\(deleted)"])
                    }
                    await onSweep(deleted)
                } catch {
                    logger.error("retention: the sweep failed", metadata: ["serve.error": "\(error)"])
                }
                try? await clock.sleep(until: started.advanced(by: interval), tolerance: nil)
            }
        }
    }
}
