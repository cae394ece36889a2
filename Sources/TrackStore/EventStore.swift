import EndpointEvents
import Formats
import Synchronization

/// The events facet of a store (docs/events.md): the endpoint's geofences, the events that ingest
/// decides from each device's stored records (``DeviceEventState``: geofences by the device's own
/// region rules, overspeed, low battery; the stop detector's stops and trips; the device's own
/// region, visit and trip records), their history, the hooks that want them, and the delivery queue
/// the hooks' lanes take them from.
///
/// What an implementation guarantees:
///
/// - **An event exists exactly when its record is stored.** The events a batch causes, and one
///   delivery entry per hook that wants each, are committed with the batch (SQLite: in the batch's
///   transaction) or with the durable mark the batch's transaction left for its device (PostgreSQL:
///   the device's catch-up transaction, which runs after the answer and, if the instance dies
///   first, on the device's next batch or stops query, on any instance). An event's id is stable
///   (its cause), and events are stored once by id: a re-evaluation adds nothing.
/// - **Order per device and hook**, **one holder at a time**, **settled by its holder only**: as
///   `Delivery`'s `DeliveryQueue` says (the server adapts this facet to it).
public protocol EventStore: AnyObject {
    /// The events this process's ingest stored, batch by batch after each commit (the live stream's).
    var deviceEvents: DeviceEventFeed { get }

    /// The rules ingest evaluates with from now on (the overspeed limit, the battery threshold).
    func setEventRules(_ rules: EventRules)

    /// Every geofence, by name.
    func geofences() async throws -> [Geofence]

    /// Replaces every geofence by `geofences` (names unique), in one transaction.
    func replaceGeofences(_ geofences: [Geofence]) async throws

    /// Adds each of `geofences` (names unique), or replaces the one of its name (its devices start
    /// again from unknown), all in one transaction: all or none; the number that were new.
    ///
    /// - Throws: `EventsError` (``EndpointEvents/EventsError/Code/tooLarge``) when the store would
    ///   then hold more geofences than a document may have (100,000): nothing is stored.
    func putGeofences(_ geofences: [Geofence]) async throws -> Int

    /// Removes the geofence named `name`; `false` when there was none.
    func removeGeofence(_ name: String) async throws -> Bool

    /// One page of the stored events matching `query`, by time then id, after `cursor`.
    func events(_ query: EventQuery, after cursor: EventCursor?, limit: Int) async throws
        -> (events: [StoredEvent], next: EventCursor?)

    /// Every hook, by name.
    func storedHooks() async throws -> [StoredHook]

    /// Adds `hook` or replaces the one of its name (its queued entries stay); `true` when new.
    func putHook(_ hook: StoredHook) async throws -> Bool

    /// Removes the hook named `name` and its queue; `false` when there was none.
    func removeHook(_ name: String) async throws -> Bool

    /// Queues `name`'s dead letters again (due at `now`, attempts from zero); returns how many.
    func retryDeadDeliveries(hook name: String, now: Double) async throws -> Int

    /// Per hook: entries waiting (not dead), dead letters, and why they fail.
    func deliveryCounts() async throws -> [String: DeliveryCounts]

    /// Leases, for `hook`, the head entry of up to `limit` devices whose head is due and not leased
    /// (the longest waiting first), with the lease `token` until `leaseUntil`.
    func claimDeliveries(hook: String, limit: Int, now: Double, leaseUntil: Double, token: String) async throws
        -> [QueuedDelivery]

    /// Settles a claimed entry (`hook`, `event`) held with `token`: delivered (removed), retry at
    /// `retryAt`, or dead with `reason`. `false`, changing nothing, when the lease is no longer its.
    func settleDelivery(
        hook: String, event: String, token: String, outcome: DeliverySettlement, now: Double
    ) async throws -> Bool

    /// The earliest time after `now` at which an entry of `hook` not claimable now becomes so.
    func nextDeliveryDue(hook: String, after now: Double) async throws -> Double?

    /// Presence as stored events (docs/events.md), from the devices' receipt times the store keeps,
    /// in one transaction: each device declared offline that sent since gets its `online` (at its
    /// newest record's time); each device whose last record was received `offlineAfter` seconds or
    /// more before `now`, not declared for that silence yet, gets its `offline` (at the time the
    /// silence crossed `offlineAfter`). Both ids are the device's and the silence's last receipt
    /// (``DeviceEvent/offline(device:time:lastSeen:)``): stored once by id and queued for the hooks
    /// that want them, however many instances reconcile, however often. Returns the events stored
    /// now (also told on ``deviceEvents``).
    func reconcilePresence(now: Double, offlineAfter: Double) async throws -> [DeviceEvent]

    /// The devices' own overspeed limits, in m/s, by device (each overrides the global one).
    func overspeedLimits() async throws -> [String: Double]

    /// Gives `device` its own overspeed limit (m/s, above 0), or removes it (`nil`: the global one
    /// applies again); ingest evaluates with it from the next batch on, on every instance. `false`
    /// when removing a limit the device did not have.
    func setOverspeedLimit(device: String, limit: Double?) async throws -> Bool

