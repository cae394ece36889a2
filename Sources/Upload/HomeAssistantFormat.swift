import BuildInfo
import Formats
import Geo
import MQTT
import Synchronization

/// Home Assistant by MQTT discovery (``HomeAssistantDiscovery``), for an `mqtt(s)://` target only:
/// the device appears in Home Assistant as a device with a device tracker, a speed sensor and, once
/// the tracker reports a visit, a last-visit sensor, with no YAML to write.
///
/// Each connection announces the device first: the discovery configurations and `online` on its
/// availability topic, retained, at QoS 1, acknowledged before any position; the connection's last
/// will is `offline` there (retained), so Home Assistant shows the device unavailable when the
/// tracker vanishes without a goodbye (killed, crashed, lost its network). A graceful exit leaves it
/// `online`: the last position is still true after the program stops.
///
/// Each location and heartbeat is the tracker's attributes (``HomeAssistantDiscovery/attributes(_:)``),
/// retained, so that a Home Assistant that (re)subscribes gets the latest position at once; a visit
/// is the last-visit sensor's message. Region transitions, dwells and trips have no form (Home
/// Assistant computes zones from the position): they are acknowledged as skipped. A record leaves
/// the outbox when the broker acknowledged all its messages; ``HomeAssistantGate`` decides when
/// Home Assistant can be listening.
///
/// The URL's topic, if any, is the discovery prefix (`mqtt://broker/myprefix`); the default is
/// `homeassistant`. Over HTTP there is nothing to send to: the uploader refuses it.
public struct HomeAssistantFormat: UploadFormat {
    public init() {}
    public var name: String { "homeassistant" }
    /// Not an HTTP format: no server path.
    public var serverPath: String { "" }
    public var recordsPerRequest: Int? { 1 }
    /// In sequence order: each position replaces the last.
    public var transitionsFirst: Bool { false }

    /// The tracker's entity in Home Assistant (`device_tracker.van_1`).
    public func deviceOnServer(_ device: String, settings: UploadFormatSettings) -> String {
        HomeAssistantDiscovery.Topics(device: device).trackerEntity
    }

    /// The attributes a position would carry (what the tracker publishes), or `nil` for a record
    /// without that form; the uploader publishes with ``messages(for:topics:)`` instead.
    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        guard records[0].kind.isPosition, records[0].kind != .visit else { return nil }
        return UploadRequest(
            body: HomeAssistantDiscovery.attributes(records[0]), headers: [("Content-Type", "application/json")])
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? { nil }

    /// The messages of record `r`: a position's retained attributes, a visit's retained message;
    /// none for a record Home Assistant has no form for.
    public func messages(for r: TrailRecord, topics: HomeAssistantDiscovery.Topics) -> [MQTTMessage] {
        switch r.kind {
        case .location, .heartbeat:
            [MQTTMessage(topic: topics.attributes, payload: HomeAssistantDiscovery.attributes(r), retain: true)]
        case .visit:
            [MQTTMessage(topic: topics.visit, payload: HomeAssistantDiscovery.visit(r), retain: true)]
        case .enter, .exit, .dwell, .trip:
            []
        }
    }

    /// The announcement: the discovery configurations (the last-visit sensor's once a visit was
    /// sent) and `online`, retained.
    public func announcement(
        device: HomeAssistantDiscovery.Device, topics: HomeAssistantDiscovery.Topics, visits: Bool
    ) -> [MQTTMessage] {
        var out = [
            MQTTMessage(
                topic: topics.trackerConfig, payload: HomeAssistantDiscovery.trackerConfig(device, topics: topics),
                retain: true),
            MQTTMessage(
                topic: topics.speedConfig, payload: HomeAssistantDiscovery.speedSensorConfig(device, topics: topics),
                retain: true),
        ]
        if visits { out.append(visitSensorConfig(device: device, topics: topics)) }
        out.append(MQTTMessage(topic: topics.availability, text: HomeAssistantDiscovery.online, retain: true))
        return out
    }

    /// The last-visit sensor's configuration (retained).
    public func visitSensorConfig(device: HomeAssistantDiscovery.Device, topics: HomeAssistantDiscovery.Topics)
        -> MQTTMessage
    {
        MQTTMessage(
            topic: topics.visitConfig, payload: HomeAssistantDiscovery.visitSensorConfig(device, topics: topics),
            retain: true)
    }

    /// The connection's last will: `offline` on the availability topic, retained.
    public func will(topics: HomeAssistantDiscovery.Topics) -> MQTTMessage {
        MQTTMessage(topic: topics.availability, text: HomeAssistantDiscovery.offline, retain: true)
    }
}

/// A Home Assistant target's state across its connections: the topics, the gate, what Home
/// Assistant says on its status topic (read on libmosquitto's thread), and whether the last-visit
/// sensor was announced.
final class HomeAssistantLane: Sendable {
    let format: HomeAssistantFormat
    let topics: HomeAssistantDiscovery.Topics
    let device: HomeAssistantDiscovery.Device
    /// Fired when Home Assistant's status changes.
    let signal = Signal()
    private struct State {
        var gate = HomeAssistantGate()
        /// The connection the gate last saw opened (held, so that a new one is never mistaken for it at
        /// the same address).
        var connection: MQTTConnection?
        var visits = false
    }
    private let state = Mutex(State())

    init(format: HomeAssistantFormat, device: String, prefix: String) {
        self.format = format
        topics = HomeAssistantDiscovery.Topics(device: device, prefix: prefix)
        self.device = HomeAssistantDiscovery.Device(name: device, softwareVersion: BuildInfo.version)
    }

    /// A message on Home Assistant's status topic (on libmosquitto's thread).
    func received(topic: String, payload: [UInt8]) {
        guard topic == topics.status else { return }
        let status = HomeAssistantGate.Status(payload: payload)
        guard status != .unknown else { return }
        state.withLock { $0.gate.heard(status) }
        signal.fire()
    }

    /// Tells the gate when `connection` is one it has not seen.
    func use(_ connection: MQTTConnection, now: Double) {
        state.withLock { s in
            guard s.connection !== connection else { return }
            s.connection = connection
            s.gate.connected(now: now)
        }
    }

    func decide(now: Double) -> HomeAssistantGate.Decision { state.withLock { $0.gate.decide(now: now) } }

    var status: HomeAssistantGate.Status { state.withLock { $0.gate.status } }

    func announced(now: Double) { state.withLock { $0.gate.announced(now: now) } }

    /// The announcement for the gate's `.announce`.
    func announcement() -> [MQTTMessage] {
        format.announcement(device: device, topics: topics, visits: state.withLock { $0.visits })
    }

    /// Record `r`'s messages, the last-visit sensor's configuration ahead of the first visit.
    func messages(for r: TrailRecord) -> [MQTTMessage] {
        let messages = format.messages(for: r, topics: topics)
        guard r.kind == .visit, !state.withLock({ $0.visits }) else { return messages }
        return [format.visitSensorConfig(device: device, topics: topics)] + messages
    }

    /// The last-visit sensor's configuration was acknowledged: announce it from now on.
    func visitSensorAnnounced() { state.withLock { $0.visits = true } }
}
