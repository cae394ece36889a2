import EndpointEvents

/// The delivery queue a store keeps: one entry per event and hook that wants it, written in the
/// transaction that stored the record which caused the event (so an event exists exactly when its
/// record does), taken by ``DeliveryWorker``s (in one process or several sharing the store) with
/// leases, and settled by them.
///
/// What an implementation guarantees (docs/events.md says how the stores do it):
///
/// - **Order per device and hook.** ``claim(hook:limit:now:leaseUntil:)`` returns, for a hook, at
///   most one entry per device: the oldest of that device's entries that is neither delivered nor
///   dead. While it is leased or waiting for its retry, no later entry of that device is claimed for
///   that hook. A dead letter does not hold the device's later entries back.
/// - **One holder at a time.** A claimed entry is leased until `leaseUntil`; nobody else claims it
///   before then. A holder that dies (kill -9) just lets its lease run out, and the entry is claimed
///   again, with the same event id: at least once, and exactly once as an idempotent receiver sees
///   it.
/// - **Settled by its holder only.** ``settle(_:outcome:now:)`` applies only while the claim's
///   lease is the entry's current one (its ``ClaimedDelivery/lease`` token); a holder whose lease
///   ran out and was taken over learns it (`false`) and its answer changes nothing.
public protocol DeliveryQueue: Sendable {
    /// The hooks, as the store keeps them.
    func hooks() async throws -> [Hook]

    /// Leases, for `hook`, the head entry of up to `limit` devices whose head is due (its retry
    /// time at or before `now`) and not leased (no lease, or one that ended before `now`), the
    /// longest waiting first.
    func claim(hook: String, limit: Int, now: Double, leaseUntil: Double) async throws -> [ClaimedDelivery]

    /// Records what came of a claimed entry: delivered (it leaves the queue), to retry at a time
    /// (its attempts counted, its lease released), or dead (kept apart with its reason, until `hooks
    /// retry` queues it again). Returns `false`, changing nothing, when the claim's lease is no
    /// longer the entry's.
    func settle(_ claim: ClaimedDelivery, outcome: DeliveryOutcome, now: Double) async throws -> Bool

    /// The earliest time after `now` at which an entry of `hook` that is not claimable now becomes
    /// so (a retry's time, a lease's end), or `nil` when none waits. Entries claimable already are
    /// the worker's to claim: they are not this.
    func nextDue(hook: String, after now: Double) async throws -> Double?
}

/// An entry a worker holds: the event as queued, for one hook, with its lease.
public struct ClaimedDelivery: Hashable, Sendable {
    public var hook: String
    public var event: QueuedEvent
    /// Failed attempts before this one.
    public var attempts: Int
    /// When the entry was queued (the store's clock, seconds since 1970).
    public var queued: Double
    /// The lease this claim holds: settling needs it to still be the entry's.
    public var lease: String

    public init(hook: String, event: QueuedEvent, attempts: Int, queued: Double, lease: String) {
        self.hook = hook
        self.event = event
        self.attempts = attempts
        self.queued = queued
        self.lease = lease
    }
}

/// What a worker decided for a claimed entry (``DeliveryPolicy``).
public enum DeliveryOutcome: Hashable, Sendable {
    case delivered
    /// Try again at `at` (seconds since 1970); `reason` is the failure, kept for `hooks list`.
    case retry(at: Double, reason: String)
    /// Give up: the entry becomes a dead letter with `reason`.
    case dead(reason: String)
}
