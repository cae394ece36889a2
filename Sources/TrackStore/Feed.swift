import Synchronization

/// Where a store tells what it just committed, batch by batch, to every subscriber: the stops and
/// trips it found (``StopEventFeed``), the events it stored (``DeviceEventFeed``), the outlier marks
/// its detectors changed (``OutlierMarkFeed``). This process's commits only: each instance sharing
/// a PostgreSQL database tells its own.
///
/// Handlers run on the thread that committed: they must return quickly and never wait.
public final class Feed<Item: Sendable>: Sendable {
    /// A subscription, to cancel with ``unsubscribe(_:)``.
    public struct Subscription: Hashable, Sendable {
        let id: Int
    }

    let state = Mutex((next: 0, handlers: [Int: @Sendable ([Item]) -> Void]()))

    public init() {}

    /// Whether anyone listens (work that only feeds subscribers can be skipped when not).
    public var hasSubscribers: Bool { state.withLock { !$0.handlers.isEmpty } }

    /// Calls `handler` with the items of every batch from now on.
    public func subscribe(_ handler: @escaping @Sendable ([Item]) -> Void) -> Subscription {
        state.withLock { s in
            s.next += 1
            s.handlers[s.next] = handler
            return Subscription(id: s.next)
        }
    }

    public func unsubscribe(_ subscription: Subscription) {
        _ = state.withLock { $0.handlers.removeValue(forKey: subscription.id) }
    }

    /// Hands `items` (one batch, in order) to every subscriber; nothing when empty.
    public func publish(_ items: [Item]) {
        guard !items.isEmpty else { return }
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(items) }
    }
}
