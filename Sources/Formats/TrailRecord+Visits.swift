extension TrailRecord {
    /// What a visit or a trip record carries besides its position and time.
    ///
    /// A visit record (``Kind/visit``) is at the visit's centre (``TrailRecord/latitude``,
    /// ``TrailRecord/longitude``), its ``TrailRecord/horizontalAccuracy`` is the visit's spread and its
    /// ``TrailRecord/time`` the arrival; ``end`` is the departure, `nil` while the device is still there
    /// (a visit is recorded twice: at arrival, and at departure with both times). A trip record
    /// (``Kind/trip``) is at the trip's start, at its start time; ``end``, ``endLatitude``,
    /// ``endLongitude``, ``distance`` and ``maximumSpeed`` are all present.
    public struct Span: Hashable, Sendable {
        /// A visit's departure, or a trip's end, in seconds since 1970; `nil` for a visit still open.
        public var end: Double?
        /// Where a trip ended.
        public var endLatitude: Double?
        public var endLongitude: Double?
        /// A trip's length in metres, along its fixes.
        public var distance: Double?
        /// A trip's highest speed, in m/s.
        public var maximumSpeed: Double?

        /// Creates a span.
        public init(
            end: Double? = nil, endLatitude: Double? = nil, endLongitude: Double? = nil, distance: Double? = nil,
            maximumSpeed: Double? = nil
        ) {
            self.end = end
            self.endLatitude = endLatitude
            self.endLongitude = endLongitude
            self.distance = distance
            self.maximumSpeed = maximumSpeed
        }

        /// Whether nothing is set.
        public var isEmpty: Bool {
            end == nil && endLatitude == nil && endLongitude == nil && distance == nil && maximumSpeed == nil
        }
    }

    /// The longest trip a record may carry, in metres (a thousand times round the Earth).
    public static let maxDistance = 4e10

    /// Why the record's ``span`` can't be stored, or `nil` when it can: only visits and trips carry
    /// one, a trip needs all of it, and its numbers must be finite and in range.
    func spanProblem(now: Double) -> (field: String, message: String)? {
        switch kind {
        case .visit, .trip:
            if region != nil { return ("region", "a \(kind.rawValue) record has no region") }
        default:
            if let span, !span.isEmpty { return ("end", "only visit and trip records have an end") }
            return nil
        }
        let span = self.span ?? Span()
        if kind == .trip {
            guard span.end != nil, span.endLatitude != nil, span.endLongitude != nil, span.distance != nil else {
                return ("end", "a trip record needs end, endLat, endLon and distance")
            }
        } else if span.endLatitude != nil || span.endLongitude != nil || span.distance != nil
            || span.maximumSpeed != nil
        {
            return ("end", "a visit record has only a departure")
        }
        if let end = span.end, !(end >= time && end <= now + 86_400) {
            return ("end", "the end must lie between the record's time and a day after now")
        }
        if let lat = span.endLatitude, !(lat >= -90 && lat <= 90) {
            return ("endLat", "endLat is out of range [-90, 90]")
        }
        if let lon = span.endLongitude, !(lon >= -180 && lon <= 180) {
            return ("endLon", "endLon is out of range [-180, 180]")
        }
        if let d = span.distance, !(d >= 0 && d <= Self.maxDistance) {
            return ("distance", "distance must be 0 to 40,000,000,000 metres")
        }
        if let v = span.maximumSpeed, !(v >= 0 && v <= Self.maxSpeed) {
            return ("maxSpeed", "maxSpeed must be 0 to 100,000 m/s")
        }
        return nil
    }
}

extension TrailRecord.Kind {
    /// Whether the record is a region transition (`enter`, `exit`, `dwell`): one that names a region.
    public var isRegionEvent: Bool { self == .enter || self == .exit || self == .dwell }

    /// Whether the record is a visit or a trip.
    public var isVisitOrTrip: Bool { self == .visit || self == .trip }
}

