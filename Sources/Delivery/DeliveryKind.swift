import EndpointEvents

/// Why a delivery did not happen: what (``code``, ``message``, the receiver's ``status``).
///
/// It says nothing of the event (no position): a reason is kept with a dead letter and logged.
public struct DeliveryFailure: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The receiver answered something other than 2xx (``DeliveryFailure/status``).
        public static let status = Code(rawValue: "status")
        /// The receiver answered a redirect, which is never followed (its `Location` in the message).
        public static let redirect = Code(rawValue: "redirect")
        /// No answer within the timeout.
        public static let timeout = Code(rawValue: "timeout")
        /// The connection failed (refused, reset, TLS).
        public static let network = Code(rawValue: "network")
        /// The host has no address.
        public static let unresolvable = Code(rawValue: "unresolvable")
        /// The host's address is not public and private hooks are not allowed.
        public static let addressRefused = Code(rawValue: "address-refused")
        /// The MQTT broker refused us or the publish (credentials, lost connection, no PUBACK).
        public static let broker = Code(rawValue: "broker")
        /// The hook's settings cannot work (``Hook/problem``).
        public static let configuration = Code(rawValue: "configuration")
    }

    public var code: Code
    public var message: String
    /// The receiver's HTTP status, for ``Code/status`` and ``Code/redirect``.
    public var status: Int?

    public init(_ code: Code, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    public var description: String { message }
}

/// What came of one attempt to deliver an event.
public enum DeliveryAnswer: Hashable, Sendable {
    /// The receiver has it (a 2xx; an MQTT PUBACK).
    case delivered
    /// Worth trying again: after the receiver's `Retry-After` (seconds) when it said one, else
    /// after the policy's backoff.
    case retry(after: Double?, DeliveryFailure)
    /// Never worth trying again: straight to the dead letters.
    case dead(DeliveryFailure)
}

/// One way of delivering: takes an event (its JSON, as the store queued it) for one hook and
/// answers ``DeliveryAnswer``, as an upload format does for records. One value per hook, made by
/// ``DeliveryKinds``; it may keep a connection between deliveries and is closed with the hook's lane.
public protocol DeliveryKind: Sendable {
    /// Delivers `event` (its id, device, kind and JSON body) to the hook.
    func deliver(_ event: QueuedEvent) async -> DeliveryAnswer
    /// Releases what the kind holds (connections).
    func close() async
}

/// What a delivery kind needs of an event: what the store queued.
public struct QueuedEvent: Hashable, Sendable {
    public var id: String
    public var device: String
    public var kind: EventKind
    /// The event's JSON (``DeviceEvent/json``): what a webhook posts and signs, and MQTT publishes.
    public var body: [UInt8]
    /// The kind as the receiver is told it (the `X-KeepTrack-Event` header, an MQTT topic's
    /// `{kind}`): `kind`'s name, or `test` for ``test(id:device:body:)``'s.
    public private(set) var kindName: String

    public init(id: String, device: String, kind: EventKind, body: [UInt8]) {
        self.id = id
        self.device = device
        self.kind = kind
        self.body = body
        kindName = kind.rawValue
    }

    /// A test event (`hooks test`): its body says `"kind":"test"`, and so do its header and topic,
    /// so that a receiver acting on the kind never takes it for a real event. (`kind` is then
    /// only a placeholder: a test is not queued, nor matched against the hook's kinds.)
    public static func test(id: String, device: String, body: [UInt8]) -> QueuedEvent {
        var event = QueuedEvent(id: id, device: device, kind: .geofenceEnter, body: body)
        event.kindName = "test"
        return event
    }

    /// The event as queued.
    public init(_ event: DeviceEvent) {
        self.init(id: event.id, device: event.device, kind: event.kind, body: event.json)
    }
}
