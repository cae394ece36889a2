/// OwnTracks' HTTP JSON: one object per request (`POST`, `Content-Type: application/json`), the
/// user and device in `X-Limit-U` and `X-Limit-D` headers; the Recorder answers `[]`.
///
/// Locations are `{"_type":"location","tst":...,"lat":...,"lon":...,"acc":...,"alt":...,"vel":...,
/// "cog":...,"tid":"VA","t":"p"}` (`tst` Unix seconds, `acc` and `alt` metres, `vel` km/h, `cog`
/// degrees, all integers as OwnTracks sends them); region crossings are `{"_type":"transition",
/// "event":"enter"|"leave","desc":REGION,"tst":...,"wtst":...,"lat":...,"lon":...,"acc":...,
/// "t":"c","tid":...}`. Dwells have no OwnTracks form and are not sent.
public enum OwnTracks {
    /// The two-letter tracker id OwnTracks shows: the device id's first two letters or digits.
    public static func trackerID(_ device: String) -> String {
        let letters = device.uppercased().filter { $0.isLetter || $0.isNumber }
        return String(letters.prefix(2)).isEmpty ? "KT" : String(letters.prefix(2))
    }

    /// The request body for `r`, or `nil` for a dwell.
    public static func encode(_ r: TrailRecord) -> [UInt8]? {
        var out: [UInt8] = []
        func int(_ key: StaticString, _ v: Double?) {
            guard let v else { return }
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
            int(",\"wtst\":", r.time)
            ByteWriting.appendStatic(",\"t\":\"c\"", to: &out)
        case .dwell:
            return nil
        }
        int(",\"tst\":", r.time.rounded(.down))
        ByteWriting.appendStatic(",\"lat\":", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out)
        int(",\"acc\":", r.horizontalAccuracy)
        if r.kind == .location {
            int(",\"alt\":", r.altitude)
            int(",\"vel\":", r.speed.map { $0 * 3.6 })
            int(",\"cog\":", r.course)
            ByteWriting.appendStatic(",\"t\":\"p\"", to: &out)
        }
        ByteWriting.appendStatic(",\"tid\":", to: &out)
        ByteWriting.appendJSONString(trackerID(r.device), to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The fields we read of a message (others are ignored).
    struct Wire {
        var _type: String?
        var tst: Double?
        var lat: Double?
        var lon: Double?
        var acc: Double?
        var alt: Double?
        var vel: Double?
        var cog: Double?
        var event: String?
        var desc: String?

        /// Reads one JSON object with the scanner the endpoint reads batches with (bounded nesting,
        /// UTF-8 checked); unknown keys are skipped.
        init(_ bytes: [UInt8]) throws(WireFormatError) {
            var s = JSONScanner(bytes)
            do {
                try s.expect(UInt8(ascii: "{"))
                if !s.take(UInt8(ascii: "}")) {
                    repeat {
                        let key = try s.string()
                        try s.expect(UInt8(ascii: ":"))
                        let v = try s.value()
                        func number() throws(WireFormatError) -> Double? {
                            switch v {
                            case .number(let d): return d
                            case .null: return nil
                            default: throw WireFormatError("\(key): expected a number")
                            }
                        }
                        func text() throws(WireFormatError) -> String? {
                            switch v {
                            case .string(let t): return t
                            case .null: return nil
                            default: throw WireFormatError("\(key): expected a string")
                            }
                        }
                        switch key {
                        case "_type": _type = try text()
                        case "tst": tst = try number()
                        case "lat": lat = try number()
                        case "lon": lon = try number()
                        case "acc": acc = try number()
                        case "alt": alt = try number()
                        case "vel": vel = try number()
                        case "cog": cog = try number()
                        case "event": event = try text()
                        case "desc": desc = try text()
                        default: break
                        }
                    } while s.take(UInt8(ascii: ","))
                    try s.expect(UInt8(ascii: "}"))
                }
                guard s.atEnd else { throw s.fail("text after the object") }
            } catch let f as JSONScanner.Failure {
                throw WireFormatError(f.message)
            } catch let e as WireFormatError {
                throw e
            } catch {
                throw WireFormatError("\(error)")
            }
        }
    }

    /// A record from an OwnTracks body sent by `device`, validated against `now`; `nil` for the
    /// message types that carry no position (`lwt`, `card`, `waypoint`...).
    ///
    /// - Throws: ``WireFormatError`` naming the field.
    public static func decode(_ bytes: [UInt8], device: String, now: Double) throws(WireFormatError) -> TrailRecord? {
        let w = try Wire(bytes)
        guard let type = w._type else { throw WireFormatError("_type: missing") }
        let kind: TrailRecord.Kind
        switch type {
        case "location": kind = .location
        case "transition":
            switch w.event {
            case "enter": kind = .enter
            case "leave": kind = .exit
            default: throw WireFormatError("event: '\(w.event ?? "null")' is not enter or leave")
            }
        default: return nil
        }
        guard let tst = w.tst else { throw WireFormatError("tst: missing") }
        guard let lat = w.lat else { throw WireFormatError("lat: missing") }
        guard let lon = w.lon else { throw WireFormatError("lon: missing") }
        let r = TrailRecord(device: device, sequence: 1, kind: kind, region: kind == .location ? nil : w.desc,
                            time: tst, latitude: lat, longitude: lon, altitude: w.alt, horizontalAccuracy: w.acc,
                            speed: w.vel.map { $0 / 3.6 }, course: w.cog)
        if let problem = r.problem(now: now) { throw WireFormatError(problem) }
        return r
    }
}
