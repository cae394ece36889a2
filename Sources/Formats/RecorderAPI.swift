import Geo

/// The OwnTracks Recorder's read API as clients see it (`/api/0/...`, read from the Recorder's
/// `http.c` and `storage.c`): its names for devices, its times and its location objects.
///
/// Names: the Recorder files each device under a user (`owntracks/USER/DEVICE`). A device id
/// `USER/DEVICE` (how OwnTracks messages are stored) is that user's device, split at its first
/// `/`; any other id (`van-1`, an IMEI) is a user of its own with one device of the same name.
public enum RecorderAPI {
    /// The user and device names the Recorder API shows for a stored device id:
    /// `anna/phone` is `anna`'s `phone`; `van-1` (no `/`, or nothing on one side of it) is
    /// `van-1`'s `van-1`.
    public static func names(of id: String) -> (user: String, device: String) {
        if let slash = id.firstIndex(of: "/") {
            let user = id[..<slash], device = id[id.index(after: slash)...]
            if !user.isEmpty && !device.isEmpty { return (String(user), String(device)) }
        }
        return (id, id)
    }

    /// The stored device ids a Recorder request for `user`'s `device` may mean, the likeliest first:
    /// `user/device`; `user` alone when both are the same name; then the same in lower case (the
    /// Recorder lowercases what it is asked). ``names(of:)`` of each gives back `user` and `device`
    /// (up to case). None holds a NUL (no stored id does, and databases refuse them in queries).
    public static func deviceIDs(user: String, device: String) -> [String] {
        guard !user.utf8.contains(0), !device.utf8.contains(0) else { return [] }
        var ids: [String] = []
        for (u, d) in [(user, device), (user.lowercased(), device.lowercased())] {
            for id in [u + "/" + d] + (u == d ? [u] : []) where !ids.contains(id) && names(of: id) == (u, d) {
                ids.append(id)
            }
        }
        return ids
    }

    /// The MQTT topic the Recorder would have filed a device under: `owntracks/USER/DEVICE`.
    public static func topic(of id: String) -> String {
        let (user, device) = names(of: id)
        return "owntracks/\(user)/\(device)"
    }

    /// Reads a time as the Recorder does (`make_times` in its `storage.c`): UTC,
    /// `YYYY-MM-DDTHH:MM:SS`, `YYYY-MM-DDTHH:MM`, `YYYY-MM-DDTHH`, `YYYY-MM-DD` or `YYYY-MM` (the
    /// first day), `T` or `t`, one or two digits after the year; also with fractional seconds and a
    /// final `Z` (what JavaScript's `toISOString` writes). `nil` for anything else, for a day the
    /// month doesn't have and for a year outside 0001-9999 (the Recorder reads `2024-02-31` as
    /// 2 March; it ignores what follows a time, so `...+02:00` is refused here rather than misread).
    ///
    /// - Complexity: O(n) in the text's length, which is at most 40 bytes.
    public static func parseTime(_ text: some StringProtocol) -> Double? {
        let b = Array(text.utf8)
        guard b.count <= 40 else { return nil }
        var i = 0
        /// One or two digits (at most `n` when not 2), at `i`.
        func number(maxDigits: Int) -> Int? {
            var v = 0, n = 0
            while i < b.count, n < maxDigits, b[i] >= 48, b[i] <= 57 {
                v = v * 10 + Int(b[i] - 48)
                n += 1
                i += 1
            }
            return n == 0 ? nil : v
        }
        func take(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = number(maxDigits: 4), i == 4, year >= 1, take(45), let month = number(maxDigits: 2),
            (1...12).contains(month)
        else { return nil }
        var day = 1, hour = 0, minute = 0, second = 0
        var fraction = 0.0
        if take(45) {
            guard let d = number(maxDigits: 2), d >= 1, d <= ISOTime.daysInMonth(year: year, month: month) else {
                return nil
            }
            day = d
            if take(84) || take(116) {  // T or t
                guard let h = number(maxDigits: 2), h < 24 else { return nil }
                hour = h
                if take(58) {
                    guard let m = number(maxDigits: 2), m < 60 else { return nil }
                    minute = m
                    if take(58) {
                        guard let s = number(maxDigits: 2), s <= 60 else { return nil }
                        second = s
                        if take(46) {
                            guard let f = ISOTime.fraction(b, at: &i) else { return nil }
                            fraction = f
                        }
                    }
                }
                _ = take(90)  // Z
            }
        }
        guard i == b.count else { return nil }
        let days = GNSSTime.daysFromCivil(year: year, month: month, day: day)
        let t = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + second) + fraction
        return ISOTime.representable.contains(t) ? t : nil
    }

    /// `2019-09-18T21:10:29Z`: the Recorder's `isotst` (whole seconds, UTC).
    public static func appendISOTime(_ seconds: Double, to out: inout [UInt8], separator: UInt8 = 84, zone: Bool = true)
    {
        guard ISOTime.representable.contains(seconds) else {
            out.append(contentsOf: "\(seconds)".utf8)
            return
        }
        let whole = Int64(seconds.rounded(.down))
        var day = whole / 86_400, rest = whole % 86_400
        if rest < 0 {
            day -= 1
            rest += 86_400
        }
        var iso: [UInt8] = []
        GNSSTime(day: Int32(day), nanosecondOfDay: rest * 1_000_000_000, fractionDigits: 0).appendISO8601(to: &iso)
        // GNSSTime writes YYYY-MM-DDTHH:MM:SSZ.
        if let z = iso.lastIndex(of: 90) { iso.remove(at: z) }
        if let t = iso.firstIndex(of: 84) { iso[t] = separator }
        out.append(contentsOf: iso)
        if zone { out.append(90) }
    }

