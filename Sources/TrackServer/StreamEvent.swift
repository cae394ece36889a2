import Formats

/// Something the endpoint derives from what it stores, sent to live clients as
/// `{"type":"event","device":ID,"event":{"kind":KIND,"time":ISO,...}}` (docs/live.md).
///
/// A new kind of event is one case of ``Kind`` and its fields in ``appendFields(to:)``: the hub
/// (``StreamHub/publish(events:)``) encodes every event once per kind of client and queues it for
/// each client that may see its device, as it does records.
public struct StreamEvent: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        /// The device sent nothing for the offline delay: declared at `time`, its last record received
        /// at `lastSeen` (seconds since 1970, the server's clock).
        case offline(time: Double, lastSeen: Double)
        /// The device sent a record again after it was declared offline, received at `time`.
        case online(time: Double)
    }

    public var device: String
    public var kind: Kind

    public init(device: String, kind: Kind) {
        self.device = device
        self.kind = kind
    }

    /// The kind's name on the wire.
    public var name: String {
        switch kind {
        case .offline: "offline"
        case .online: "online"
        }
    }

    /// The whole message: `{"type":"event","device":ID,"event":{...}}`.
    public func appendMessage(to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"type\":\"event\",\"device\":", to: &out)
        ByteWriting.appendJSONString(device, to: &out)
        ByteWriting.appendStatic(",\"event\":{\"kind\":", to: &out)
        ByteWriting.appendJSONString(name, to: &out)
        appendFields(to: &out)
        ByteWriting.appendStatic("}}", to: &out)
    }

    /// The kind's fields after `"kind"`, each with its leading comma.
    func appendFields(to out: inout [UInt8]) {
        switch kind {
        case .offline(let time, let lastSeen):
            Self.appendTime("time", time, to: &out)
            Self.appendTime("lastSeen", lastSeen, to: &out)
        case .online(let time):
            Self.appendTime("time", time, to: &out)
        }
    }

    static func appendTime(_ key: StaticString, _ seconds: Double, to out: inout [UInt8]) {
        ByteWriting.appendStatic(",\"", to: &out)
        ByteWriting.appendStatic(key, to: &out)
        ByteWriting.appendStatic("\":\"", to: &out)
        ISOTime.append(seconds, to: &out)
        out.append(UInt8(ascii: "\""))
    }
}
