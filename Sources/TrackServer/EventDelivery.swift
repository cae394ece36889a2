import Delivery
import EndpointEvents
import Formats
import Foundation
import Geo
import Logging
import ServiceLifecycle
import TrackStore

/// The store's events facet as `Delivery`'s queue: what the delivery worker claims from and settles
/// into, and the hooks as the store keeps them (their settings as ``HookSettings``).
struct StoreDeliveryQueue: DeliveryQueue {
    let store: any TrackStore

    func hooks() async throws -> [Hook] {
        try await store.storedHooks().compactMap { HookSettings.hook($0) }
    }

    func claim(hook: String, limit: Int, now: Double, leaseUntil: Double) async throws -> [ClaimedDelivery] {
        let token = UUID().uuidString
        return try await store.claimDeliveries(
            hook: hook, limit: limit, now: now, leaseUntil: leaseUntil, token: token
        ).map {
            ClaimedDelivery(
                hook: $0.hook,
                event: QueuedEvent(id: $0.event.id, device: $0.event.device, kind: $0.event.kind, body: $0.event.body),
                attempts: $0.attempts, queued: $0.queued, lease: $0.token)
        }
    }

    func settle(_ claim: ClaimedDelivery, outcome: DeliveryOutcome, now: Double) async throws -> Bool {
        let settlement: DeliverySettlement
        switch outcome {
        case .delivered: settlement = .delivered
        case .retry(let at, let reason): settlement = .retry(at: at, reason: reason)
        case .dead(let reason): settlement = .dead(reason: reason)
        }
        return try await store.settleDelivery(
            hook: claim.hook, event: claim.event.id, token: claim.lease, outcome: settlement, now: now)
    }

    func nextDue(hook: String, after now: Double) async throws -> Double? {
        try await store.nextDeliveryDue(hook: hook, after: now)
    }
}

/// A hook's settings as the store keeps them (JSON) and as `/v1/hooks/{name}` takes them:
/// `{"type":"webhook","url":...,"kinds":[...],"devices":[...],"secret":...,"topic":...}`.
public struct HookSettings: Codable, Hashable, Sendable {
    public var type: String
    public var url: String
    public var kinds: [String]?
    public var devices: [String]?
    public var secret: String?
    public var topic: String?

    /// The hook named `name` these settings describe, or why not (the field and what is wrong).
    public func hook(name: String) -> Result<Hook, HookSettingsProblem> {
        guard let t = Hook.HookType(rawValue: type) else {
            return .failure(
                HookSettingsProblem(field: "type", message: "'\(type)' is not webhook, homeassistant or mqtt"))
        }
        var kindSet: Set<EventKind>?
        if let kinds {
            var set: Set<EventKind> = []
            for k in kinds {
                guard let kind = EventKind(rawValue: k) else {
                    return .failure(
                        HookSettingsProblem(
                            field: "kinds", message: "'\(k)' is not an event kind (\(EventKind.namesSentence))"))
                }
                set.insert(kind)
            }
            kindSet = set
        }
        let hook = Hook(
            name: name, type: t, url: url, kinds: kindSet, devices: devices.map(Set.init), secret: secret ?? "",
            topic: topic ?? Hook.defaultTopic)
        if let p = hook.problem { return .failure(HookSettingsProblem(p)) }
        return .success(hook)
    }

    /// ``hook(name:)`` for settings an admin gives now (`hooks add`, `PUT /v1/hooks/{name}`), with
    /// what a hook read back from a store is not held to: a topic is for an MQTT hook only, and its
    /// braces name `{device}` or `{kind}` (a `{devices}` typo would publish to that literal topic).
    public func newHook(name: String) -> Result<Hook, HookSettingsProblem> {
        let hook = self.hook(name: name)
        guard case .success(let h) = hook, let topic else { return hook }
        guard h.type == .mqtt else {
            return .failure(HookSettingsProblem(field: "topic", message: "only an mqtt hook publishes to a topic"))
        }
        var rest = Substring(topic)
        while let open = rest.firstIndex(of: "{") {
            let close = rest[open...].firstIndex(of: "}") ?? rest.endIndex
            let placeholder = rest[open..<(close == rest.endIndex ? close : rest.index(after: close))]
            guard placeholder == "{device}" || placeholder == "{kind}" else {
                return .failure(
                    HookSettingsProblem(
                        field: "topic",
                        message: "'\(placeholder.prefix(40))' is not a placeholder: {device} and {kind} are replaced"))
            }
            rest = rest[placeholder.endIndex...]
        }
        return hook
    }

