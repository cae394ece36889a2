import Formats

extension DeviceEvent {
    /// The event as JSON, one object: `{"id":...,"device":...,"kind":...,"time":ISO,...}` with the
    /// common members first, then the kind's (docs/events.md). What `/v1/events` lists, the live
    /// stream pushes and a webhook posts (its signature is over these bytes).
    public var json: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        appendJSON(to: &out)
        return out
    }

    /// Appends ``json``.
    public func appendJSON(to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"id\":", to: &out)
        ByteWriting.appendJSONString(id, to: &out)
        ByteWriting.appendStatic(",\"device\":", to: &out)
        ByteWriting.appendJSONString(device, to: &out)
        ByteWriting.appendStatic(",\"kind\":\"", to: &out)
        out.append(contentsOf: kind.rawValue.utf8)
        ByteWriting.appendStatic("\",\"time\":", to: &out)
        ISOTime.appendQuoted(time, to: &out)
        if let decidedAt {
            ByteWriting.appendStatic(",\"decidedAt\":", to: &out)
            ISOTime.appendQuoted(decidedAt, to: &out)
        }
        if let latitude, let longitude {
            ByteWriting.appendStatic(",\"lat\":", to: &out)
            ByteWriting.appendFixed(latitude, decimals: 7, to: &out)
            ByteWriting.appendStatic(",\"lon\":", to: &out)
            ByteWriting.appendFixed(longitude, decimals: 7, to: &out)
        }
        switch details {
        case .none:
            break
        case .geofence(let name):
            ByteWriting.appendStatic(",\"geofence\":", to: &out)
            ByteWriting.appendJSONString(name, to: &out)
        case .region(let name):
            ByteWriting.appendStatic(",\"region\":", to: &out)
            ByteWriting.appendJSONString(name, to: &out)
        case .stay(let s):
            ByteWriting.appendStatic(",\"start\":", to: &out)
            ISOTime.appendQuoted(s.start, to: &out)
            ByteWriting.appendStatic(",\"end\":", to: &out)
            ISOTime.appendQuoted(s.end, to: &out)
            ByteWriting.appendStatic(",\"duration\":", to: &out)
            Self.appendNumber(s.end.map { $0 - s.start }, decimals: 3, to: &out)
            ByteWriting.appendStatic(",\"radius\":", to: &out)
            Self.appendNumber(s.radius, decimals: 1, to: &out)
            if let fixes = s.fixes {
                ByteWriting.appendStatic(",\"fixes\":", to: &out)
                ByteWriting.appendInt(Int64(fixes), to: &out)
            }
        case .trip(let t):
            ByteWriting.appendStatic(",\"start\":", to: &out)
            ISOTime.appendQuoted(t.start, to: &out)
            ByteWriting.appendStatic(",\"end\":", to: &out)
            ISOTime.appendQuoted(t.end, to: &out)
            ByteWriting.appendStatic(",\"duration\":", to: &out)
            Self.appendNumber(t.end - t.start, decimals: 3, to: &out)
            ByteWriting.appendStatic(",\"distance\":", to: &out)
            Self.appendNumber(t.distance, decimals: 1, to: &out)
            ByteWriting.appendStatic(",\"avgSpeed\":", to: &out)
            Self.appendNumber(t.end > t.start ? t.distance / (t.end - t.start) : 0, decimals: 3, to: &out)
            ByteWriting.appendStatic(",\"maxSpeed\":", to: &out)
            Self.appendNumber(t.maximumSpeed, decimals: 3, to: &out)
            ByteWriting.appendStatic(",\"startLat\":", to: &out)
            ByteWriting.appendFixed(t.from.latitude, decimals: 7, to: &out)
            ByteWriting.appendStatic(",\"startLon\":", to: &out)
            ByteWriting.appendFixed(t.from.longitude, decimals: 7, to: &out)
            ByteWriting.appendStatic(",\"endLat\":", to: &out)
            ByteWriting.appendFixed(t.to.latitude, decimals: 7, to: &out)
            ByteWriting.appendStatic(",\"endLon\":", to: &out)
            ByteWriting.appendFixed(t.to.longitude, decimals: 7, to: &out)
        case .offline(let lastSeen):
            ByteWriting.appendStatic(",\"lastSeen\":", to: &out)
            ISOTime.appendQuoted(lastSeen, to: &out)
        case .overspeed(let speed, let limit):
            ByteWriting.appendStatic(",\"speed\":", to: &out)
            Self.appendNumber(speed, decimals: 3, to: &out)
            ByteWriting.appendStatic(",\"limit\":", to: &out)
            Self.appendNumber(limit, decimals: 3, to: &out)
        case .battery(let level, let threshold):
            ByteWriting.appendStatic(",\"battery\":", to: &out)
            Self.appendNumber(level, decimals: 1, to: &out)
            ByteWriting.appendStatic(",\"threshold\":", to: &out)
            Self.appendNumber(threshold, decimals: 1, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func appendNumber(_ v: Double?, decimals: Int, to out: inout [UInt8]) {
        guard let v, v.isFinite else { return ByteWriting.appendStatic("null", to: &out) }
        ByteWriting.appendFixed(v, decimals: decimals, to: &out)
    }
}
