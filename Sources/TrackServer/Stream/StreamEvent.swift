import EndpointEvents
import Formats
import LocationService
import TrackStore

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
        /// A stop the store found at ingest (a visit with its departure), decided by the point of
        /// time `decided`: the members of a `/stops` answer's object.
        case stop(Visit, decided: Double)
        /// A trip the store found at ingest, decided at `decided`: a `/trips` answer's object.
        case trip(Trip, decided: Double)
        /// An event the store stored at ingest (docs/events.md): a geofence crossed, a stop begun,
        /// overspeed, low battery, the device's own region and visit records. Its object is the
        /// event's JSON, as `/v1/events` and hooks have it.
        case event(DeviceEvent)
        /// The outlier marks the store's detector changed, decided by the point of time `time`
        /// (``OutlierMarks``): the locations newly marked (each with its mark, `outlier`) and those
        /// no longer marked, each by its time and position, as the stream's records had them.
        case outliers(OutlierMarks)
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
        case .stop: "stop"
        case .trip: "trip"
        case .event(let e): e.kind.rawValue
        case .outliers: "outliers"
        }
    }

    /// The whole message: `{"type":"event","device":ID,"event":{...}}`.
    public func appendMessage(to out: inout [UInt8]) {
        if case .event(let e) = kind {
            ByteWriting.appendStatic("{\"type\":\"event\",\"device\":", to: &out)
            ByteWriting.appendJSONString(device, to: &out)
            ByteWriting.appendStatic(",\"event\":", to: &out)
            e.appendJSON(to: &out)
            out.append(UInt8(ascii: "}"))
            return
        }
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
        case .stop(let visit, let decided):
            Self.appendTime("time", decided, to: &out)
            Self.appendMembers(to: &out) { StopsJSON.stopMembers(visit, to: &$0) }
        case .trip(let trip, let decided):
            Self.appendTime("time", decided, to: &out)
            Self.appendMembers(to: &out) { StopsJSON.tripMembers(trip, to: &$0) }
        case .event(let e):
            Self.appendMembers(to: &out) { e.appendJSON(to: &$0) }
        case .outliers(let marks):
            Self.appendTime("time", marks.time, to: &out)
            ByteWriting.appendStatic(",\"marked\":", to: &out)
            Self.appendPoints(marks.marked, to: &out)
            ByteWriting.appendStatic(",\"cleared\":", to: &out)
            Self.appendPoints(marks.cleared, to: &out)
        }
    }

    /// `[{"time":ISO,"lat":..,"lon":..,"outlier":MARK},...]`, the position as a record's (`outlier`
    /// left out of a point cleared).
    static func appendPoints(_ points: [OutlierMarks.Point], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (i, p) in points.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendStatic("{\"time\":\"", to: &out)
            ISOTime.append(p.time, to: &out)
            ByteWriting.appendStatic("\",\"lat\":", to: &out)
            ByteWriting.appendFixed(p.latitude, decimals: 9, to: &out)
            ByteWriting.appendStatic(",\"lon\":", to: &out)
            ByteWriting.appendFixed(p.longitude, decimals: 9, to: &out)
            if let mark = p.mark {
                ByteWriting.appendStatic(",\"outlier\":", to: &out)
                ByteWriting.appendJSONString(mark, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
    }

    /// The event as a client that sees the device's points between `from` and `to` only may have
    /// it (a share link's window): the outlier marks of its points alone (`nil`: none left).
    func within(from: Double, to: Double) -> StreamEvent? {
        guard case .outliers(var marks) = kind else { return self }
        marks.marked = marks.marked.filter { $0.time >= from && $0.time <= to }
        marks.cleared = marks.cleared.filter { $0.time >= from && $0.time <= to }
        guard !marks.marked.isEmpty || !marks.cleared.isEmpty else { return nil }
        return StreamEvent(device: device, kind: .outliers(marks))
    }

    /// The route object's members (written with their closing brace, left out here), after a comma.
    static func appendMembers(to out: inout [UInt8], _ write: (inout [UInt8]) -> Void) {
        var members: [UInt8] = []
        write(&members)
        if members.last == UInt8(ascii: "}") { members.removeLast() }
        out.append(UInt8(ascii: ","))
        out += members
    }

    static func appendTime(_ key: StaticString, _ seconds: Double, to out: inout [UInt8]) {
        ByteWriting.appendStatic(",\"", to: &out)
        ByteWriting.appendStatic(key, to: &out)
        ByteWriting.appendStatic("\":\"", to: &out)
        ISOTime.append(seconds, to: &out)
        out.append(UInt8(ascii: "\""))
    }
}
