import Geo
import Logging
import PostgresNIO
import TrackStore

/// The delivery queue's wake-up across instances: the catch-up transaction that queued events
/// notifies `keeptrack_queued` (one notification per commit, whatever the number of events; sent
/// by PostgreSQL once the transaction commits), and every instance listens on a connection of its
/// own and wakes its delivery worker. The worker still polls (``DeliveryWorker``'s poll interval),
/// for a notification lost with a connection.
extension PostgresTrackStore: QueuedEventsSource {
    /// The channel.
    static let queuedChannel = "keeptrack_queued"

    /// The `application_name` of this instance's queue listener (not counted as an instance).
    public var queueListenerName: String {
        "keeptrack-queue-listener " + name.dropFirst(Self.applicationPrefix.count)
    }

    /// Notifies `keeptrack_queued` from transaction `c`: delivered once it commits.
    static func notifyQueued(_ c: PostgresConnection, logger: Logger) async throws {
        try await c.query("SELECT pg_notify(\(queuedChannel), '')", logger: logger)
    }

    public func followQueued(clock: any EpochClock, _ queued: @escaping @Sendable () -> Void) async throws {
        var failures = 0
        var random = SystemRandomNumberGenerator()
        while true {
            do {
                var configuration = try Self.connectionConfiguration(url)
                configuration.options.additionalStartupParameters = [("application_name", queueListenerName)]
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 2, logger: logger)
                do {
                    try await connection.listen(on: Self.queuedChannel) { notifications in
                        // Listening: what was queued before is the worker's to find now.
                        failures = 0
                        queued()
                        for try await _ in notifications { queued() }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                if Task.isCancelled || error is CancellationError { throw CancellationError() }
                logger.warning(
                    "the delivery queue's listening connection to PostgreSQL failed: reconnecting",
                    metadata: ["error.type": "\(type(of: error))"])
            }
            try Task.checkCancellation()
            failures += 1
            let wait = Self.listenBackoff.delay(failures: failures, using: &random)
            try await clock.sleep(until: clock.now.advanced(by: .milliseconds(Int64(wait * 1000))), tolerance: nil)
        }
    }
}
