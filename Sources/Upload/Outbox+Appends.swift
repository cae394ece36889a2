import Geo
import Synchronization

/// A batch that fills while it waits goes at once: an uploader whose batch is not full waits for
/// the records it lacks (``waitForAppends(_:after:until:on:)``), and the commit that appends the
/// last of them wakes it. Appends that leave it short wake nobody (a tracker appends every second).
extension Outbox {
    /// The records appended since the outbox was opened, and the waits for a number of them.
    struct Appends {
        struct Waiter {
            var id: Int
            /// The count at which it wakes.
            var threshold: Int
            var signal: Signal
        }

        var count = 0
        var nextID = 0
        var waiters: [Waiter] = []
    }

    /// How many records were appended through this outbox since it was opened: the mark a filling
    /// batch counts from, read before the batch is read.
    public var appendMark: Int { appends.withLock { $0.count } }

    /// Returns once `count` records were appended after `mark` (an ``appendMark``), at `deadline`
    /// on `clock`, or on cancellation, whichever comes first.
    public func waitForAppends(_ count: Int, after mark: Int, until deadline: EpochInstant, on clock: any EpochClock)
        async
    {
        let signal = Signal()
        let id: Int? = appends.withLock { a in
            guard a.count - mark < count else { return nil }
            defer { a.nextID += 1 }
            a.waiters.append(Appends.Waiter(id: a.nextID, threshold: mark + count, signal: signal))
            return a.nextID
        }
        guard let id else { return }
        await signal.wait(until: deadline, on: clock)
        appends.withLock { $0.waiters.removeAll { $0.id == id } }
    }

    /// Counts `n` committed records and wakes the waits they complete.
    func appended(_ n: Int) {
        let due = appends.withLock { a -> [Signal] in
            a.count += n
            let count = a.count
            guard a.waiters.contains(where: { $0.threshold <= count }) else { return [] }
            defer { a.waiters.removeAll { $0.threshold <= count } }
            return a.waiters.filter { $0.threshold <= count }.map(\.signal)
        }
        for signal in due { signal.fire() }
    }
}
