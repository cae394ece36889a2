import Geo

/// One item of a trail on its way to a server: a delivered location or a region transition, with
/// the stable id that makes storing it idempotent.
///
/// The id is the device id and a sequence number the device's outbox gives (`van-1:17`): sent
/// twice, stored once. Region transitions carry the position of the location that caused them.
public struct TrailRecord: Hashable, Sendable {
    /// What the record is.
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        case location
        case enter
        case exit
        case dwell
        /// A visit (``span`` holds its departure) and a trip (``span`` holds its end): see
        /// `TrailRecord+Visits.swift`.
        case visit
        case trip
        /// A location recorded again at a later time while the device does not move (see
        /// `TrailRecord+Heartbeat.swift`).
        case heartbeat
    }

    public var device: String
    /// The device's sequence number (1, 2, ...): the order of the trail.
    public var sequence: Int64
    public var kind: Kind
    /// The region, for `enter`, `exit` and `dwell`.
    public var region: String?
    /// Seconds since 1970 (UTC).
    public var time: Double
    public var latitude: Double
    public var longitude: Double
    /// Metres above mean sea level.
    public var altitude: Double?
    /// Metres (1 sigma radius).
    public var horizontalAccuracy: Double?
    public var verticalAccuracy: Double?
    /// Metres per second.
    public var speed: Double?
    /// Degrees from true north.
    public var course: Double?
    /// For a region transition, when the location that decided it was taken (seconds since 1970);
    /// `time` is when the transition happened (when the evidence began), which is earlier. `nil`
    /// for locations, and for transitions read from a wire that doesn't say.
    public var decidedAt: Double?
    /// Whether the sender says the position is valid (OsmAnd's `valid=false`, a transition without
    /// a position): a record that is not is stored, marked, and left out of trails by default.
    public var valid = true
    /// What else the sender said about the record, by the sender's own names (OsmAnd's `hdop`,
    /// `batt`, `driverUniqueId`, Traccar Client's `battery.level`): kept and returned, not interpreted.
    public var attributes: [String: String] = [:]
    /// For a visit or a trip, what it carries besides its first position and time.
    public var span: Span?
    /// Why the endpoint marked the location an outlier (`no-position`, `inaccurate`, `jump`; or
    /// `pending`: the last point so far arrived too fast, and the next point will say whether it
    /// jumped), read back from its store: kept as received, left out of stops, trips and trails by
    /// default. `nil` for a location that is none, and on the way to a server.
    public var outlier: String?

    public init(
        device: String, sequence: Int64, kind: Kind = .location, region: String? = nil, time: Double,
        latitude: Double, longitude: Double, altitude: Double? = nil, horizontalAccuracy: Double? = nil,
        verticalAccuracy: Double? = nil, speed: Double? = nil, course: Double? = nil
    ) {
        self.device = device
        self.sequence = sequence
        self.kind = kind
        self.region = region
        self.time = time
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.course = course
    }

    /// A location's record (invalid CoreLocation values, −1, become absent).
    public init(device: String, sequence: Int64, location l: Location, kind: Kind = .location, region: String? = nil) {
        self.init(
            device: device, sequence: sequence, kind: kind, region: region, time: l.timestamp,
            latitude: l.coordinate.latitude, longitude: l.coordinate.longitude,
            altitude: l.verticalAccuracy >= 0 ? l.altitude : nil,
            horizontalAccuracy: l.horizontalAccuracy >= 0 ? l.horizontalAccuracy : nil,
            verticalAccuracy: l.verticalAccuracy >= 0 ? l.verticalAccuracy : nil,
            speed: l.speed >= 0 ? l.speed : nil, course: l.course >= 0 ? l.course : nil)
    }

    /// `device:sequence`.
    public var id: String { "\(device):\(sequence)" }

    /// Why the record can't be stored, or `nil` when it can. Times must lie between the GPS epoch
    /// (1980-01-06) and a day after `now`; ids follow ``identifierProblem(_:)``; every number must be
    /// finite and within its range (accuracies 0 to ``maxMetres``, altitude within ±``maxMetres``,
    /// speed 0 to ``maxSpeed``, course 0 to 360): what any wire format can write back exactly.
    ///
    /// - Returns: a ``FormatsError`` of code ``FormatsError/Code/invalidRecord`` whose
    ///   ``FormatsError/field`` names the record's key (`lat`, `time`, `attributes`), or `nil`.
    public func problem(now: Double) -> FormatsError? {
        guard let (field, message) = problemFound(now: now) else { return nil }
        return FormatsError(.invalidRecord, message, field: field)
    }

    /// `record`, when it has no ``problem(now:)``.
    ///
    /// - Throws: its problem.
    static func checked(_ record: TrailRecord, now: Double) throws(FormatsError) -> TrailRecord {
        if let problem = record.problem(now: now) { throw problem }
        return record
    }

    /// The key and the sentence of ``problem(now:)``.
    func problemFound(now: Double) -> (field: String, message: String)? {
        if let p = Self.identifierProblem(device) { return ("device", "device id \(p)") }
        if sequence < 0 { return ("seq", "seq must be 1 or more (or null: none), got \(sequence)") }
        if !(latitude >= -90 && latitude <= 90) { return ("lat", "lat \(latitude) is out of range [-90, 90]") }
        if !(longitude >= -180 && longitude <= 180) { return ("lon", "lon \(longitude) is out of range [-180, 180]") }
        if !(time >= 315_964_800 && time <= now + 86_400) {
            // Untrusted: a time may be far beyond what a calendar date can show (1e300 s).
            let shown = ISOTime.representable.contains(time) ? ISOTime.string(time) : "\(time) s since 1970"
            return ("time", "time \(shown) is impossible (before 1980-01-06 or more than a day ahead)")
        }
        if kind.isRegionEvent && (region ?? "").isEmpty {
            return ("region", "a \(kind.rawValue) record needs a region")
        }
        if let p = spanProblem(now: now) { return p }
        if let region, let p = Self.identifierProblem(region) { return ("region", "region \(p)") }
        if let a = horizontalAccuracy, !(a >= 0 && a <= Self.maxMetres) {
            return ("hAcc", "hAcc must be 0 to 10,000,000 metres")
        }
        if let a = verticalAccuracy, !(a >= 0 && a <= Self.maxMetres) {
            return ("vAcc", "vAcc must be 0 to 10,000,000 metres")
        }
        if let v = speed, !(v >= 0 && v <= Self.maxSpeed) { return ("speed", "speed must be 0 to 100,000 m/s") }
        if let c = course, !(c >= 0 && c <= 360) { return ("course", "course must be in [0, 360]") }
        if let a = altitude, !(abs(a) <= Self.maxMetres) { return ("alt", "alt must be within ±10,000,000 metres") }
        if let t = decidedAt, !(t >= time && t <= now + 86_400) {
            return ("decidedAt", "the deciding location's time must lie between the transition's and a day after now")
        }
        if attributes.count > Self.maxAttributes { return ("attributes", "more than \(Self.maxAttributes) attributes") }
        for (k, v) in attributes {
            if let p = Self.identifierProblem(k) { return ("attributes", "attribute name \(p)") }
            if v.utf8.count > Self.maxAttributeBytes || v.unicodeScalars.contains(where: { $0.value == 0 }) {
                return ("attributes", "attribute '\(k)' must have at most \(Self.maxAttributeBytes) bytes and no NUL")
            }
        }
        return nil
    }

    /// The most attributes a record may carry.
    public static let maxAttributes = 64
    /// The longest attribute value, in UTF-8 bytes.
    public static let maxAttributeBytes = 1024

    /// Keeps a sender's member `name` as an attribute when there is room (``maxAttributes``), the
    /// name is an identifier and the value is text (at most ``maxAttributeBytes``, without NUL), a
    /// number or a boolean; drops it otherwise.
    static func keepAttribute(_ name: String, _ v: JSONScanner.Value, in attributes: inout [String: String]) {
        guard attributes.count < maxAttributes, identifierProblem(name) == nil else { return }
        switch v {
        case .string(let t) where t.utf8.count <= maxAttributeBytes && !t.utf8.contains(0):
            attributes[name] = t
        case .number(let d):
            attributes[name] = d == d.rounded() && abs(d) < 9e15 ? String(Int64(d)) : "\(d)"
        case .bool(let b): attributes[name] = b ? "true" : "false"
        default: break
        }
    }

    /// The attributes as a JSON object (`{"batt":"87","hdop":"0.9"}`, keys sorted), or `nil` when
    /// there are none: how a store keeps them.
    public static func attributesJSON(_ attributes: [String: String]) -> String? {
        guard !attributes.isEmpty else { return nil }
        var out: [UInt8] = []
        appendAttributes(attributes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendAttributes(_ attributes: [String: String], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, key) in attributes.keys.sorted().enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendJSONString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            ByteWriting.appendJSONString(attributes[key]!, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Attributes from ``attributesJSON(_:)``'s text (a flat object of strings); empty for `nil` or
    /// anything else.
    public static func attributes(fromJSON text: String?) -> [String: String] {
        guard let text else { return [:] }
        var s = JSONScanner(Array(text.utf8))
        var out: [String: String] = [:]
        do {
            try s.expect(UInt8(ascii: "{"))
            if s.take(UInt8(ascii: "}")) { return out }
            repeat {
                let key = try s.string()
                try s.expect(UInt8(ascii: ":"))
                if case .string(let v) = try s.value() { out[key] = v }
            } while s.take(UInt8(ascii: ","))
        } catch {
            return out
        }
        return out
    }

    /// The largest accuracy or altitude, in metres, a record may carry: beyond any receiver on or near
    /// Earth, and within what every wire format can write exactly.
    public static let maxMetres = 10_000_000.0
    /// The fastest speed a record may carry, m/s (past any vehicle; orbit is 7,800).
    public static let maxSpeed = 100_000.0

    /// The longest device or region id, in UTF-8 bytes.
    public static let maxIdentifierBytes = 128

    /// Why `id` can't name a device or region, or `nil` when it can: 1 to 128 bytes, and no control
    /// characters (U+0000-U+001F, U+007F-U+009F). A NUL would cut the id short in C APIs (SQLite's
    /// text binding among them) and merge distinct devices. Invalid UTF-8 is refused earlier, by the
    /// readers (``JSONBatch``, ``OsmAnd``), before it becomes a `String`.
    public static func identifierProblem(_ id: String) -> String? {
        let n = id.utf8.count
        if n == 0 || n > maxIdentifierBytes { return "must have 1 to \(maxIdentifierBytes) bytes, has \(n)" }
        for (i, u) in id.unicodeScalars.enumerated() where u.value < 0x20 || (0x7F...0x9F).contains(u.value) {
            let hex = String(u.value, radix: 16, uppercase: true)
            return
                "must not contain control characters (U+\(String(repeating: "0", count: 4 - hex.count))\(hex) at character \(i + 1))"
        }
        return nil
    }
}

/// ISO 8601 times on the wire: `2024-05-14T09:30:00.000Z`.
public enum ISOTime {
    /// The time with milliseconds.
    public static func string(_ seconds: Double) -> String {
        var out: [UInt8] = []
        append(seconds, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The times ISO 8601 can write with four-digit years: 0001-01-01T00:00:00Z up to
    /// 9999-12-31T23:59:59.999Z, in seconds since 1970.
    public static let representable: ClosedRange<Double> = -62_135_596_800...253_402_300_799.999

    /// Appends the time as a JSON string with milliseconds, or `null` for none (a visit still open,
    /// a departure not known yet).
    public static func appendQuoted(_ seconds: Double?, to out: inout [UInt8]) {
        guard let seconds else { return ByteWriting.appendStatic("null", to: &out) }
        out.append(UInt8(ascii: "\""))
        append(seconds, to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// Appends the time with milliseconds. A time outside ``representable`` (or not finite) has no
    /// ISO 8601 form: it is written as its number of seconds (`1e+20`), never trapped on.
    public static func append(_ seconds: Double, to out: inout [UInt8]) {
        guard representable.contains(seconds) else {
            out.append(contentsOf: "\(seconds)".utf8)
            return
        }
        // Both fit an Int64 by far: |ms| < 2.6e14.
        let ms = Int64((seconds * 1000).rounded())
        var day = ms / 86_400_000
        var rest = ms % 86_400_000
        if rest < 0 {
            day -= 1
            rest += 86_400_000
        }
        GNSSTime(day: Int32(day), nanosecondOfDay: rest * 1_000_000, fractionDigits: 3).appendISO8601(to: &out)
    }

    /// The days of a month in the proleptic Gregorian calendar.
    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The fraction of a second whose digits start at `i` (after the `.`), with `i` moved past
    /// them; `nil` when no digit is there.
    static func fraction(_ b: [UInt8], at i: inout Int) -> Double? {
        var fraction = 0.0
        var scale = 0.1
        let start = i
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            fraction += Double(b[i] - 48) * scale
            scale /= 10
            i += 1
        }
        return i > start ? fraction : nil
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+00:00)`; `nil` when it is not that, names a day the
    /// month doesn't have (`2024-02-31`), or lies past ``representable`` (a leap second at the very end).
    public static func parse(_ text: String) -> Double? { parse(text, anyOffset: false) }

    /// ``parse(_:)``; with `anyOffset`, also any offset (`+02:00`, `-0530`, `+02`) and none at all
    /// (UTC), as Traccar reads OsmAnd's `timestamp` (`2024-05-14 09:30:00`).
    public static func parse(_ text: String, anyOffset: Bool) -> Double? {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ n: Int) -> Int? {
            guard at + n <= b.count else { return nil }
            var v = 0
            for i in at..<at + n {
                let d = Int(b[i]) - 48
                guard d >= 0 && d <= 9 else { return nil }
                v = v * 10 + d
            }
            return v
        }
        guard b.count >= (anyOffset ? 19 : 20), let year = digits(0, 4), b[4] == 45, let month = digits(5, 2),
            b[7] == 45,
            let day = digits(8, 2), b[10] == 84 || b[10] == 32, let hour = digits(11, 2), b[13] == 58,
            let minute = digits(14, 2), b[16] == 58, let second = digits(17, 2),
            (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month), hour < 24,
            minute < 60, second <= 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count && b[i] == 46 {
            i += 1
            guard let f = ISOTime.fraction(b, at: &i) else { return nil }
            fraction = f
        }
        let zone = b[i...]
        var offset = 0
        if zone.elementsEqual("Z".utf8) || zone.elementsEqual("+00:00".utf8) {
            offset = 0
        } else if anyOffset {
            if !zone.isEmpty {
                // ±HH, ±HHMM or ±HH:MM.
                guard zone.first == 43 || zone.first == 45, let h = digits(i + 1, 2), h <= 23 else { return nil }
                var m = 0
                switch zone.count {
                case 3: m = 0
                case 5: guard let mm = digits(i + 3, 2) else { return nil }; m = mm
                case 6: guard b[i + 3] == 58, let mm = digits(i + 4, 2) else { return nil }; m = mm
                default: return nil
                }
                guard m < 60 else { return nil }
                offset = (zone.first == 45 ? -1 : 1) * (h * 3600 + m * 60)
            }
        } else {
            return nil
        }
        let days = GNSSTime.daysFromCivil(year: year, month: month, day: day)
        let t = Double(days) * 86_400 + Double(hour * 3600 + minute * 60 + second - offset) + fraction
        // 9999-12-31T23:59:60.5Z parses, but no four-digit year can write it back.
        return representable.contains(t) ? t : nil
    }
}
