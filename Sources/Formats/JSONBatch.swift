import FoundationEssentials

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
/// `dwell` (the last three with `region`); `alt`, `hAcc`, `vAcc`, `speed` (m/s) and `course` (°)
/// may be null or absent. The endpoint answers `{"accepted":N,"duplicates":M}`.
public enum JSONBatch {
    /// The batch's body.
    public static func encode(device: String, records: some Collection<TrailRecord>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + records.count * 220)
        ByteWriting.appendStatic("{\"device\":", to: &out)
        ByteWriting.appendJSONString(device, to: &out)
        ByteWriting.appendStatic(",\"records\":[", to: &out)
        var first = true
        for r in records {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            append(r, to: &out)
        }
        ByteWriting.appendStatic("]}", to: &out)
        return out
    }

    /// One record as a JSON object.
    public static func append(_ r: TrailRecord, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"id\":", to: &out)
        ByteWriting.appendJSONString(r.id, to: &out)
        ByteWriting.appendStatic(",\"seq\":", to: &out)
        ByteWriting.appendInt(r.sequence, to: &out)
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
        out.append(UInt8(ascii: "}"))
    }

    static func optional(_ key: StaticString, _ v: Double?, _ decimals: Int, _ out: inout [UInt8]) {
        ByteWriting.appendStatic(key, to: &out)
        if let v { ByteWriting.appendFixed(v, decimals: decimals, to: &out) } else {
            ByteWriting.appendStatic("null", to: &out)
        }
    }

    struct Wire: Decodable {
        var device: String
        var records: [Record]
        struct Record: Decodable {
            var id: String?
            var seq: Int64
            var kind: String
            var region: String?
            var time: String
            var lat: Double
            var lon: Double
            var alt: Double?
            var hAcc: Double?
            var vAcc: Double?
            var speed: Double?
            var course: Double?
        }
    }

    /// Reads a batch, validating every record against `now` (see ``TrailRecord/problem(now:)``).
    ///
    /// - Throws: ``WireFormatError`` naming the record and field (`records[3].lat: ...`), or what
    ///   makes the JSON unreadable.
    public static func decode(_ bytes: [UInt8], now: Double) throws(WireFormatError) -> (device: String, records: [TrailRecord]) {
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw WireFormatError(describe(error))
        } catch {
            throw WireFormatError("malformed JSON: \(error)")
        }
        var records: [TrailRecord] = []
        records.reserveCapacity(wire.records.count)
        for (i, w) in wire.records.enumerated() {
            guard let kind = TrailRecord.Kind(rawValue: w.kind) else {
                throw WireFormatError("records[\(i)].kind: '\(w.kind)' is not location, enter, exit or dwell")
            }
            guard let time = ISOTime.parse(w.time) else {
                throw WireFormatError("records[\(i)].time: '\(w.time)' is not an ISO 8601 UTC time")
            }
            let r = TrailRecord(device: wire.device, sequence: w.seq, kind: kind, region: w.region, time: time,
                                latitude: w.lat, longitude: w.lon, altitude: w.alt, horizontalAccuracy: w.hAcc,
                                verticalAccuracy: w.vAcc, speed: w.speed, course: w.course)
            if let id = w.id, id != r.id {
                throw WireFormatError("records[\(i)].id: '\(id)' is not device:seq ('\(r.id)')")
            }
            if let problem = r.problem(now: now) { throw WireFormatError("records[\(i)]: \(problem)") }
            records.append(r)
        }
        return (wire.device, records)
    }

    /// A decoding error as a sentence with its JSON path.
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            var s = ""
            for k in keys {
                if let i = k.intValue { s += "[\(i)]" } else { s += (s.isEmpty ? "" : ".") + k.stringValue }
            }
            return s.isEmpty ? "the body" : s
        }
        switch error {
        case .keyNotFound(let key, let c): return "\(path(c.codingPath + [key])): missing"
        case .valueNotFound(_, let c): return "\(path(c.codingPath)): missing (null)"
        case .typeMismatch(let type, let c): return "\(path(c.codingPath)): expected \(type)"
        case .dataCorrupted(let c):
            return c.codingPath.isEmpty ? "malformed JSON" : "\(path(c.codingPath)): \(c.debugDescription)"
        @unknown default: return "malformed JSON"
        }
    }
}

extension JSONBatch {
    /// The endpoint's answer.
    public struct Reply: Codable, Hashable, Sendable {
        public var accepted: Int
        public var duplicates: Int
        public init(accepted: Int, duplicates: Int) {
            self.accepted = accepted
            self.duplicates = duplicates
        }
    }
}
