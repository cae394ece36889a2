import Synchronization

/// A clock that moves only when told to: driven by a test, or by the fix times of a replayed log.
///
/// Everything time-dependent takes an ``EpochClock``; live tracking passes ``WallClock``, tests and
/// replays pass a `ManualClock`, so a day-long log replayed in seconds expires timers exactly as
/// living through it would. Instants are durations since 1970-01-01T00:00:00Z.
public final class ManualClock: EpochClock {
    public typealias Instant = EpochInstant

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    /// A task waiting for `count` sleepers.
    private struct Watcher {
        var id: UInt64
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Instant
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var watchers: [Watcher] = []
    }

    private let state: Mutex<State>

    public init(now: Instant = Instant(offset: .zero)) {
        state = Mutex(State(now: now))
    }

    public var now: Instant { state.withLock { $0.now } }

    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Moves the clock to `instant` (never backwards) and wakes every sleeper whose deadline passed.
    public func advance(to instant: Instant) {
        let due: [Sleeper] = state.withLock { s in
            guard instant > s.now else { return [] }
            s.now = instant
            let due = s.sleepers.filter { $0.deadline <= instant }
            s.sleepers.removeAll { $0.deadline <= instant }
            return due
        }
        for sleeper in due.sorted(by: { $0.deadline < $1.deadline }) { sleeper.continuation.resume() }
    }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// The number of tasks sleeping on this clock (for tests that wait for a sleeper to arrive).
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a task sleeps until, or `nil` when none sleeps.
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    /// Returns once at least `count` tasks sleep on this clock (at once if they do already), or on
    /// cancellation: how a test knows that the code under test waits, without polling.
    public func sleepers(atLeast count: Int = 1) async {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { s -> Bool in
                    if s.sleepers.count >= count || Task.isCancelled { return true }
                    s.watchers.append(Watcher(id: id, count: count, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let cancelled: Watcher? = state.withLock { s in
                guard let i = s.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.watchers.remove(at: i)
            }
            cancelled?.continuation.resume()
        }
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Cancelled before this point, the handler below found no sleeper to resume: the
                // check under the lock keeps such a sleeper from waiting forever.
                let (outcome, watchers): (Bool?, [Watcher]) = state.withLock { s in
                    if Task.isCancelled { return (false, []) }
                    if deadline <= s.now { return (true, []) }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    let count = s.sleepers.count
                    defer { s.watchers.removeAll { $0.count <= count } }
                    return (nil, s.watchers.filter { $0.count <= count })
                }
                for watcher in watchers { watcher.continuation.resume() }
                switch outcome {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let cancelled: Sleeper? = state.withLock { s in
                guard let i = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: i)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }
}
