import Formats
import Geo
import Synchronization

/// Where a store tells what it stored: each committed batch's new records (duplicates left out), in
/// the order the batches were committed, to every subscriber. The live stream (`GET /v1/stream`)
/// subscribes; so can any other live view of the store (the OwnTracks Recorder's `/ws/last`).
///
/// Handlers run on the thread that committed (a store's writer): they must return quickly and
/// never wait.
///
/// A subscriber that needs the records only at times (the live stream, while a client is connected)
/// says so (``subscribe(needsRecords:devices:records:)``): while no subscriber needs them, a store
/// that reads its records back to publish them (PostgreSQL, from what every instance stored) may
/// read and publish only the devices that sent (``publish(devices:)``), which costs it and the
/// database a fraction of the records' reading.
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

    struct Handler {
        let records: @Sendable ([TrailRecord]) -> Void
        /// Whether the subscriber needs the records now (`nil`: always).
        let needsRecords: (@Sendable () -> Bool)?
        /// What it is told instead while it does not (`nil`: it always needs them).
        let devices: (@Sendable ([String]) -> Void)?
    }

    struct State {
        var next = 0
        var handlers: [Int: Handler] = [:]
        var reports: [Int: @Sendable (FollowReport) -> Void] = [:]
    }

    let state = Mutex(State())

    public init() {}

    /// Calls `handler` with every batch published from now on.
    public func subscribe(_ handler: @escaping @Sendable ([TrailRecord]) -> Void) -> Subscription {
        add(Handler(records: handler, needsRecords: nil, devices: nil))
    }

    /// Calls `records` with every batch published from now on while `needsRecords` says so, and
    /// `devices` with the devices of a batch (each once, in storage order) published without its
    /// records while no subscriber needs them. `needsRecords` is asked before a batch is read: one
    /// that turns true meanwhile may be told that batch's devices only (the batch was committed before).
    /// It is called often (before each batch) and under no lock of the feed's: it returns at once.
    public func subscribe(
        needsRecords: @escaping @Sendable () -> Bool, devices: @escaping @Sendable ([String]) -> Void,
        records: @escaping @Sendable ([TrailRecord]) -> Void
    ) -> Subscription {
        add(Handler(records: records, needsRecords: needsRecords, devices: devices))
    }

    private func add(_ handler: Handler) -> Subscription {
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

    /// Whether a subscriber needs the records now; when none does, a store may publish only the
    /// devices (``publish(devices:)``).
    public var needsRecords: Bool {
        let handlers = state.withLock { Array($0.handlers.values) }
        return handlers.contains { $0.needsRecords?() ?? true }
    }

    /// Hands `records` (one committed batch, in storage order) to every subscriber.
    public func publish(_ records: [TrailRecord]) {
        guard !records.isEmpty else { return }
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler.records(records) }
    }

    /// Hands the devices of one committed batch (each once, in storage order), published without
    /// its records while no subscriber needs them (``needsRecords``), to every subscriber that
    /// takes devices; one that needs the records always (``subscribe(_:)``) is not called.
    public func publish(devices: [String]) {
        guard !devices.isEmpty else { return }
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler.devices?(devices) }
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
