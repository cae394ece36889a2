/// Traccar's OsmAnd protocol: one location per HTTP request, as query parameters (`GET /?id=...`)
/// or a form body (`POST /`, `application/x-www-form-urlencoded`).
///
/// Parameters: `id` (device), `timestamp` (Unix seconds; Traccar reads values at or above 2^31 as
/// milliseconds, which we send when a time has a fraction), `lat`, `lon`, `speed` (knots),
/// `bearing` (°), `altitude` (m), `accuracy` (m). Region transitions have no OsmAnd form: they
/// are sent as the location they happened at. The protocol has no record id; a server makes
/// storage idempotent by device and time.
public enum OsmAnd {
    public static let metresPerSecondPerKnot = 1852.0 / 3600.0

    /// The parameters of one record, percent-encoded: `id=van-1&timestamp=...`.
    public static func parameters(_ r: TrailRecord) -> String {
        var pairs: [(String, String)] = [("id", r.device)]
        let ms = (r.time * 1000).rounded()
        let whole = ms.truncatingRemainder(dividingBy: 1000) == 0
        pairs.append(("timestamp", whole ? String(Int64(ms / 1000)) : String(Int64(ms))))
        pairs.append(("lat", decimal(r.latitude, 9)))
        pairs.append(("lon", decimal(r.longitude, 9)))
        if let v = r.speed { pairs.append(("speed", decimal(v / metresPerSecondPerKnot, 3))) }
        if let c = r.course { pairs.append(("bearing", decimal(c, 2))) }
        if let a = r.altitude { pairs.append(("altitude", decimal(a, 3))) }
        if let a = r.horizontalAccuracy { pairs.append(("accuracy", decimal(a, 2))) }
        return pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }

    /// A record from OsmAnd parameters (query or form), validated against `now`.
    ///
    /// - Throws: ``WireFormatError`` naming the parameter.
    public static func decode(_ query: String, now: Double) throws(WireFormatError) -> TrailRecord {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let key = percentDecodeValidating(String(parts[0])),
                  let value = parts.count > 1 ? percentDecodeValidating(String(parts[1])) : ""
            else {
                throw WireFormatError("parameter '\(parts[0].prefix(32))': not valid UTF-8 once percent-decoded")
            }
            fields[key] = value
        }
        guard let device = fields["id"] ?? fields["deviceid"], !device.isEmpty else {
            throw WireFormatError("id: missing (the device identifier is mandatory)")
        }
        func number(_ key: String) throws(WireFormatError) -> Double? {
            guard let text = fields[key] else { return nil }
            guard let v = Double(text), v.isFinite else { throw WireFormatError("\(key): '\(text)' is not a number") }
            return v
        }
        guard let lat = try number("lat") else { throw WireFormatError("lat: missing") }
        guard let lon = try number("lon") else { throw WireFormatError("lon: missing") }
        guard let stamp = fields["timestamp"] else { throw WireFormatError("timestamp: missing") }
        let time: Double
        if let n = Double(stamp), n.isFinite {
            time = n >= 2_147_483_648 ? n / 1000 : n
        } else if let t = ISOTime.parse(stamp) {
            time = t
        } else {
            throw WireFormatError("timestamp: '\(stamp)' is neither Unix seconds, milliseconds nor ISO 8601")
        }
        let r = TrailRecord(device: device, sequence: 1, time: time, latitude: lat, longitude: lon,
                            altitude: try number("altitude"), horizontalAccuracy: try number("accuracy"),
                            speed: try number("speed").map { $0 * metresPerSecondPerKnot },
                            course: try number("bearing"))
        if let problem = r.problem(now: now) { throw WireFormatError(problem) }
        return r
    }
}

/// Fixed decimals without exponent notation, trailing zeros kept short (`48.137366333`).
func decimal(_ v: Double, _ digits: Int) -> String {
    var out: [UInt8] = []
    ByteWriting.appendFixed(v, decimals: digits, to: &out)
    return String(decoding: out, as: UTF8.self)
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
                  let l = hexValue(it[it.startIndex + 1]) {
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
