import EndpointEvents
import Formats
import Foundation
import MQTT

/// Where the endpoint tells of events: a receiver, what it wants and how to sign for it.
///
/// The admin manages hooks (`/v1/hooks`); the store queues each event for every hook that wants it
/// (``wants(_:)``), in the event's own transaction, and a ``DeliveryWorker`` delivers them by the
/// hook's ``type``.
public struct Hook: Hashable, Sendable {
    /// How a hook's events travel.
    public enum HookType: String, Hashable, Sendable, CaseIterable {
        /// `POST` of the event's JSON to ``Hook/url``, signed (``EventSignature``).
        case webhook
        /// A publish at QoS 1 to ``Hook/topic`` on the broker of ``Hook/url`` (`mqtt://` or `mqtts://`).
        case mqtt
        /// Home Assistant's webhook trigger: a webhook to `http(s)://HOST:PORT/api/webhook/ID`, so an
        /// automation with that webhook id fires on the event.
        case homeassistant
    }

    /// Its name (unique; `/v1/hooks/{name}`).
    public var name: String
    public var type: HookType
    public var url: String
    /// The kinds it wants, or `nil` for every kind.
    public var kinds: Set<EventKind>?
    /// The devices it wants, or `nil` for every device.
    public var devices: Set<String>?
    /// The key of its signatures: at least ``minimumSecretBytes`` bytes for a webhook; optional for
    /// Home Assistant (none: not signed); unused by MQTT.
    public var secret: String
    /// For MQTT: the topic, where `{device}` and `{kind}` stand for the event's. The default is
    /// ``defaultTopic``.
    public var topic: String

    /// `keeptrack/{device}/event`.
    public static let defaultTopic = "keeptrack/{device}/event"
    /// The shortest secret: 16 bytes.
    public static let minimumSecretBytes = 16
    /// The longest URL: 2,048 bytes.
    public static let maximumURLBytes = 2048

    public init(
        name: String, type: HookType, url: String, kinds: Set<EventKind>? = nil, devices: Set<String>? = nil,
        secret: String, topic: String = Hook.defaultTopic
    ) {
        self.name = name
        self.type = type
        self.url = url
        self.kinds = kinds
        self.devices = devices
        self.secret = secret
        self.topic = topic
    }

    /// Whether the hook wants `event` (its kind and device).
    public func wants(_ event: DeviceEvent) -> Bool {
        (kinds?.contains(event.kind) ?? true) && (devices?.contains(event.device) ?? true)
    }

    /// What is wrong with a hook's settings, by field (the command line says which option).
    public enum Problem: Hashable, Sendable {
        /// The name is not 1 to 128 bytes without control characters.
        case name(String)
        /// The URL is not one the type takes (scheme, host, Home Assistant's path), or too long.
        case url(String)
        /// The secret is shorter than ``Hook/minimumSecretBytes``.
        case secret
        /// The MQTT topic is empty, or holds a wildcard (`+`, `#`).
        case topic(String)
        /// A kind list or device list that is empty (leave it out for every one), or an invalid device id.
        case devices(String)
        case kinds
    }

    /// Why the hook can't be kept, or `nil` when it can. Addresses are checked when the hook is
    /// used (``HookAddresses``), as a name's addresses may change.
    public var problem: Problem? {
        if let p = TrailRecord.identifierProblem(name) { return .name("the name \(p)") }
        if let p = target.problem { return .url(p) }
        // A webhook is signed; Home Assistant's trigger checks no signature (its webhook id is its
        // secret), so its hook may have none; MQTT's broker has its own credentials.
        let signed = type == .webhook || (type == .homeassistant && !secret.isEmpty)
        if signed && secret.utf8.count < Self.minimumSecretBytes { return .secret }
        if type == .mqtt {
            if topic.isEmpty { return .topic("the topic is empty") }
            if topic.contains("+") || topic.contains("#") {
                return .topic("a topic to publish to has no wildcards (+, #)")
            }
        }
        if let kinds, kinds.isEmpty { return .kinds }
        if let devices {
            if devices.isEmpty { return .devices("the device list is empty (leave it out for every device)") }
            for d in devices.sorted() {
                if let p = TrailRecord.identifierProblem(d) { return .devices("a device id \(p)") }
            }
        }
        return nil
    }

    /// The topic for an event of `device` and `kind`: ``topic`` with `{device}` and `{kind}`
    /// replaced, the device id's `/`, `+`, `#` and `%` percent-encoded (one topic level, no wildcard).
    public func topic(device: String, kind: EventKind) -> String {
        topic(device: device, kindName: kind.rawValue)
    }

    /// ``topic(device:kind:)`` for a kind by its name (``QueuedEvent/kindName``: `test` for a test).
    public func topic(device: String, kindName: String) -> String {
        func level(_ s: String) -> String {
            var out = ""
            for ch in s.unicodeScalars {
                switch ch {
                case "/": out += "%2F"
                case "+": out += "%2B"
                case "#": out += "%23"
                case "%": out += "%25"
                default: out.unicodeScalars.append(ch)
                }
            }
            return out
        }
        return topic.replacingOccurrences(of: "{device}", with: level(device))
            .replacingOccurrences(of: "{kind}", with: kindName)
    }

    /// The receiver's place as the URL says it.
    public struct Target: Hashable, Sendable {
        public var scheme: String
        public var host: String
        public var port: Int
        /// Why the URL is not one the hook's type takes, or `nil`.
        public var problem: String?
    }

    /// The URL's scheme, host and port (defaults by scheme), or why it is not one the type takes.
    public var target: Target {
        func bad(_ why: String) -> Target { Target(scheme: "", host: "", port: 0, problem: why) }
        guard url.utf8.count <= Self.maximumURLBytes else { return bad("the URL is longer than 2,048 bytes") }
        if type == .mqtt {
            do throws(MQTTError) {
                let broker = try MQTTEndpoint(parsing: url)
                return Target(
                    scheme: broker.tls ? "mqtts" : "mqtt", host: broker.host.lowercased(), port: broker.port,
                    problem: nil)
            } catch {
                return bad(error.message)
            }
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else {
            return bad("not a URL")
        }
        let schemes = ["http": 80, "https": 443]
        guard let defaultPort = schemes[scheme] else { return bad("a hook's URL is http:// or https://") }
        guard var host = components.host, !host.isEmpty else { return bad("the URL has no host") }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if components.user != nil || components.password != nil {
            return bad("a hook's URL carries no user or password (the secret signs each event)")
        }
        if components.fragment != nil { return bad("a hook's URL has no fragment (#...)") }
        if type == .homeassistant {
            let parts = components.path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0].isEmpty, parts[1] == "api", parts[2] == "webhook", !parts[3].isEmpty else {
                return bad("a Home Assistant hook's URL is http(s)://HOST:PORT/api/webhook/ID")
            }
        }
        let port = components.port ?? defaultPort
        guard (1...65535).contains(port) else { return bad("the port must be 1 to 65535") }
        return Target(scheme: scheme, host: host.lowercased(), port: port, problem: nil)
    }
}
