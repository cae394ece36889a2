/// Traccar's OsmAnd protocol: one location per HTTP request, as query parameters (`GET /?id=...`)
/// or a form body (`POST /`, `application/x-www-form-urlencoded`), or the JSON body Traccar Client
/// posts (``decodeJSON(_:now:)``).
///
/// Parameters we send: `id` (device), `timestamp` (Unix seconds; Traccar reads values at or above
/// 2^31 as milliseconds, which we send when a time has a fraction), `lat`, `lon`, `speed` (knots),
/// `bearing` (°), `altitude` (m), `accuracy` (m). A region transition is not a position of its own:
/// it goes as `event=geofenceEnter|geofenceExit|geofenceDwell&geofence=REGION` on the position of
/// the location that decided it (``parameters(_:events:)``); further transitions of the same
/// location as `event2`/`geofence2`, ... The protocol has no record id; a server makes storage
/// idempotent by device, time and position (Traccar does not: docs/uploads.md, "What it guarantees, and how").
///
/// Read as Traccar reads it: `id` or `deviceid`; `lat`+`lon` or `location=lat,lon`; `timestamp` as
/// Unix seconds (milliseconds from 2^31), ISO 8601 with any offset, `yyyy-MM-dd HH:mm:ss` (UTC), or
/// absent (the time of receipt); `bearing` or `heading`; a negative speed, bearing or accuracy is
/// unknown; `valid=false` marks the position invalid; every other parameter (`hdop`, `batt`,
/// `charge`, `driverUniqueId`, ...) is kept as an attribute (`token`, our credential, is not).
public enum OsmAnd {
    public static let metresPerSecondPerKnot = 1852.0 / 3600.0

    /// The parameters of one record, percent-encoded: `id=van-1&timestamp=...`.
    public static func parameters(_ r: TrailRecord) -> String {
        r.kind.isPosition ? parameters(r, events: []) : parameters(r, events: [r])
    }

    /// Traccar's name for a transition (an attribute: Traccar raises its own geofence events).
    public static func eventName(_ kind: TrailRecord.Kind) -> String {
        switch kind {
        case .enter: "geofenceEnter"
        case .exit: "geofenceExit"
        case .dwell: "geofenceDwell"
        case .location, .heartbeat: "location"
        // Never sent: OsmAnd carries positions only (Traccar computes its own trips and stops).
        case .visit: "visit"
        case .trip: "trip"
        }
    }

