import Formats
import Geo
import Synchronization

/// Where a store tells what it stored: each committed batch's new records (duplicates left out), in
/// the order the batches were committed, to every subscriber. The live stream (`GET /v1/stream`)
/// subscribes; so can any other live view of the store (the OwnTracks Recorder's `/ws/last`).
///
/// Handlers run on the thread that committed (a store's writer): they must return quickly and
/// never wait.
public final class RecordFeed: Sendable {
    /// A subscription, to cancel with ``unsubscribe(_:)``.
    public struct Subscription: Hashable, Sendable {
        let id: Int
    }

    /// How following the store goes (a store that follows other processes reports it; counted in
    /// the stream's metrics).
    public enum FollowReport: Hashable, Sendable {
        /// The connection that follows the store failed; it is opened again after a wait.
        case failed
        /// Following again after a failure, having published the `records` stored meanwhile.
        case caughtUp(records: Int)
    }

    struct State {
        var next = 0
        var handlers: [Int: @Sendable ([TrailRecord]) -> Void] = [:]
        var reports: [Int: @Sendable (FollowReport) -> Void] = [:]
    }

    let state = Mutex(State())

    public init() {}

    /// Calls `handler` with every batch published from now on.
    public func subscribe(_ handler: @escaping @Sendable ([TrailRecord]) -> Void) -> Subscription {
        state.withLock { s in
            s.next += 1
            s.handlers[s.next] = handler
            return Subscription(id: s.next)
        }
    }

    /// Calls `handler` with every ``FollowReport`` from now on.
    public func observe(_ handler: @escaping @Sendable (FollowReport) -> Void) -> Subscription {
        state.withLock { s in
            s.next += 1
            s.reports[s.next] = handler
            return Subscription(id: s.next)
        }
    }

    public func unsubscribe(_ subscription: Subscription) {
        state.withLock { s in
            s.handlers.removeValue(forKey: subscription.id)
            s.reports.removeValue(forKey: subscription.id)
        }
    }

    /// Hands `report` to every observer.
    public func report(_ report: FollowReport) {
        let handlers = state.withLock { Array($0.reports.values) }
        for handler in handlers { handler(report) }
    }

    /// Whether anyone listens (a store skips collecting records when nobody does).
    public var hasSubscribers: Bool { state.withLock { !$0.handlers.isEmpty } }

    /// Hands `records` (one committed batch, in storage order) to every subscriber.
    public func publish(_ records: [TrailRecord]) {
        guard !records.isEmpty else { return }
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(records) }
    }
}

/// A store that publishes what it stores on a ``RecordFeed``, in commit order: SQLite from its writer
/// (one process), PostgreSQL from `LISTEN`/`NOTIFY` (what every instance sharing the database stored).
public protocol StoredRecordsSource: AnyObject {
    /// The feed of stored records.
    var storedRecords: RecordFeed { get }

    /// Follows what other processes store, publishing it on ``storedRecords``, until the task is
    /// cancelled, waiting on `clock` before it reconnects after a failure. A store only one process
    /// writes returns at once.
    func followStored(clock: any EpochClock) async throws
}