    public init(
        type: String, url: String, kinds: [String]? = nil, devices: [String]? = nil, secret: String? = nil,
        topic: String? = nil
    ) {
        self.type = type
        self.url = url
        self.kinds = kinds
        self.devices = devices
        self.secret = secret
        self.topic = topic
    }

    public init(_ hook: Hook) {
        type = hook.type.rawValue
        url = hook.url
        kinds = hook.kinds.map { $0.map(\.rawValue).sorted() }
        devices = hook.devices.map { $0.sorted() }
        secret = hook.secret
        topic = hook.type == .mqtt ? hook.topic : nil
    }

    /// The hook as the store keeps it.
    public static func stored(_ hook: Hook) -> StoredHook {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(HookSettings(hook))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return StoredHook(name: hook.name, kinds: hook.kinds, devices: hook.devices, settings: json)
    }

    /// The hook a store kept, or `nil` when its settings no longer read.
    public static func hook(_ stored: StoredHook) -> Hook? {
        guard let s = try? JSONDecoder().decode(HookSettings.self, from: Data(stored.settings.utf8)),
            case .success(let hook) = s.hook(name: stored.name)
        else { return nil }
        return hook
    }
}

/// Why hook settings can't be kept: the field and what is wrong.
public struct HookSettingsProblem: Error, Hashable, Sendable {
    public var field: String
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    init(_ problem: Hook.Problem) {
        switch problem {
        case .name(let m): self.init(field: "name", message: m)
        case .url(let m): self.init(field: "url", message: m)
        case .secret:
            self.init(
                field: "secret", message: "a secret of at least \(Hook.minimumSecretBytes) bytes signs each event")
        case .topic(let m): self.init(field: "topic", message: m)
        case .devices(let m): self.init(field: "devices", message: m)
        case .kinds: self.init(field: "kinds", message: "the kind list is empty (leave it out for every kind)")
        }
    }
}

/// The delivery worker in the server's service group, woken by every batch whose events this
/// instance stored and, on a store other processes share (``QueuedEventsSource``: PostgreSQL), by
/// the events any instance queued; the lanes' polls are the fallback.
struct EventDeliveryService: Service {
    let store: any TrackStore
    let worker: DeliveryWorker
    /// The waits of the queue listener's reconnections.
    let clock: any EpochClock
    let logger: Logger

    func run() async throws {
        let worker = self.worker
        let subscription = store.deviceEvents.subscribe { _ in worker.wake() }
        defer { store.deviceEvents.unsubscribe(subscription) }
        let follow = (store as? any QueuedEventsSource).map { source in
            Task { [clock, logger] in
                do { try await source.followQueued(clock: clock) { worker.wake() } } catch {
                    guard !Task.isCancelled, !(error is CancellationError) else { return }
                    logger.error(
                        "delivery stopped listening for other instances' events: they wait for the poll",
                        metadata: ["error.type": "\(type(of: error))"])
                }
            }
        }
        defer { follow?.cancel() }
        try await worker.run()
    }
}

/// `hooks test` and `POST /v1/hooks/{name}/test`: a `test` event delivered to a hook at once, not
/// queued: `{"id":"test-MS","device":"keeptrack-test","kind":"test","time":ISO}`.
public enum HookTest {
    public static func deliver(_ hook: Hook, kinds: DeliveryKinds, now: Double) async -> DeliveryAnswer {
        let id = "test-\(UInt64(now * 1000))"
        let body = Array(
            "{\"id\":\"\(id)\",\"device\":\"keeptrack-test\",\"kind\":\"test\",\"time\":\"\(ISOTime.string(now))\"}"
                .utf8)
        let kind = kinds.make(hook)
        let answer = await kind.deliver(QueuedEvent.test(id: id, device: "keeptrack-test", body: body))
        await kind.close()
        return answer
    }
}

extension EventKind {
    /// The kinds a hook or a query names, for an error about one that is none of them:
    /// `one of geofenceEnter, geofenceExit, ...`.
    static var namesSentence: String {
        "one of " + allCases.map(\.rawValue).joined(separator: ", ")
    }
}