    /// The parameters of the position `r` with `events` (region transitions it decided) as
    /// attributes. A transition's position is the location that decided it, at that location's
    /// time (``TrailRecord/decidedAt``), never the (earlier) time of the crossing.
    public static func parameters(_ r: TrailRecord, events: [TrailRecord]) -> String {
        var pairs: [(String, String)] = [("id", r.device)]
        let time = r.kind.isPosition ? r.time : (r.decidedAt ?? r.time)
        let ms = (time * 1000).rounded()
        if ms.isFinite && abs(ms) < 9e15 {
            let whole = ms.truncatingRemainder(dividingBy: 1000) == 0
            pairs.append(("timestamp", whole ? String(Int64(ms / 1000)) : String(Int64(ms))))
        }
        // A number the fixed-point writer can't show (it would write `null`, which Traccar's
        // parseDouble refuses) is left out; records are validated before they get here.
        func add(_ key: String, _ v: Double?, _ digits: Int) {
            guard let v, v.isFinite, abs(v) < 1e9 else { return }
            pairs.append((key, formatFixed(v, digits)))
        }
        add("lat", r.latitude, 9)
        add("lon", r.longitude, 9)
        add("speed", r.speed.map { $0 / metresPerSecondPerKnot }, 3)
        add("bearing", r.course, 2)
        add("altitude", r.altitude, 3)
        add("accuracy", r.horizontalAccuracy, 2)
        for (i, e) in events.enumerated() {
            let suffix = i == 0 ? "" : String(i + 1)
            pairs.append(("event" + suffix, eventName(e.kind)))
            pairs.append(("geofence" + suffix, e.region ?? ""))
        }
        return pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    /// The parameters read as position fields; every other one is an attribute.
    static let fieldNames: Set<String> = [
        "id", "deviceid", "timestamp", "lat", "lon", "location", "speed", "bearing", "heading", "altitude",
        "accuracy", "valid", "token",
    ]

    /// A record from OsmAnd parameters (query or form), received at `now` and validated against it.
    ///
    /// - Throws: ``FormatsError`` naming the parameter.
    public static func decode(_ query: String, now: Double) throws(FormatsError) -> TrailRecord {
        try TrailRecord.checked(read(query, now: now), now: now)
    }

    /// The record OsmAnd parameters hold, as sent: ``decode(_:now:)`` before its values are checked
    /// (``TrailRecord/problem(now:)``), so that the endpoint can authorize the record's device before
    /// it judges what the device sent.
    ///
    /// - Throws: ``FormatsError`` naming the parameter that can't be read.
    public static func read(_ query: String, now: Double) throws(FormatsError) -> TrailRecord {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = percentDecodeValidating(String(parts[0])),
                let value = parts.count > 1 ? percentDecodeValidating(String(parts[1])) : ""
            else {
                throw FormatsError(.invalid, "parameter '\(parts[0].prefix(32))': not valid UTF-8 once percent-decoded")
            }
            fields[key] = value
        }
        guard let device = fields["id"] ?? fields["deviceid"], !device.isEmpty else {
            throw FormatsError(.invalid, "id: missing (the device identifier is mandatory)")
        }
        func number(_ key: String) throws(FormatsError) -> Double? {
            guard let text = fields[key] else { return nil }
            guard let v = Double(text), v.isFinite else {
                throw FormatsError(.invalid, "\(key): '\(text.prefix(32))' is not a number")
            }
            return v
        }
        var lat = try number("lat"), lon = try number("lon")
        if lat == nil, lon == nil, let location = fields["location"] {
            let parts = location.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2, let a = Double(parts[0].trimmingSpaces), let b = Double(parts[1].trimmingSpaces),
                a.isFinite, b.isFinite
            else { throw FormatsError(.invalid, "location: '\(location.prefix(64))' is not 'lat,lon'") }
            (lat, lon) = (a, b)
        }
        guard let lat else { throw FormatsError(.invalid, "lat: missing (send lat and lon, or location=lat,lon)") }
        guard let lon else { throw FormatsError(.invalid, "lon: missing (send lat and lon, or location=lat,lon)") }
        let time: Double
        if let stamp = fields["timestamp"], !stamp.isEmpty {
            guard let t = parseTime(stamp) else {
                throw FormatsError(
                    .invalid,
                    "timestamp: '\(stamp.prefix(40))' is neither Unix seconds, milliseconds, "
                        + "ISO 8601 nor yyyy-MM-dd HH:mm:ss")
            }
            time = t
        } else {
            time = now
        }
        func unknownIfNegative(_ v: Double?) -> Double? { v.flatMap { $0 < 0 ? nil : $0 } }
        var bearing = try number("bearing")
        if bearing == nil { bearing = try number("heading") }
        var r = TrailRecord(
            device: device, sequence: 1, time: time, latitude: lat, longitude: lon,
            altitude: try number("altitude"), horizontalAccuracy: unknownIfNegative(try number("accuracy")),
            speed: unknownIfNegative(try number("speed")).map { $0 * metresPerSecondPerKnot },
            course: unknownIfNegative(bearing))
        if let valid = fields["valid"] { r.valid = valid.lowercased() == "true" || valid == "1" }
        // Attributes as Traccar keeps them; one no store could keep (a name with control characters,
        // a value over 1 KiB, past 64 of them) is left out rather than the position refused.
        for (key, value) in fields.sorted(by: { $0.key < $1.key })
        where !fieldNames.contains(key) && r.attributes.count < TrailRecord.maxAttributes
            && TrailRecord.identifierProblem(key) == nil && value.utf8.count <= TrailRecord.maxAttributeBytes
            && !value.utf8.contains(0)
        {
            r.attributes[key] = value
        }
        return r
    }

    /// A time as Traccar reads `timestamp`: a number (seconds; milliseconds from 2^31), ISO 8601
    /// with `T` and any offset (none is UTC), or `yyyy-MM-dd HH:mm:ss` (UTC).
    public static func parseTime(_ text: String) -> Double? {
        if let n = Double(text), n.isFinite { return n >= 2_147_483_648 ? n / 1000 : n }
        return ISOTime.parse(text, anyOffset: true)
    }

    /// A record from the JSON body Traccar Client posts (`Content-Type: application/json`):
    /// `{"location":{"timestamp":ISO,"coords":{"latitude","longitude","speed" (m/s),"heading",
    /// "altitude","accuracy"},"is_moving","odometer","battery":{"level","is_charging"},"activity":
    /// {"type"},"event"},"device_id":ID}`. A negative speed or heading is unknown; the other members
    /// (`is_moving`, `odometer`, `battery.level`, `activity.type`, and any others that are text,
    /// numbers or booleans) are kept as attributes, nested names joined with dots.
    ///
    /// - Throws: ``FormatsError`` naming the member.
    public static func decodeJSON(_ bytes: [UInt8], now: Double) throws(FormatsError) -> TrailRecord {
        try TrailRecord.checked(readJSON(bytes, now: now), now: now)
    }

