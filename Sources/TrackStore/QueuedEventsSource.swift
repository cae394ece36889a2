import Geo

/// A store that several processes share and that tells each when any of them queued events for
/// delivery (PostgreSQL: a notification at the commit that queued them), so that their delivery
/// workers are woken at once instead of finding another process's events at their next poll.
public protocol QueuedEventsSource: AnyObject, Sendable {
    /// Calls `queued` each time a process (this one included) committed events into the delivery
    /// queue, once when it starts listening and once after each reconnection (what was queued while
    /// nobody listened), until the task is cancelled. A lost connection is opened again after a wait
    /// on `clock`.
    func followQueued(clock: any EpochClock, _ queued: @escaping @Sendable () -> Void) async throws
}
