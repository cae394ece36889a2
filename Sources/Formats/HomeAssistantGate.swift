/// When a Home Assistant target may publish positions: Home Assistant keeps only what it receives
/// while subscribed (it connects with a clean session), so a message published while it is away
/// (restarting, reconnecting after a broker restart) or before it has subscribed to a device it
/// has just discovered never reaches its history. The broker's PUBACK says only that the broker
/// has a message; this gate holds positions in the outbox while Home Assistant cannot be listening.
///
/// The rules (times in seconds on the owner's clock):
/// - each connection first announces the device (discovery configurations and `online`, retained);
///   positions then wait ``settle`` seconds, the time Home Assistant takes to subscribe to a device
///   it did not know (it answers nothing that would say when it has);
/// - after a reconnection (our connection was lost, so a broker restart may have dropped Home
///   Assistant too), positions also wait for Home Assistant's birth message (`online` on its status
///   topic, which it publishes once subscribed again), at most ``birthWait`` seconds;
/// - Home Assistant's `offline` (its last will, or its stop) holds positions until its next
///   `online`; that `online` is answered by announcing the device again (a broker without
///   persistence lost the retained configurations).
///
/// A value type with no clock and no I/O: its owner (the uploader's Home Assistant target; the
/// endpoint's, issue 39 item 2) feeds it events and does what it decides.
public struct HomeAssistantGate: Equatable, Sendable {
    /// What Home Assistant last said on its status topic.
    public enum Status: Equatable, Sendable {
        case unknown, online, offline

        /// What a message on Home Assistant's status topic says: its birth (`online`), its will
        /// (`offline`), or ``unknown`` for anything else.
        public init(payload: [UInt8]) {
            switch String(decoding: payload, as: UTF8.self) {
            case HomeAssistantDiscovery.online: self = .online
            case HomeAssistantDiscovery.offline: self = .offline
            default: self = .unknown
            }
        }
    }

    /// What the owner does next.
    public enum Decision: Equatable, Sendable {
        /// Publish the discovery configurations and `online`, then call ``announced(now:)``.
        case announce
        /// Publish positions.
        case publish
        /// Wait for a status message, or until this time (`nil`: only a status message ends it).
        case wait(until: Double?)
    }

    /// Seconds positions wait after an announcement. The default is 2 (Home Assistant's own
    /// discovery cool-down; it subscribed within 0.2 s here).
    public var settle: Double = 2
    /// Seconds a reconnection waits at most for Home Assistant's birth message. The default is 30.
    public var birthWait: Double = 30

    public private(set) var status = Status.unknown
    /// When this connection's announcement was acknowledged; `nil` before it.
    public private(set) var announcedAt: Double?
    /// After a reconnection, until when to wait for Home Assistant's birth message.
    public private(set) var birthDeadline: Double?
    public private(set) var connections = 0

    public init() {}

    /// A connection was opened (and subscribed to Home Assistant's status).
    public mutating func connected(now: Double) {
        connections += 1
        announcedAt = nil
        if connections > 1 {
            // What Home Assistant said on the previous connection may be stale: wait to hear it again.
            status = .unknown
            birthDeadline = now + birthWait
        }
    }

    /// The announcement was acknowledged by the broker.
    public mutating func announced(now: Double) {
        announcedAt = now
    }

    /// Home Assistant said `status` on its status topic.
    public mutating func heard(_ status: Status) {
        self.status = status
        if status == .online {
            birthDeadline = nil
            // Announce again: Home Assistant (re)started, or came back to a broker that may have
            // lost the retained configurations.
            announcedAt = nil
        }
    }

    public func decide(now: Double) -> Decision {
        if status == .offline { return .wait(until: nil) }
        guard let announcedAt else { return .announce }
        if let birthDeadline, now < birthDeadline { return .wait(until: birthDeadline) }
        if now < announcedAt + settle { return .wait(until: announcedAt + settle) }
        return .publish
    }
}