    /// The geohash of a position (base 32, `precision` characters; the Recorder's `ghash`, whose
    /// default precision is 7).
    public static func geohash(latitude: Double, longitude: Double, precision: Int = 7) -> String {
        let alphabet = Array("0123456789bcdefghjkmnpqrstuvwxyz".utf8)
        var lat = (-90.0, 90.0), lon = (-180.0, 180.0)
        var out: [UInt8] = []
        var bits = 0, value = 0, even = true
        /// One bit: which half of `range` holds `v`, the range narrowed to it.
        func bisect(_ v: Double, _ range: inout (Double, Double)) {
            let mid = (range.0 + range.1) / 2
            if v >= mid {
                value = value << 1 | 1
                range.0 = mid
            } else {
                value <<= 1
                range.1 = mid
            }
        }
        while out.count < precision {
            if even { bisect(longitude, &lon) } else { bisect(latitude, &lat) }
            even.toggle()
            bits += 1
            if bits == 5 {
                out.append(alphabet[value])
                bits = 0
                value = 0
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Attributes written as JSON strings whatever they look like (OwnTracks' text fields); the
    /// other attributes that read as numbers (`batt`, `bs`, `m`...) are written as numbers.
    static let textAttributes: Set<String> = [
        "tid", "conn", "SSID", "BSSID", "t", "tag", "poi", "desc", "event", "_id", "addr", "cc", "trigger",
    ]

    /// The members the location object itself writes; an attribute with one of these names is left out.
    static let ownMembers: Set<String> = [
        "_type", "tst", "lat", "lon", "acc", "alt", "vac", "vel", "cog", "tid", "topic", "username", "device",
        "ghash", "isotst", "disptst", "isorcv",
    ]

    /// Appends a record as the Recorder's location object: `_type`, `tst` (whole seconds), `lat`,
    /// `lon`, `acc`, `alt`, `vac`, `vel` (km/h), `cog` (as OwnTracks sends them: whole numbers), `tid`
    /// (the record's own, or ``OwnTracks/trackerID(_:)``), the attributes the sender gave (`batt`,
    /// `conn`, ...), `topic`, `username`, `device`, `ghash`, `isotst`, `disptst`, and `isorcv`
    /// with `received`. With `fields`, only the members it names (the Recorder's `fields=`).
    public static func appendLocation(
        _ r: TrailRecord, received: Bool = true, fields: Set<String>? = nil,
        to out: inout [UInt8]
    ) {
        var first = true
        func key(_ name: String) -> Bool {
            if let fields, !fields.contains(name) { return false }
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            ByteWriting.appendJSONString(name, to: &out)
            out.append(UInt8(ascii: ":"))
            return true
        }
        func int(_ name: String, _ v: Double?) {
            guard let v, v.isFinite, abs(v) < 9e15, key(name) else { return }
            ByteWriting.appendInt(Int64(v.rounded()), to: &out)
        }
        func text(_ name: String, _ v: String) {
            guard key(name) else { return }
            ByteWriting.appendJSONString(v, to: &out)
        }
        text("_type", "location")
        if key("tst") { ByteWriting.appendInt(Int64(r.time.rounded(.down)), to: &out) }
        if key("lat") { ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out) }
        if key("lon") { ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out) }
        int("acc", r.horizontalAccuracy)
        int("alt", r.altitude)
        int("vac", r.verticalAccuracy)
        int("vel", r.speed.map { $0 * 3.6 })
        int("cog", r.course)
        text("tid", r.attributes["tid"] ?? OwnTracks.trackerID(names(of: r.device).device))
        for (name, value) in r.attributes.sorted(by: { $0.key < $1.key }) where !ownMembers.contains(name) {
            if !textAttributes.contains(name), isJSONNumber(value) {
                guard key(name) else { continue }
                out.append(contentsOf: value.utf8)
            } else {
                text(name, value)
            }
        }
        let (user, device) = names(of: r.device)
        text("topic", "owntracks/\(user)/\(device)")
        text("username", user)
        text("device", device)
        text("ghash", geohash(latitude: r.latitude, longitude: r.longitude))
        if key("isotst") { quoted { appendISOTime(r.time, to: &out) } }
        if key("disptst") { quoted { appendISOTime(r.time, to: &out, separator: 32, zone: false) } }
        if received, key("isorcv") { quoted { appendISOTime(r.time, to: &out) } }
        if first { out.append(UInt8(ascii: "{")) }
        out.append(UInt8(ascii: "}"))

        func quoted(_ body: () -> Void) {
            out.append(UInt8(ascii: "\""))
            body()
            out.append(UInt8(ascii: "\""))
        }
    }

    /// Whether `text` is a JSON number as written (`-12`, `3.5`, `1e3`), at most 32 bytes.
    static func isJSONNumber(_ text: String) -> Bool {
        let b = Array(text.utf8)
        guard !b.isEmpty, b.count <= 32 else { return false }
        var i = 0
        func digits() -> Int {
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 { i += 1 }
            return i - start
        }
        if b[i] == 45 { i += 1 }
        let start = i
        let n = digits()
        guard n > 0, !(n > 1 && b[start] == 48) else { return false }
        if i < b.count, b[i] == 46 {
            i += 1
            guard digits() > 0 else { return false }
        }
        if i < b.count, b[i] == 101 || b[i] == 69 {
            i += 1
            if i < b.count, b[i] == 43 || b[i] == 45 { i += 1 }
            guard digits() > 0 else { return false }
        }
        return i == b.count
    }
}
