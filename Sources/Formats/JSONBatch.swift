/// Our batch format (`POST /v1/locations`, `Content-Type: application/json`):
///
/// ```json
/// {"device":"van-1","records":[
///   {"id":"van-1:17","seq":17,"kind":"location","time":"2024-05-14T09:30:00.000Z","lat":48.137366333,
///    "lon":11.575408667,"alt":536.1,"hAcc":9.1,"vAcc":14.0,"speed":0.016,"course":32.32},
///   {"id":"van-1:18","seq":18,"kind":"enter","region":"home","time":"...","lat":...,"lon":...}]}
/// ```
///
/// `id` is `device:seq` and makes storage idempotent. `kind` is `location`, `enter`, `exit` or
/// `dwell` (the last three with `region`), `heartbeat` (a location again), `visit` or `trip` (with their members, see
/// ``appendSpan(_:to:)``); `alt`, `hAcc`, `vAcc`, `speed` (m/s) and `course` (°)
/// may be null or absent. The endpoint answers `{"accepted":N,"duplicates":M}`. Trails read back
/// from the endpoint add `"valid":false` to records their sender marked invalid (asked for with
/// `invalid=true`) and `"attributes":{...}` (strings) to records that came with any.
public enum JSONBatch {
    /// The batch's body.
    public static func encode(device: String, records: some Collection<TrailRecord>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + records.count * 220)
        ByteWriting.appendDeviceDocument(device: device, key: "records", records, to: &out) { append($0, to: &$1) }
        return out
    }

    /// One record as a JSON object.
    public static func append(_ r: TrailRecord, to out: inout [UInt8]) {
        if r.sequence > 0 {
            ByteWriting.appendStatic("{\"id\":", to: &out)
            ByteWriting.appendJSONString(r.id, to: &out)
            ByteWriting.appendStatic(",\"seq\":", to: &out)
            ByteWriting.appendInt(r.sequence, to: &out)
        } else {
            // A peer's record has no sequence of its own (its key is its time and place).
            ByteWriting.appendStatic("{\"id\":null,\"seq\":null", to: &out)
        }
        ByteWriting.appendStatic(",\"kind\":\"", to: &out)
        out.append(contentsOf: r.kind.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        if let region = r.region {
            ByteWriting.appendStatic(",\"region\":", to: &out)
            ByteWriting.appendJSONString(region, to: &out)
        }
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(r.time, to: &out)
        ByteWriting.appendStatic("\",\"lat\":", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 9, to: &out)
        optional(",\"alt\":", r.altitude, 3, &out)
        optional(",\"hAcc\":", r.horizontalAccuracy, 2, &out)
        optional(",\"vAcc\":", r.verticalAccuracy, 2, &out)
        optional(",\"speed\":", r.speed, 3, &out)
        optional(",\"course\":", r.course, 2, &out)
        appendSpan(r, to: &out)
        // What a trail read back from a store may carry (never sent by the uploader).
        if !r.valid { ByteWriting.appendStatic(",\"valid\":false", to: &out) }
        if let outlier = r.outlier {
            ByteWriting.appendStatic(",\"outlier\":", to: &out)
            ByteWriting.appendJSONString(outlier, to: &out)
        }
        if !r.attributes.isEmpty {
            ByteWriting.appendStatic(",\"attributes\":", to: &out)
            TrailRecord.appendAttributes(r.attributes, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func optional(_ key: StaticString, _ v: Double?, _ decimals: Int, _ out: inout [UInt8]) {
        ByteWriting.appendStatic(key, to: &out)
        if let v {
            ByteWriting.appendFixed(v, decimals: decimals, to: &out)
        } else {
            ByteWriting.appendStatic("null", to: &out)
        }
    }

    /// Reads a batch, validating every record against `now` (see ``TrailRecord/problem(now:)``).
    /// Unknown keys are ignored.
    ///
    /// - Throws: ``FormatsError`` naming the record and field (`records[3].lat: ...`), or the
    ///   byte where the JSON breaks.
    public static func decode(_ bytes: [UInt8], now: Double) throws(FormatsError) -> (
        device: String, records: [TrailRecord]
    ) {
        var s = JSONScanner(bytes)
        var device: String?
        var records: [TrailRecord] = []
        var ids: [String?] = []
        var sawRecords = false
        try s.members { (s, key) throws(FormatsError) in
            switch key {
            case "device":
                guard case .string(let d) = try s.value() else {
                    throw FormatsError(.invalid, "device: expected a string")
                }
                device = d
            case "records":
                sawRecords = true
                try s.elements { (s) throws(FormatsError) in
                    let (r, id) = try record(&s, index: records.count)
                    records.append(r)
                    ids.append(id)
                }
            default:
                try s.skipValue()
            }
        }
        guard s.atEnd else { throw s.fail("text after the object") }
        guard let device else { throw FormatsError(.invalid, "device: missing") }
        guard sawRecords else { throw FormatsError(.invalid, "records: missing") }
        for i in records.indices {
            records[i].device = device
            // The id, when given, must be device:seq (checked now that the device is known).
            if let id = ids[i], id != records[i].id {
                throw FormatsError(.invalid, "records[\(i)].id: '\(id)' is not device:seq ('\(records[i].id)')")
            }
            if var problem = records[i].problem(now: now) {
                problem.message = "records[\(i)]: " + problem.message
                throw problem
            }
        }
        return (device, records)
    }

    /// One record object; the device is filled in by the caller.
    static func record(_ s: inout JSONScanner, index: Int) throws(FormatsError) -> (TrailRecord, String?) {
        var id: String?
        var seq: Int64?
        var kind: TrailRecord.Kind?
        var region: String?
        var time: Double?
        var lat: Double?, lon: Double?
        var alt: Double?, hAcc: Double?, vAcc: Double?, speed: Double?, course: Double?
        var span = TrailRecord.Span()
        func number(_ v: JSONScanner.Value, _ key: String) throws(FormatsError) -> Double? {
            switch v {
            case .number(let d): return d
            case .null: return nil
            default: throw FormatsError(.invalid, "records[\(index)].\(key): expected a number")
            }
        }
        try s.members { (s, key) throws(FormatsError) in
            let v = try s.value()
            switch key {
            case "id":
                switch v {
                case .string(let text): id = text
                case .null: break
                default: throw FormatsError(.invalid, "records[\(index)].id: expected a string")
                }
            case "seq":
                if case .null = v {
                    seq = 0
                    break
                }
                guard let d = try number(v, key), d == d.rounded(), abs(d) < 9e15 else {
                    throw FormatsError(.invalid, "records[\(index)].seq: expected an integer")
                }
                guard d >= 1 else {
                    throw FormatsError(
                        .invalidRecord, "records[\(index)]: seq must be 1 or more (or null: none), got \(Int64(d))",
                        field: "seq")
                }
                seq = Int64(d)
            case "kind":
                guard case .string(let k) = v else {
                    throw FormatsError(.invalid, "records[\(index)].kind: expected a string")
                }
                guard let parsed = TrailRecord.Kind(rawValue: k) else {
                    throw FormatsError(
                        .invalid,
                        "records[\(index)].kind: '\(k)' is not location, enter, exit, dwell, visit, trip or heartbeat")
                }
                kind = parsed
            case "region":
                switch v {
                case .string(let r): region = r
                case .null: region = nil
                default: throw FormatsError(.invalid, "records[\(index)].region: expected a string")
                }
            case "time":
                guard case .string(let t) = v else {
                    throw FormatsError(.invalid, "records[\(index)].time: expected a string")
                }
                guard let parsed = ISOTime.parse(t) else {
                    throw FormatsError(.invalid, "records[\(index)].time: '\(t)' is not an ISO 8601 UTC time")
                }
                time = parsed
            case "lat": lat = try number(v, key)
            case "lon": lon = try number(v, key)
            case "alt": alt = try number(v, key)
            case "hAcc": hAcc = try number(v, key)
            case "vAcc": vAcc = try number(v, key)
            case "speed": speed = try number(v, key)
            case "course": course = try number(v, key)
            default: _ = try readSpan(key, v, into: &span, index: index)
            }
        }
        func missing(_ key: String) -> FormatsError { FormatsError(.invalid, "records[\(index)].\(key): missing") }
        guard let seq else { throw missing("seq") }
        guard let kind else { throw missing("kind") }
        guard let time else { throw missing("time") }
        guard let lat else { throw missing("lat") }
        guard let lon else { throw missing("lon") }
        var record = TrailRecord(
            device: "", sequence: seq, kind: kind, region: region, time: time, latitude: lat,
            longitude: lon, altitude: alt, horizontalAccuracy: hAcc, verticalAccuracy: vAcc,
            speed: speed, course: course)
        // Only visits and trips have a span: for other kinds its keys are unknown keys, ignored.
        if kind.isVisitOrTrip { record.span = span }
        return (record, id)
    }
}

extension JSONBatch {
    /// The endpoint's answer.
    public struct Reply: Hashable, Sendable {
        public var accepted: Int
        public var duplicates: Int
        public init(accepted: Int, duplicates: Int) {
            self.accepted = accepted
            self.duplicates = duplicates
        }
    }
}

extension JSONBatch.Reply {
    /// The endpoint's acknowledgement: any JSON object with a whole, non-negative `accepted` member
    /// (`duplicates` 0 when absent), whatever its whitespace or key order (`{"accepted": 125,
    /// "duplicates": 0}` as Python's `json.dumps` writes it); `nil` for anything else, a captive
    /// portal's HTML page included. Read by the same scanner the endpoint reads batches with.
    public static func decode(_ bytes: [UInt8]) -> JSONBatch.Reply? {
        var s = JSONScanner(bytes)
        var accepted: Int?
        var duplicates = 0
        func count(_ v: JSONScanner.Value) -> Int? {
            guard case .number(let d) = v, d >= 0, d == d.rounded(), d < 9e15 else { return nil }
            return Int(d)
        }
        do {
            try s.members { (s, key) throws(FormatsError) in
                switch key {
                case "accepted":
                    guard let n = count(try s.value()) else { throw s.fail("accepted: expected a count") }
                    accepted = n
                case "duplicates":
                    guard let n = count(try s.value()) else { throw s.fail("duplicates: expected a count") }
                    duplicates = n
                default:
                    try s.skipValue()
                }
            }
            guard s.atEnd else { return nil }
        } catch {
            return nil
        }
        return accepted.map { JSONBatch.Reply(accepted: $0, duplicates: duplicates) }
    }
}