    /// Deletes at most `limit` events whose time is before `cutoff` and that no hook still waits
    /// for (an entry not delivered and not dead keeps its event; dead letters go with their event),
    /// in one short transaction; returns how many went, 0 when none is left to delete.
    func deleteExpiredEvents(before cutoff: Double, limit: Int) async throws -> Int
}

/// A filter of ``EventStore/events(_:after:limit:)``.
public struct EventQuery: Hashable, Sendable {
    /// One device's events only (a device token's), or every device's.
    public var device: String?
    /// These kinds only, or every kind.
    public var kinds: Set<EventKind>?
    /// The events' time (`time`, the record's), inclusive.
    public var from: Double
    public var to: Double

    public init(device: String? = nil, kinds: Set<EventKind>? = nil, from: Double = -.infinity, to: Double = .infinity)
    {
        self.device = device
        self.kinds = kinds
        self.from = from
        self.to = to
    }
}

/// Where a page of events ends: the last event's time and id; its ``token`` is opaque to clients.
public struct EventCursor: Hashable, Sendable {
    public var time: Double
    public var id: String

    public init(time: Double, id: String) {
        self.time = time
        self.id = id
    }

    public var token: String {
        Base64URL.encode(Array("e1|\(String(time.bitPattern, radix: 16))|\(id)".utf8))
    }

    public init?(token: String) {
        guard let bytes = Base64URL.decode(token), let text = String(validating: bytes, as: UTF8.self) else {
            return nil
        }
        let parts = text.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "e1", let bits = UInt64(parts[1], radix: 16) else { return nil }
        time = Double(bitPattern: bits)
        guard time.isFinite else { return nil }
        id = String(parts[2])
    }
}

/// An event as a store keeps it: its key fields and its JSON (``DeviceEvent/json``).
public struct StoredEvent: Hashable, Sendable {
    public var id: String
    public var device: String
    public var kind: EventKind
    public var time: Double
    public var body: [UInt8]

    public init(id: String, device: String, kind: EventKind, time: Double, body: [UInt8]) {
        self.id = id
        self.device = device
        self.kind = kind
        self.time = time
        self.body = body
    }

    public init(_ event: DeviceEvent) {
        self.init(id: event.id, device: event.device, kind: event.kind, time: event.time, body: event.json)
    }
}

/// A hook as a store keeps it: what ingest needs to queue its events (its kinds and devices) and its
/// whole definition as the server wrote it (`settings`, JSON; the store does not read it).
public struct StoredHook: Hashable, Sendable {
    public var name: String
    /// The kinds it wants, or `nil` for every kind.
    public var kinds: Set<EventKind>?
    /// The devices it wants, or `nil` for every device.
    public var devices: Set<String>?
    public var settings: String

    public init(name: String, kinds: Set<EventKind>?, devices: Set<String>?, settings: String) {
        self.name = name
        self.kinds = kinds
        self.devices = devices
        self.settings = settings
    }

    /// Whether the hook wants `event`.
    public func wants(kind: EventKind, device: String) -> Bool {
        (kinds?.contains(kind) ?? true) && (devices?.contains(device) ?? true)
    }
}

/// A claimed delivery entry.
public struct QueuedDelivery: Hashable, Sendable {
    public var hook: String
    public var event: StoredEvent
    /// Failed attempts before this one.
    public var attempts: Int
    /// When it was queued (the store's clock).
    public var queued: Double
    /// The lease's token.
    public var token: String

    public init(hook: String, event: StoredEvent, attempts: Int, queued: Double, token: String) {
        self.hook = hook
        self.event = event
        self.attempts = attempts
        self.queued = queued
        self.token = token
    }
}

/// What came of a claimed entry.
public enum DeliverySettlement: Hashable, Sendable {
    case delivered
    case retry(at: Double, reason: String)
    case dead(reason: String)
}

/// Where a store tells the events its ingest stored, batch by batch after each commit (this
/// process's only). Handlers run on the committing thread: they return quickly and never wait.
public typealias DeviceEventFeed = Feed<DeviceEvent>

extension EventStore {
    /// Adds `geofence`, or replaces the one of its name (``putGeofences(_:)``); `true` when it is new.
    public func putGeofence(_ geofence: Geofence) async throws -> Bool {
        try await putGeofences([geofence]) == 1
    }
}

/// A hook's queue, as `hooks list` and `GET /v1/hooks` show it.
public struct DeliveryCounts: Hashable, Sendable {
    /// Entries waiting (not dead).
    public var pending: Int
    /// Dead letters.
    public var dead: Int
    /// Why its deliveries fail: the last error of its waiting entry tried the most times, else of
    /// a dead letter; `nil` when none has failed. (A receiver that is down fails them all alike.)
    public var lastError: String?

    public init(pending: Int, dead: Int, lastError: String? = nil) {
        self.pending = pending
        self.dead = dead
        self.lastError = lastError
    }
}
