import Geo

/// OwnTracks' HTTP JSON: one object per request (`POST`, `Content-Type: application/json`), the
/// user and device in `X-Limit-U` and `X-Limit-D` headers; the Recorder answers `[]`.
///
/// Locations are `{"_type":"location","tst":...,"lat":...,"lon":...,"acc":...,"alt":...,"vel":...,
/// "cog":...,"tid":"VA"}` (`tst` Unix seconds, `acc` and `alt` metres (`acc` always, at least 1:
/// ``wireAccuracy(_:)``), `vel` km/h, `cog` degrees,
/// all integers as OwnTracks sends them; no `t`, which marks pings, manual and region-triggered
/// reports). Region crossings are `{"_type":"transition","event":"enter"|"leave","desc":REGION,
/// "tst":CROSSING,"wtst":WAYPOINT_CREATED,"lat":...,"lon":...,"acc":...,"t":"c","tid":...}`. A visit
/// goes as the iOS app reports one: a location with `"t":"v"` (the booklet's "Frequent Locations
/// monitoring"), at the visit's centre with its spread as `acc`, `tst` the arrival (at arrival) or
/// the departure (at departure). A heartbeat is a location with `"t":"p"` (a ping) at the time it
/// was recorded again. Dwells and trips have no OwnTracks form and are not sent.
///
/// Read as the Recorder reads them: the sender is `USER/DEVICE` (``deviceID(user:device:)``),
/// numbers may come as strings, a missing `tst` is the time of receipt, transitions may come
/// without a position, message types without a position (`waypoint`, `waypoints`, `lwt`, `card`,
/// `status`, ...) are acknowledged and not stored, an empty body is acknowledged, and
/// `_type: encrypted` is refused (``FormatsError/Code/unsupported``): we hold no key.
public enum OwnTracks {
    /// The user a message without `X-Limit-U` (or `?u=`) is filed under, as the Recorder does.
    public static let defaultUser = "owntracks"
    /// The device a message without `X-Limit-D` (or `?d=`) is filed under, as the Recorder does.
    public static let defaultDevice = "phone"

    /// The device id a message from `user`'s `device` is stored under: `user/device`, both
    /// lowercased (as the Recorder files them), ``defaultUser`` and ``defaultDevice`` when absent
    /// or empty. Two users' phones both named `phone` are two devices.
    public static func deviceID(user: String?, device: String?) -> String {
        func part(_ s: String?, _ fallback: String) -> String {
            guard let s, !s.isEmpty else { return fallback }
            return s.lowercased()
        }
        return part(user, defaultUser) + "/" + part(device, defaultDevice)
    }

    /// The two-letter tracker id OwnTracks shows: the device id's first two letters or digits.
    public static func trackerID(_ device: String) -> String {
        let letters = device.uppercased().filter { $0.isLetter || $0.isNumber }
        return String(letters.prefix(2)).isEmpty ? "KT" : String(letters.prefix(2))
    }

