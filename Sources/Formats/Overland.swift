/// Overland's batch (aaronpk/Overland-iOS, "API"), which Dawarich takes at
/// `POST /api/v1/overland/batches`: `{"locations":[FEATURE,...]}`, each a GeoJSON Point feature
/// `{"type":"Feature","geometry":{"type":"Point","coordinates":[LON,LAT]},"properties":{...}}` with
/// `timestamp` (ISO 8601, any offset), `altitude`, `speed` (m/s), `horizontal_accuracy`,
/// `vertical_accuracy`, `course` (degrees), `device_id` and more (`battery_level`, `motion`,
/// `wifi`...). The server answers `{"result":"ok"}`; anything else leaves the batch on the device.
///
/// Read as the app writes it: negative accuracies, speeds and courses are CoreLocation's "invalid"
/// and become absent (a negative `vertical_accuracy` makes the altitude absent too); `current` and
/// `trip` beside `locations` are skipped; properties other than the ones above are kept as
/// attributes when they are strings, numbers or booleans.
public enum Overland {
    /// The most locations one body may carry (the app sends 50 to 1,000). More is refused
    /// (``FormatsError/Code/tooLarge``) before any record is made.
    public static let maxLocations = 10_000

    /// The answer that acknowledges a batch.
    public static let acknowledgement = "{\"result\":\"ok\"}"

