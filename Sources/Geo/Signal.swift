import Synchronization

/// A wake-up one task waits for with a timeout, fired from anywhere (new records, a lifecycle
/// change). A fire with nobody waiting is kept for the next wait.
public final class Signal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    public init() {}

    public func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns when fired (now or earlier, unconsumed), or on cancellation.
    public func wait() async {
        await wait(until: nil, on: ContinuousClock())
    }

    /// Returns when fired (now or earlier, unconsumed), at `deadline` on `clock`, or on
    /// cancellation.
    public func wait<C: Clock>(until deadline: C.Instant?, on clock: C) async {
        if state.withLock({ s in
            defer { s.pending = false }
            return s.pending
        }) { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitFired() }
            if let deadline {
                group.addTask { try? await clock.sleep(until: deadline, tolerance: nil) }
            }
            await group.next()
            group.cancelAll()
            releaseWaiter()
        }
    }

    private func waitFired() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    // Cancelled before the continuation was stored: onCancel found nothing to resume.
                    if Task.isCancelled { return true }
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            releaseWaiter()
        }
    }

    private func releaseWaiter() {
        state.withLock { s -> CheckedContinuation<Void, Never>? in
            defer { s.waiter = nil }
            return s.waiter
        }?.resume()
    }
}