    /// A stand-in for a waypoint's creation time when the region's is unknown: a whole second
    /// between 2001 and 2021 that depends only on the region id, so each region stays one waypoint
    /// for the app and the Recorder (they tell waypoints apart by `wtst`).
    public static func stableWaypointTime(_ region: String) -> Double {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in region.utf8 {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return 978_307_200 + Double(h % 631_152_000)
    }

    /// The `acc` sent: the accuracy in whole metres, at least 1; ``Fix/uere`` (5 m, the error the
    /// project assumes for a dilution of precision of 1) when the receiver gave none. Always present and
    /// above 0: transitions require `acc`, and Home Assistant drops a location or a transition whose
    /// `acc` is missing or 0 (a leave would never take the tracker out of the zone).
    public static func wireAccuracy(_ accuracy: Double?) -> Double {
        guard let accuracy, accuracy.isFinite else { return Fix.uere }
        return max(1, accuracy.rounded())
    }

    /// The request body for `r`, or `nil` for a dwell or a trip.
    ///
    /// - Parameter waypointCreated: when the region of a transition was defined (its `wtst`); the
    ///   default is ``stableWaypointTime(_:)``.
    public static func encode(_ r: TrailRecord, waypointCreated: Double? = nil) -> [UInt8]? {
        var out: [UInt8] = []
        func int(_ key: StaticString, _ v: Double?) {
            // A number no Int64 holds is left out, never trapped on (records are validated first).
            guard let v, v.isFinite, abs(v) < 9e15 else { return }
            ByteWriting.appendStatic(key, to: &out)
            ByteWriting.appendInt(Int64(v.rounded()), to: &out)
        }
        switch r.kind {
        case .location:
            ByteWriting.appendStatic("{\"_type\":\"location\"", to: &out)
        case .enter, .exit:
            ByteWriting.appendStatic("{\"_type\":\"transition\",\"event\":\"", to: &out)
            ByteWriting.appendStatic(r.kind == .enter ? "enter" : "leave", to: &out)
            ByteWriting.appendStatic("\",\"desc\":", to: &out)
            ByteWriting.appendJSONString(r.region ?? "", to: &out)
            int(",\"wtst\":", (waypointCreated ?? stableWaypointTime(r.region ?? "")).rounded(.down))
            ByteWriting.appendStatic(",\"t\":\"c\"", to: &out)
        case .dwell, .trip:
            return nil
        case .visit:
            // As the iOS app reports a visit (`didVisit`): its own location message, trigger `v`.
            ByteWriting.appendStatic("{\"_type\":\"location\",\"t\":\"v\"", to: &out)
        case .heartbeat:
            // As the apps report a ping (the Android app's periodic one): trigger `p`.
            ByteWriting.appendStatic("{\"_type\":\"location\",\"t\":\"p\"", to: &out)
        }
        // A visit at its arrival, and once left at its departure.
        int(",\"tst\":", (r.kind == .visit ? r.span?.end ?? r.time : r.time).rounded(.down))
        ByteWriting.appendStatic(",\"lat\":", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out)
        int(",\"acc\":", wireAccuracy(r.horizontalAccuracy))
        if r.kind.isPosition {
            int(",\"alt\":", r.altitude)
            int(",\"vac\":", r.verticalAccuracy)
            int(",\"vel\":", r.speed.map { $0 * 3.6 })
            int(",\"cog\":", r.course)
        }
        ByteWriting.appendStatic(",\"tid\":", to: &out)
        ByteWriting.appendJSONString(trackerID(r.device), to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The fields we read of a message; the others become attributes.
    struct Wire {
        var _type: String?
        var tst: Double?
        var lat: Double?
        var lon: Double?
        var acc: Double?
        var alt: Double?
        var vac: Double?
        var vel: Double?
        var cog: Double?
        var event: String?
        var desc: String?
        var attributes: [String: String] = [:]

        /// Reads one JSON object with the scanner the endpoint reads batches with (bounded nesting,
        /// UTF-8 checked). Numbers may be sent as strings (`"lat":"48.1"`), as some apps do.
        init(_ bytes: [UInt8]) throws(FormatsError) {
            var s = JSONScanner(bytes)
            do {
                try s.members { (s, key) throws(FormatsError) in
                    let v = try s.value()
                    func number() throws(FormatsError) -> Double? {
                        switch v {
                        case .number(let d): return d
                        case .string(let t):
                            guard let d = Double(t.trimmingSpaces), d.isFinite else {
                                throw FormatsError(.invalid, "\(key): '\(t.prefix(32))' is not a number")
                            }
                            return d
                        case .null: return nil
                        default: throw FormatsError(.invalid, "\(key): expected a number")
                        }
                    }
                    func text() throws(FormatsError) -> String? {
                        switch v {
                        case .string(let t): return t
                        case .null: return nil
                        default: throw FormatsError(.invalid, "\(key): expected a string")
                        }
                    }
                    switch key {
                    case "_type": _type = try text()
                    case "tst": tst = try number()
                    case "lat": lat = try number()
                    case "lon": lon = try number()
                    case "acc": acc = try number()
                    case "alt": alt = try number()
                    case "vac": vac = try number()
                    case "vel": vel = try number()
                    case "cog": cog = try number()
                    case "event": event = try text()
                    case "desc": desc = try text()
                    default:
                        TrailRecord.keepAttribute(key, v, in: &attributes)
                    }
                }
                guard s.atEnd else { throw s.fail("text after the object") }
            }
        }
    }

    /// A record from an OwnTracks body sent by `user`'s `device` (``deviceID(user:device:)``),
    /// received at `now`: what the endpoint's HTTP route does with a request, and what an MQTT
    /// subscriber does with a message on `owntracks/USER/DEVICE`. `nil` when there is nothing to
    /// store: an empty body, or a message type without a position (`lwt`, `card`, `waypoint`...).
    ///
    /// - Throws: ``FormatsError`` naming the field; ``FormatsError/Code/unsupported`` for
    ///   an encrypted payload.
    public static func decode(_ bytes: [UInt8], user: String?, device: String?, now: Double)
        throws(FormatsError) -> TrailRecord?
    {
        try decode(bytes, device: deviceID(user: user, device: device), now: now)
    }

    /// The record an OwnTracks body from `user`'s `device` holds, as sent (``read(_:device:now:)``).
    ///
    /// - Throws: ``FormatsError`` naming the field that can't be read.
    public static func read(_ bytes: [UInt8], user: String?, device: String?, now: Double)
        throws(FormatsError) -> TrailRecord?
    {
        try read(bytes, device: deviceID(user: user, device: device), now: now)
    }

    /// A record from an OwnTracks body, stored as `device` (taken as it is), received at `now`.
    ///
    /// - Throws: ``FormatsError`` naming the field.
    public static func decode(_ bytes: [UInt8], device: String, now: Double) throws(FormatsError) -> TrailRecord? {
        try read(bytes, device: device, now: now).map { r throws(FormatsError) in try TrailRecord.checked(r, now: now) }
    }

    /// The record an OwnTracks body holds, as sent: ``decode(_:device:now:)`` before its values are
    /// checked (``TrailRecord/problem(now:)``), so that the endpoint can authorize the device before
    /// it judges what the device sent.
    ///
    /// - Throws: ``FormatsError`` naming the field that can't be read.
    public static func read(_ bytes: [UInt8], device: String, now: Double) throws(FormatsError) -> TrailRecord? {
        // Apps post empty bodies now and then (the Recorder ignores them).
        guard bytes.contains(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) else { return nil }
        let w = try Wire(bytes)
        guard let type = w._type else { throw FormatsError(.invalid, "_type: missing") }
        let kind: TrailRecord.Kind
        switch type {
        case "location": kind = .location
        case "transition":
            switch w.event {
            case "enter": kind = .enter
            case "leave": kind = .exit
            default: throw FormatsError(.invalid, "event: '\(w.event ?? "null")' is not enter or leave")
            }
        case "encrypted":
            throw FormatsError(
                .unsupported,
                "_type: encrypted payloads are not supported (no key is configured here): "
                    + "turn encryption off in the app, or send to a Recorder that holds the key")
        default: return nil
        }
        var valid = true
        var lat = w.lat, lon = w.lon
        if kind != .location && lat == nil && lon == nil {
            // A transition may come without a position: stored, marked as having none.
            (lat, lon, valid) = (0, 0, false)
        }
        guard let lat else { throw FormatsError(.invalid, "lat: missing") }
        guard let lon else { throw FormatsError(.invalid, "lon: missing") }
        var r = TrailRecord(
            device: device, sequence: 1, kind: kind, region: kind == .location ? nil : w.desc,
            time: w.tst ?? now, latitude: lat, longitude: lon, altitude: w.alt,
            horizontalAccuracy: w.acc, verticalAccuracy: w.vac,
            speed: w.vel.flatMap { $0 < 0 ? nil : $0 / 3.6 }, course: w.cog.flatMap { $0 < 0 ? nil : $0 })
        r.valid = valid
        r.attributes = w.attributes
        return r
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces.
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return s
    }
}