    /// The record a Traccar Client body holds, as sent: ``decodeJSON(_:now:)`` before its values are
    /// checked (see ``read(_:now:)``).
    ///
    /// - Throws: ``FormatsError`` naming the member that can't be read.
    public static func readJSON(_ bytes: [UInt8], now: Double) throws(FormatsError) -> TrailRecord {
        var values: [String: JSONScanner.Value] = [:]
        var s = JSONScanner(bytes)
        func object(_ s: inout JSONScanner, _ prefix: String, depth: Int) throws(JSONScanner.Failure) {
            try s.members { (s, name) throws(FormatsError) in
                let key = prefix + name
                s.skipWhitespace()
                if depth < 4, s.i < s.bytes.count, s.bytes[s.i] == UInt8(ascii: "{") {
                    try object(&s, key + ".", depth: depth + 1)
                } else {
                    let v = try s.value()
                    if values.count < 4 * TrailRecord.maxAttributes { values[key] = v }
                }
            }
        }
        do {
            try object(&s, "", depth: 0)
            guard s.atEnd else { throw s.fail("text after the object") }
        }
        func number(_ key: String) throws(FormatsError) -> Double? {
            switch values[key] {
            case nil, .null?: return nil
            case .number(let d)?: return d
            case .string(let t)?:
                guard let d = Double(t), d.isFinite else {
                    throw FormatsError(.invalid, "\(key): '\(t.prefix(32))' is not a number")
                }
                return d
            default: throw FormatsError(.invalid, "\(key): expected a number")
            }
        }
        func text(_ key: String) -> String? {
            switch values[key] {
            case .string(let t)?: t
            case .number(let d)?: d == d.rounded() && abs(d) < 9e15 ? String(Int64(d)) : "\(d)"
            default: nil
            }
        }
        guard let device = text("device_id") ?? text("id"), !device.isEmpty else {
            throw FormatsError(.invalid, "device_id: missing (the device identifier is mandatory)")
        }
        guard let lat = try number("location.coords.latitude") else {
            throw FormatsError(.invalid, "location.coords.latitude: missing")
        }
        guard let lon = try number("location.coords.longitude") else {
            throw FormatsError(.invalid, "location.coords.longitude: missing")
        }
        var time = now
        if let stamp = text("location.timestamp") {
            guard let t = parseTime(stamp) else {
                throw FormatsError(.invalid, "location.timestamp: '\(stamp.prefix(40))' is not an ISO 8601 time")
            }
            time = t
        }
        func unknownIfNegative(_ v: Double?) -> Double? { v.flatMap { $0 < 0 ? nil : $0 } }
        var r = TrailRecord(
            device: device, sequence: 1, time: time, latitude: lat, longitude: lon,
            altitude: try number("location.coords.altitude"),
            horizontalAccuracy: unknownIfNegative(try number("location.coords.accuracy")),
            speed: unknownIfNegative(try number("location.coords.speed")),
            course: unknownIfNegative(try number("location.coords.heading")))
        let read: Set<String> = [
            "device_id", "id", "location.timestamp", "location.coords.latitude",
            "location.coords.longitude", "location.coords.altitude", "location.coords.accuracy",
            "location.coords.speed", "location.coords.heading",
        ]
        for (key, v) in values where !read.contains(key) {
            TrailRecord.keepAttribute(key.hasPrefix("location.") ? String(key.dropFirst(9)) : key, v, in: &r.attributes)
        }
        return r
    }
}

/// RFC 3986 unreserved characters pass; everything else is `%XX`.
public func percentEncode(_ s: String) -> String {
    var out = ""
    for b in s.utf8 {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: ":"):
            out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            let hex = Array("0123456789ABCDEF".utf8)
            out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
        }
    }
    return out
}

/// Decodes `%XX` and `+` (a space in forms); `nil` when the bytes decoded are not valid UTF-8
/// (`%FF`), which ``percentDecode(_:)`` would quietly replace with U+FFFD.
public func percentDecodeValidating(_ s: String) -> String? {
    let bytes = percentDecodedBytes(s)
    return invalidUTF8Offset(bytes[...]) == nil ? String(decoding: bytes, as: UTF8.self) : nil
}

/// Decodes `%XX` and `+` (a space in forms).
public func percentDecode(_ s: String) -> String {
    String(decoding: percentDecodedBytes(s), as: UTF8.self)
}

func percentDecodedBytes(_ s: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var it = Array(s.utf8)[...]
    while let b = it.popFirst() {
        if b == UInt8(ascii: "+") {
            bytes.append(32)
        } else if b == UInt8(ascii: "%"), it.count >= 2, let h = hexValue(it[it.startIndex]),
            let l = hexValue(it[it.startIndex + 1])
        {
            bytes.append(h << 4 | l)
            it = it.dropFirst(2)
        } else {
            bytes.append(b)
        }
    }
    return bytes
}

func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): b - 48
    case UInt8(ascii: "a")...UInt8(ascii: "f"): b - 87
    case UInt8(ascii: "A")...UInt8(ascii: "F"): b - 55
    default: nil
    }
}
