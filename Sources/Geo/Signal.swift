import Synchronization

/// A wake-up tasks wait for with a timeout, fired from anywhere (new records, a lifecycle change).
/// A fire wakes every task waiting then; a fire with nobody waiting is kept for the next wait.
///
/// Several tasks may wait at once (a connection's loss watcher and a publisher waiting for its
/// acknowledgements share one): each waiter is kept under its own number, so a fire, a deadline or
/// a cancellation resumes exactly the waiters it concerns and never drops another's continuation.
public final class Signal: Sendable {
    private struct State {
        var pending = false
        var next = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public func fire() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.waiters.isEmpty {
                s.pending = true
                return []
            }
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns when fired (now or earlier, unconsumed), or on cancellation.
    public func wait() async {
        await wait(until: nil, on: WallClock())
    }

    /// Returns when fired (now or earlier, unconsumed), at `deadline` on `clock`, or on
    /// cancellation.
    public func wait<C: Clock>(until deadline: C.Instant?, on clock: C) async {
        if state.withLock({ s in
            defer { s.pending = false }
            return s.pending
        }) {
            return
        }
        let id = state.withLock { s -> Int in
            defer { s.next &+= 1 }
            return s.next
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitFired(id) }
            if let deadline {
                group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            }
            await group.next()
            group.cancelAll()
            release(id)
        }
    }

    private func waitFired(_ id: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    // Cancelled before the continuation was stored: onCancel found nothing to resume.
                    if Task.isCancelled { return true }
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            release(id)
        }
    }

    /// How many tasks wait now (for tests).
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Resumes waiter `id` if it still waits (its deadline came, or it was cancelled).
    private func release(_ id: Int) {
        state.withLock { s in s.waiters.removeValue(forKey: id) }?.resume()
    }
}
