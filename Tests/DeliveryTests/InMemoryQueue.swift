import Delivery
import EndpointEvents
import Foundation
import Geo
import Synchronization

/// A delivery queue in memory: the test double of the stores' queue (the SQLite and PostgreSQL
/// tables come with the store's split), with the protocol's rules: one entry per event and hook
/// that wants it, the head of each device's entries only, leases, retries at their time, dead
/// letters that do not hold a device back, settlement by the lease's holder only.
final class InMemoryQueue: DeliveryQueue, Sendable {
    enum Phase: Hashable, Sendable {
        case pending, delivered, dead(String)
    }

    struct Entry: Sendable {
        var hook: String
        var event: QueuedEvent
        var sequence: Int
        var queued: Double
        var due: Double
        var attempts = 0
        var lease: String?
        var leaseUntil = -Double.infinity
        var phase = Phase.pending
        var reason: String?
    }

    struct State {
        var hooks: [Hook] = []
        var entries: [Entry] = []
        var leases = 0
        var claims = 0
    }

    let state = Mutex(State())
    /// Fired on every settlement.
    let changed = Signal()

    init(hooks: [Hook]) {
        state.withLock { $0.hooks = hooks }
    }

    /// Queues `events` for every hook that wants them, as a store does in the batch's transaction.
    func enqueue(_ events: [DeviceEvent], now: Double) {
        state.withLock { s in
            for e in events {
                for h in s.hooks where h.wants(e) {
                    s.entries.append(
                        Entry(hook: h.name, event: QueuedEvent(e), sequence: s.entries.count, queued: now, due: now))
                }
            }
        }
    }

    func hooks() async throws -> [Hook] { state.withLock { $0.hooks } }

    /// The head (oldest pending) entry of each device, for `hook`.
    static func heads(_ s: State, hook: String) -> [Int] {
        var head: [String: Int] = [:]
        for (i, e) in s.entries.enumerated() where e.hook == hook && e.phase == .pending {
            if head[e.event.device] == nil { head[e.event.device] = i }
        }
        return Array(head.values)
    }

    func claim(hook: String, limit: Int, now: Double, leaseUntil: Double) async throws -> [ClaimedDelivery] {
        state.withLock { s in
            s.claims += 1
            let due = Self.heads(s, hook: hook)
                .filter { s.entries[$0].due <= now && s.entries[$0].leaseUntil <= now }
                .sorted { (s.entries[$0].due, s.entries[$0].sequence) < (s.entries[$1].due, s.entries[$1].sequence) }
                .prefix(limit)
            return due.map { i in
                s.leases += 1
                s.entries[i].lease = "lease-\(s.leases)"
                s.entries[i].leaseUntil = leaseUntil
                let e = s.entries[i]
                return ClaimedDelivery(
                    hook: hook, event: e.event, attempts: e.attempts, queued: e.queued, lease: e.lease!)
            }
        }
    }

    func settle(_ claim: ClaimedDelivery, outcome: DeliveryOutcome, now: Double) async throws -> Bool {
        defer { changed.fire() }
        return state.withLock { s in
            guard
                let i = s.entries.firstIndex(where: {
                    $0.hook == claim.hook && $0.event.id == claim.event.id && $0.phase == .pending
                }), s.entries[i].lease == claim.lease
            else { return false }
            s.entries[i].lease = nil
            s.entries[i].leaseUntil = -.infinity
            switch outcome {
            case .delivered:
                s.entries[i].phase = .delivered
            case .retry(let at, let reason):
                s.entries[i].attempts += 1
                s.entries[i].due = at
                s.entries[i].reason = reason
            case .dead(let reason):
                s.entries[i].attempts += 1
                s.entries[i].phase = .dead(reason)
            }
            return true
        }
    }

    func nextDue(hook: String, after now: Double) async throws -> Double? {
        state.withLock { s in
            Self.heads(s, hook: hook).compactMap { i -> Double? in
                let e = s.entries[i]
                let at = max(e.due, e.leaseUntil)
                return at > now ? at : nil
            }.min()
        }
    }

    /// The entries of `hook`, in queued order.
    func entries(_ hook: String) -> [Entry] { state.withLock { $0.entries.filter { $0.hook == hook } } }

    /// Whether every entry is delivered or dead.
    var settled: Bool { state.withLock { $0.entries.allSatisfy { $0.phase != .pending } } }
}