extension JSONBatch {
    /// A visit's or trip's members: `"departure":ISO|null` for a visit, `"end":ISO,"endLat":..,
    /// "endLon":..,"distance":..,"duration":..,"avgSpeed":..,"maxSpeed":..` for a trip (`duration` and
    /// `avgSpeed` follow from the others and are not read back).
    static func appendSpan(_ r: TrailRecord, to out: inout [UInt8]) {
        switch r.kind {
        case .visit:
            ByteWriting.appendStatic(",\"departure\":", to: &out)
            ISOTime.appendQuoted(r.span?.end, to: &out)
        case .trip:
            let span = r.span ?? TrailRecord.Span()
            // Duration and speed from the values as written (times to the millisecond, the distance to
            // a decimal): a trip read back writes the same bytes.
            func ms(_ t: Double) -> Double { (t * 1000).rounded() / 1000 }
            let start = ms(r.time)
            let end = ms(span.end ?? r.time)
            ByteWriting.appendStatic(",\"end\":\"", to: &out)
            ISOTime.append(end, to: &out)
            out.append(UInt8(ascii: "\""))
            optional(",\"endLat\":", span.endLatitude, 9, &out)
            optional(",\"endLon\":", span.endLongitude, 9, &out)
            optional(",\"distance\":", span.distance, 1, &out)
            optional(",\"duration\":", end - start, 3, &out)
            let distance = ((span.distance ?? 0) * 10).rounded() / 10
            optional(",\"avgSpeed\":", end > start ? distance / (end - start) : 0, 3, &out)
            optional(",\"maxSpeed\":", span.maximumSpeed, 3, &out)
        default:
            break
        }
    }

    /// Reads one of a visit's or trip's members into `span`; returns whether `key` is one.
    static func readSpan(_ key: String, _ v: JSONScanner.Value, into span: inout TrailRecord.Span, index: Int)
        throws(FormatsError) -> Bool
    {
        func number() throws(FormatsError) -> Double? {
            switch v {
            case .number(let d): return d
            case .null: return nil
            default: throw FormatsError(.invalid, "records[\(index)].\(key): expected a number")
            }
        }
        switch key {
        case "departure", "end":
            switch v {
            case .null: span.end = nil
            case .string(let t):
                guard let parsed = ISOTime.parse(t) else {
                    throw FormatsError(.invalid, "records[\(index)].\(key): '\(t)' is not an ISO 8601 UTC time")
                }
                span.end = parsed
            default: throw FormatsError(.invalid, "records[\(index)].\(key): expected a string")
            }
        case "endLat": span.endLatitude = try number()
        case "endLon": span.endLongitude = try number()
        case "distance": span.distance = try number()
        case "maxSpeed": span.maximumSpeed = try number()
        default: return false
        }
        return true
    }
}

extension TrailRecord {
    /// The record's span as a JSON object of the batch's members (`{"departure":"..."}`, `{"end":"...",
    /// "endLat":...}`), or `nil` for a record that is not a visit or trip: how a store keeps it.
    public static func spanJSON(_ r: TrailRecord) -> String? {
        guard r.kind.isVisitOrTrip else { return nil }
        var out: [UInt8] = []
        JSONBatch.appendSpan(r, to: &out)
        // appendSpan writes `,"key":value...`: the first comma opens the object.
        out[0] = UInt8(ascii: "{")
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// A span from ``spanJSON(_:)``'s text; `nil` for `nil` or text that is not one.
    public static func span(fromJSON text: String?) -> Span? {
        guard let text else { return nil }
        var s = JSONScanner(Array(text.utf8))
        var span = Span()
        do {
            try s.expect(UInt8(ascii: "{"))
            if s.take(UInt8(ascii: "}")) { return span }
            repeat {
                let key = try s.string()
                try s.expect(UInt8(ascii: ":"))
                _ = try JSONBatch.readSpan(key, try s.value(), into: &span, index: 0)
            } while s.take(UInt8(ascii: ","))
        } catch {
            return nil
        }
        return span
    }
}