    /// The body for `records` of `device` (locations; region transitions and dwells have no form).
    public static func encode(device: String, records: [TrailRecord]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + records.count * 300)
        ByteWriting.appendStatic("{\"locations\":[", to: &out)
        var first = true
        for r in records where r.kind == .location {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            ByteWriting.appendStatic(
                "{\"type\":\"Feature\",\"geometry\":{\"type\":\"Point\",\"coordinates\":[", to: &out)
            ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out)
            out.append(UInt8(ascii: ","))
            ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out)
            ByteWriting.appendStatic("]},\"properties\":{\"timestamp\":\"", to: &out)
            ISOTime.append(r.time, to: &out)
            out.append(UInt8(ascii: "\""))
            func number(_ key: StaticString, _ v: Double?, _ decimals: Int) {
                guard let v, v.isFinite else { return }
                ByteWriting.appendStatic(key, to: &out)
                ByteWriting.appendFixed(v, decimals: decimals, to: &out)
            }
            number(",\"altitude\":", r.altitude, 2)
            number(",\"speed\":", r.speed, 2)
            number(",\"horizontal_accuracy\":", r.horizontalAccuracy, 2)
            number(",\"vertical_accuracy\":", r.verticalAccuracy, 2)
            number(",\"course\":", r.course, 2)
            ByteWriting.appendStatic(",\"device_id\":", to: &out)
            ByteWriting.appendJSONString(device, to: &out)
            out.append(UInt8(ascii: "}"))
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("]}", to: &out)
        return out
    }

    /// Whether `body` is the answer that acknowledges a batch: a JSON object whose `result` is `ok`
    /// (other members allowed).
    public static func isAcknowledgement(_ body: [UInt8]) -> Bool {
        var s = JSONScanner(body)
        var ok = false
        do {
            try s.members { (s, key) throws(FormatsError) in
                if key == "result" {
                    guard case .string(let v) = try s.value() else { throw s.fail("result: expected a string") }
                    ok = v == "ok"
                } else {
                    try s.skipValue()
                }
            }
            return ok && s.atEnd
        } catch {
            return false
        }
    }

    /// The records of an Overland body received at `now`, each filed under its `device_id`, or
    /// `device` when it has none (or an empty one).
    ///
    /// - Throws: ``FormatsError`` naming the location and field (`locations[3].properties.timestamp:
    ///   missing`); ``FormatsError/Code/tooLarge`` past ``maxLocations``.
    public static func decode(_ bytes: [UInt8], device: String, now: Double) throws(FormatsError) -> [TrailRecord] {
        let records = try read(bytes, device: device)
        for (i, r) in records.enumerated() {
            if var problem = r.problem(now: now) {
                problem.message = "locations[\(i)]: " + problem.message
                throw problem
            }
        }
        return records
    }

    /// The records of an Overland body, as sent: ``decode(_:device:now:)`` before their values are
    /// checked (``TrailRecord/problem(now:)``), so that the endpoint can authorize their devices and
    /// keep the good records of a batch that holds a bad one.
    ///
    /// - Throws: ``FormatsError`` naming the location and field that can't be read.
    public static func read(_ bytes: [UInt8], device: String) throws(FormatsError) -> [TrailRecord] {
        var s = JSONScanner(bytes)
        var records: [TrailRecord] = []
        var sawLocations = false
        try s.members { (s, key) throws(FormatsError) in
            guard key == "locations" else {
                try s.skipValue()
                return
            }
            guard !sawLocations else { throw FormatsError(.invalid, "locations: given twice") }
            sawLocations = true
            try s.elements { (s) throws(FormatsError) in
                guard records.count < maxLocations else {
                    throw FormatsError(.tooLarge, "locations: more than \(maxLocations) in one batch")
                }
                records.append(try feature(&s, index: records.count, device: device))
            }
        }
        guard s.atEnd else { throw s.fail("text after the object") }
        guard sawLocations else { throw FormatsError(.invalid, "locations: missing") }
        return records
    }

    /// One feature of `locations`.
    static func feature(_ s: inout JSONScanner, index: Int, device: String) throws(FormatsError)
        -> TrailRecord
    {
        let at = "locations[\(index)]"
        var coordinates: [Double]?
        var sawProperties = false
        var timestamp: String?
        var numbers: [String: Double] = [:]
        var deviceID: String?
        var attributes: [String: String] = [:]
        try s.members { (s, key) throws(FormatsError) in
            switch key {
            case "type":
                guard case .string(let t) = try s.value(), t == "Feature" else {
                    throw FormatsError(.invalid, "\(at).type: expected \"Feature\"")
                }
            case "geometry":
                coordinates = try point(&s, at: "\(at).geometry")
            case "properties":
                sawProperties = true
                try s.members { (s, name) throws(FormatsError) in
                    let v = try s.value()
                    switch name {
                    case "timestamp":
                        guard case .string(let t) = v else {
                            throw FormatsError(.invalid, "\(at).properties.timestamp: expected an ISO 8601 string")
                        }
                        timestamp = t
                    case "altitude", "speed", "horizontal_accuracy", "vertical_accuracy", "course":
                        switch v {
                        case .number(let d): numbers[name] = d
                        case .null: break
                        default: throw FormatsError(.invalid, "\(at).properties.\(name): expected a number")
                        }
                    case "device_id":
                        switch v {
                        case .string(let t): deviceID = t
                        case .null: break
                        default: throw FormatsError(.invalid, "\(at).properties.device_id: expected a string")
                        }
                    default:
                        TrailRecord.keepAttribute(name, v, in: &attributes)
                    }
                }
            default:
                try s.skipValue()
            }
        }
        guard let coordinates else { throw FormatsError(.invalid, "\(at).geometry: missing") }
        guard sawProperties else { throw FormatsError(.invalid, "\(at).properties: missing") }
        guard let timestamp else { throw FormatsError(.invalid, "\(at).properties.timestamp: missing") }
        guard let time = ISOTime.parse(timestamp, anyOffset: true) else {
            throw FormatsError(.invalid, "\(at).properties.timestamp: '\(timestamp.prefix(40))' is not ISO 8601")
        }
        func valid(_ name: String) -> Double? { numbers[name].flatMap { $0 < 0 ? nil : $0 } }
        let verticalAccuracy = numbers["vertical_accuracy"]
        let altitude =
            verticalAccuracy.map { $0 < 0 } == true ? nil : numbers["altitude"] ?? coordinates.dropFirst(2).first
        let owner = deviceID.flatMap { $0.isEmpty ? nil : $0 } ?? device
        var r = TrailRecord(
            device: owner, sequence: 1, time: time, latitude: coordinates[1], longitude: coordinates[0],
            altitude: altitude, horizontalAccuracy: valid("horizontal_accuracy"),
            verticalAccuracy: valid("vertical_accuracy"), speed: valid("speed"),
            course: valid("course"))
        r.attributes = attributes
        return r
    }

    /// A Point geometry's coordinates: longitude, latitude and maybe altitude.
    static func point(_ s: inout JSONScanner, at: String) throws(FormatsError) -> [Double] {
        var coordinates: [Double]?
        var type: String?
        try s.members { (s, key) throws(FormatsError) in
            switch key {
            case "type":
                guard case .string(let t) = try s.value() else {
                    throw FormatsError(.invalid, "\(at).type: expected a string")
                }
                type = t
            case "coordinates":
                var values: [Double] = []
                try s.elements { (s) throws(FormatsError) in
                    guard case .number(let d) = try s.value(), values.count < 3 else {
                        throw FormatsError(
                            .invalid, "\(at).coordinates: expected [longitude, latitude] or with altitude")
                    }
                    values.append(d)
                }
                coordinates = values
            default:
                try s.skipValue()
            }
        }
        guard type == "Point" else { throw FormatsError(.invalid, "\(at).type: expected \"Point\"") }
        guard let coordinates, coordinates.count >= 2 else {
            throw FormatsError(.invalid, "\(at).coordinates: expected [longitude, latitude]")
        }
        return coordinates
    }
}
