import Geo

/// Region definitions read from GeoJSON: Point features with a `radius` (metres) property are
/// circles, Polygon features polygons (outer ring); the feature's `id` (or `properties.id`) names
/// the region. Optional properties: `dwell` (loitering delay, seconds), `notifyOnEntry`,
/// `notifyOnExit` (booleans), and `devices` (an array of device ids: the endpoint's geofences
/// apply to those devices only; the device's own region store has no use for it).
///
/// Read in one pass over the bytes (``JSONScanner``), a feature at a time, with no document tree:
/// a 154 MB file of a million circles takes about a second and no memory beyond the definitions.
public struct RegionDefinition: Hashable, Sendable {
    public enum Shape: Hashable, Sendable {
        case circle(center: Coordinate, radius: Double)
        case polygon([Coordinate])
    }

    public var id: String
    public var shape: Shape
    public var dwell: Double?
    public var notifyOnEntry: Bool
    public var notifyOnExit: Bool
    /// The devices the region is for (`properties.devices`), `nil` when absent: every device.
    public var devices: [String]?

    public init(
        id: String, shape: Shape, dwell: Double? = nil, notifyOnEntry: Bool = true, notifyOnExit: Bool = true,
        devices: [String]? = nil
    ) {
        self.id = id
        self.shape = shape
        self.dwell = dwell
        self.notifyOnEntry = notifyOnEntry
        self.notifyOnExit = notifyOnExit
        self.devices = devices
    }

    /// Bounds a GeoJSON reader keeps while it reads, so that a hostile document is refused before
    /// it costs its size in memory: each is checked as the bytes are read.
    public struct Limits: Hashable, Sendable {
        /// The most features. The default is unbounded.
        public var features: Int
        /// The most vertices one feature's coordinates may hold: reading stops once they hold more
        /// values (numbers and the arrays around them) than that many vertices with altitudes
        /// (4 each). The default is unbounded.
        public var verticesPerFeature: Int
        /// The most ids in one feature's `properties.devices`. The default is unbounded.
        public var devices: Int

        public init(features: Int = .max, verticesPerFeature: Int = .max, devices: Int = .max) {
            self.features = features
            self.verticesPerFeature = verticesPerFeature
            self.devices = devices
        }

        /// The values ``verticesPerFeature`` allows.
        var coordinateValues: Int {
            verticesPerFeature >= Int.max / 8 ? .max : 4 * verticesPerFeature + 16
        }
    }

    /// Parses a FeatureCollection (or a single Feature).
    public static func parseGeoJSON(_ data: [UInt8]) throws(FormatsError) -> [RegionDefinition] {
        var out: [RegionDefinition] = []
        try parseGeoJSON(data) { out.append($0) }
        return out
    }

    /// Parses a FeatureCollection (or a single Feature), handing each region to `body` as it is
    /// read (nothing is kept).
    ///
    /// - Throws: ``FormatsError`` naming the feature (its position and id) or the byte offset.
    /// - Complexity: O(bytes).
    public static func parseGeoJSON(_ data: [UInt8], _ body: (RegionDefinition) -> Void) throws(FormatsError) {
        try parseGeoJSON(data, limits: Limits()) { (d) throws(FormatsError) in body(d) }
    }

    /// Parses a FeatureCollection (or a single Feature) within `limits`, handing each region to
    /// `body` as it is read; `body` may stop the reading by throwing.
    ///
    /// - Throws: ``FormatsError`` naming the feature (its position and id) or the byte offset;
    ///   ``FormatsError/Code/tooLarge`` for a document past `limits`; what `body` throws.
    /// - Complexity: O(bytes); memory O(one feature) besides what `body` keeps.
    public static func parseGeoJSON(
        _ data: [UInt8], limits: Limits, _ body: (RegionDefinition) throws(FormatsError) -> Void
    ) throws(FormatsError) {
        var scanner = JSONScanner(data)
        do throws(FormatsError) {
            var root = Feature(limits: limits)
            var count = 0
            try scanner.members { (s, key) throws(FormatsError) in
                if key == "features" {
                    guard s.peek == UInt8(ascii: "[") else {
                        throw FormatsError(.invalid, "FeatureCollection without features")
                    }
                    try s.elements { (s) throws(FormatsError) in
                        count += 1
                        guard count <= limits.features else {
                            throw FormatsError(.tooLarge, "more than \(limits.features) features", byteOffset: s.i)
                        }
                        var feature = Feature(limits: limits)
                        feature.name = "feature \(count)"
                        try feature.read(&s)
                        try body(try feature.definition(name: "feature \(count)"))
                    }
                    root.hasFeatures = true
                } else {
                    try root.readField(key, &s)
                }
            }
            guard scanner.atEnd else { throw scanner.fail("data after the document") }
            switch root.type {
            case "FeatureCollection":
                guard root.hasFeatures else { throw FormatsError(.invalid, "FeatureCollection without features") }
            case "Feature":
                try body(try root.definition(name: "feature 1"))
            default:
                throw FormatsError(.invalid, "expected a GeoJSON FeatureCollection or Feature")
            }
        } catch  where error.code == .malformedJSON {
            throw FormatsError(.malformedJSON, "not valid JSON: \(error.message)", byteOffset: error.byteOffset)
        }
    }

    /// Nested coordinate arrays as read.
    indirect enum Coordinates {
        case number(Double)
        case list([Coordinates])

        var numbers: [Double]? {
            guard case .list(let l) = self else { return nil }
            var out: [Double] = []
            for c in l {
                guard case .number(let n) = c else { return nil }
                out.append(n)
            }
            return out
        }

        var list: [Coordinates]? { if case .list(let l) = self { l } else { nil } }
    }

    /// The fields of a feature (or the document root) as read, in any key order.
    struct Feature {
        var type: String?
        var id: IDValue?
        var geometryType: String?
        var geometryPresent = false
        var coordinates: Coordinates?
        var propertyID: IDValue?
        var radius: Double?
        var dwell: Double?
        var notifyOnEntry: Bool?
        var notifyOnExit: Bool?
        var devices: [String]?
        var hasFeatures = false
        /// The bounds the reading keeps.
        var limits = Limits()
        /// The feature's name in errors (`feature 3`).
        var name = "feature 1"

        enum IDValue {
            case string(String)
            case number(Double)
            case other
        }

        mutating func read(_ s: inout JSONScanner) throws(JSONScanner.Failure) {
            if s.takeNull() { return }
            try s.members { (s, key) throws(FormatsError) in try readField(key, &s) }
        }

        mutating func readField(_ key: String, _ s: inout JSONScanner) throws(JSONScanner.Failure) {
            switch key {
            case "type": type = try s.optionalString()
            case "id": id = try s.idValue()
            case "geometry":
                if s.takeNull() { return }
                geometryPresent = true
                try s.members { (s, k) throws(FormatsError) in
                    switch k {
                    case "type": geometryType = try s.optionalString()
                    case "coordinates":
                        var budget = limits.coordinateValues
                        do throws(FormatsError) {
                            coordinates = try s.coordinates(depth: 0, budget: &budget)
                        } catch  where error.code == .tooLarge {
                            throw FormatsError(
                                .tooLarge, "\(name): more coordinates than \(limits.verticesPerFeature) vertices",
                                byteOffset: error.byteOffset)
                        }
                    default: try s.skipValue()
                    }
                }
            case "properties":
                if s.takeNull() { return }
                s.skipWhitespace()
                guard s.peek == UInt8(ascii: "{") else {
                    try s.skipValue()
                    return
                }
                try s.members { (s, k) throws(FormatsError) in
                    switch k {
                    case "id": propertyID = try s.idValue()
                    case "radius": radius = try s.optionalNumber()
                    case "dwell": dwell = try numberOrNull(&s, "dwell", "a number of seconds")
                    case "notifyOnEntry": notifyOnEntry = try boolOrNull(&s, "notifyOnEntry")
                    case "notifyOnExit": notifyOnExit = try boolOrNull(&s, "notifyOnExit")
                    case "devices": devices = try readDevices(&s)
                    default: try s.skipValue()
                    }
                }
            default:
                try s.skipValue()
            }
        }

        /// A property that is a number or `null` (not set): another value (`"5m"`) is refused, not
        /// taken as unset.
        func numberOrNull(_ s: inout JSONScanner, _ key: String, _ what: String) throws(FormatsError) -> Double? {
            if s.takeNull() { return nil }
            guard let p = s.peek, p == UInt8(ascii: "-") || (48...57).contains(p) else {
                throw FormatsError(.invalid, "\(name): properties.\(key) must be \(what)", byteOffset: s.i)
            }
            return try s.optionalNumber()
        }

        /// A property that is `true`, `false` or `null` (not set): another value (`"no"`) is refused.
        func boolOrNull(_ s: inout JSONScanner, _ key: String) throws(FormatsError) -> Bool? {
            if s.takeNull() { return nil }
            guard s.peek == UInt8(ascii: "t") || s.peek == UInt8(ascii: "f") else {
                throw FormatsError(.invalid, "\(name): properties.\(key) must be true or false", byteOffset: s.i)
            }
            return try s.optionalBool()
        }

        /// `properties.devices`: `null` (every device) or an array of strings, at most
        /// ``Limits/devices`` of them.
        func readDevices(_ s: inout JSONScanner) throws(FormatsError) -> [String]? {
            if s.takeNull() { return nil }
            guard s.peek == UInt8(ascii: "[") else {
                throw FormatsError(
                    .invalid, "\(name): properties.devices must be an array of device ids", byteOffset: s.i)
            }
            var out: [String] = []
            try s.elements { (s) throws(FormatsError) in
                guard s.peek == 0x22 else {
                    throw FormatsError(
                        .invalid, "\(name): properties.devices must hold strings (device ids)", byteOffset: s.i)
                }
                guard out.count < limits.devices else {
                    throw FormatsError(.tooLarge, "\(name): more than \(limits.devices) devices", byteOffset: s.i)
                }
                out.append(try s.string())
            }
            return out
        }

        func definition(name: String) throws(FormatsError) -> RegionDefinition {
            let id: String
            func text(_ v: IDValue?) -> String? {
                switch v {
                case .string(let s): s.isEmpty ? nil : s
                case .number(let n): n == n.rounded() && abs(n) < 9e18 ? String(Int(n)) : String(n)
                default: nil
                }
            }
            // An empty string names nothing (a region's id is its key everywhere): it counts as
            // absent, and the other place is tried.
            if case .string(let s) = self.id, !s.isEmpty {
                id = s
            } else if case .string(let s) = propertyID, !s.isEmpty {
                id = s
            } else if let s = text(self.id) ?? text(propertyID) {
                id = s
            } else {
                throw FormatsError(
                    .invalid,
                    "\(name): no id (set the feature's \"id\" or properties.id to a non-empty string or a number)")
            }
            guard geometryPresent, let type = geometryType else {
                throw FormatsError(.invalid, "\(name) (\(id)): no geometry")
            }
            let shape: Shape
            switch type {
            case "Point":
                guard let c = coordinates?.numbers, c.count >= 2 else {
                    throw FormatsError(.invalid, "\(name) (\(id)): a Point needs [lon, lat] coordinates")
                }
                guard let radius else {
                    throw FormatsError(
                        .invalid, "\(name) (\(id)): a Point region needs a numeric properties.radius in metres")
                }
                guard c[0].isFinite, c[1].isFinite else {
                    throw FormatsError(.invalid, "\(name) (\(id)): a Point's coordinates overflow a number")
                }
                guard radius.isFinite else {
                    throw FormatsError(.invalid, "\(name) (\(id)): properties.radius overflows a number")
                }
                shape = .circle(center: Coordinate(latitude: c[1], longitude: c[0]), radius: radius)
            case "Polygon":
                guard let rings = coordinates?.list, let outer = rings.first?.list else {
                    throw FormatsError(.invalid, "\(name) (\(id)): a Polygon needs coordinates [[[lon, lat], ...]]")
                }
                var ring: [Coordinate] = []
                ring.reserveCapacity(outer.count)
                for (k, p) in outer.enumerated() {
                    guard let pair = p.numbers, pair.count >= 2 else {
                        throw FormatsError(.invalid, "\(name) (\(id)): vertex \(k + 1) is not [lon, lat]")
                    }
                    guard pair[0].isFinite, pair[1].isFinite else {
                        throw FormatsError(.invalid, "\(name) (\(id)): vertex \(k + 1) overflows a number")
                    }
                    ring.append(Coordinate(latitude: pair[1], longitude: pair[0]))
                }
                shape = .polygon(ring)
            default:
                throw FormatsError(
                    .invalid, "\(name) (\(id)): geometry \(type) is not supported (Point with radius, or Polygon)")
            }
            if let dwell, !dwell.isFinite {
                throw FormatsError(.invalid, "\(name) (\(id)): properties.dwell overflows a number")
            }
            return RegionDefinition(
                id: id, shape: shape, dwell: dwell, notifyOnEntry: notifyOnEntry ?? true,
                notifyOnExit: notifyOnExit ?? true, devices: devices)
        }
    }
}

// MARK: - The region store's file (regions.json)

extension RegionDefinition {
    /// Reads a region store's `regions.json`: a JSON array of objects `{"id", "lat", "lon",
    /// "radius"}` (circles) or `{"id", "ring": [[lat, lon], ...]}` (polygons), with optional
    /// `notifyOnEntry`, `notifyOnExit` (default true) and `dwell`, in any key order.
    ///
    /// - Throws: ``FormatsError`` naming the record or the byte offset.
    /// - Complexity: O(bytes).
    public static func parseStoreRecords(_ data: [UInt8], _ body: (RegionDefinition) -> Void) throws(FormatsError) {
        var s = JSONScanner(data)
        do {
            var n = 0
            try s.elements { (s) throws(FormatsError) in
                n += 1
                var id: String?, lat: Double?, lon: Double?, radius: Double?, dwell: Double?
                var ring: Coordinates?
                var onEntry = true, onExit = true
                var unbounded = Int.max
                try s.members { (s, key) throws(FormatsError) in
                    switch key {
                    case "id": id = try s.string()
                    case "lat": lat = try s.optionalNumber()
                    case "lon": lon = try s.optionalNumber()
                    case "radius": radius = try s.optionalNumber()
                    case "dwell": dwell = try s.optionalNumber()
                    case "ring": ring = try s.takeNull() ? nil : s.coordinates(depth: 0, budget: &unbounded)
                    case "notifyOnEntry": onEntry = try s.optionalBool() ?? true
                    case "notifyOnExit": onExit = try s.optionalBool() ?? true
                    default: try s.skipValue()
                    }
                }
                guard let id, !id.isEmpty else { throw FormatsError(.invalid, "record \(n) has no id") }
                let shape: Shape
                if let ring {
                    var vertices: [Coordinate] = []
                    for (k, p) in (ring.list ?? []).enumerated() {
                        guard let pair = p.numbers, pair.count == 2 else {
                            throw FormatsError(.invalid, "region \(id): vertex \(k + 1) is not [lat, lon]")
                        }
                        vertices.append(Coordinate(latitude: pair[0], longitude: pair[1]))
                    }
                    shape = .polygon(vertices)
                } else if let lat, let lon, let radius {
                    shape = .circle(center: Coordinate(latitude: lat, longitude: lon), radius: radius)
                } else {
                    throw FormatsError(.invalid, "region \(id) has neither a centre and radius nor a ring")
                }
                body(
                    RegionDefinition(
                        id: id, shape: shape, dwell: dwell, notifyOnEntry: onEntry, notifyOnExit: onExit))
            }
            guard s.atEnd else { throw s.fail("data after the array") }
        }
    }

    /// Appends this region as one record of a store's `regions.json` (keys sorted, numbers exact),
    /// without a separator.
    public func appendStoreRecord(to out: inout [UInt8]) {
        if let dwell {
            ByteWriting.appendStatic("{\"dwell\":", to: &out)
            Self.appendNumber(dwell, to: &out)
            ByteWriting.appendStatic(",\"id\":", to: &out)
        } else {
            ByteWriting.appendStatic("{\"id\":", to: &out)
        }
        ByteWriting.appendJSONString(id, to: &out)
        switch shape {
        case .circle(let c, let radius):
            ByteWriting.appendStatic(",\"lat\":", to: &out)
            Self.appendNumber(c.latitude, to: &out)
            ByteWriting.appendStatic(",\"lon\":", to: &out)
            Self.appendNumber(c.longitude, to: &out)
            appendFlags(to: &out)
            ByteWriting.appendStatic(",\"radius\":", to: &out)
            Self.appendNumber(radius, to: &out)
        case .polygon(let ring):
            appendFlags(to: &out)
            ByteWriting.appendStatic(",\"ring\":[", to: &out)
            for (k, v) in ring.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.append(UInt8(ascii: "["))
                Self.appendNumber(v.latitude, to: &out)
                out.append(UInt8(ascii: ","))
                Self.appendNumber(v.longitude, to: &out)
                out.append(UInt8(ascii: "]"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
    }

    private func appendFlags(to out: inout [UInt8]) {
        ByteWriting.appendStatic(",\"notifyOnEntry\":", to: &out)
        if notifyOnEntry {
            ByteWriting.appendStatic("true", to: &out)
        } else {
            ByteWriting.appendStatic("false", to: &out)
        }
        ByteWriting.appendStatic(",\"notifyOnExit\":", to: &out)
        if notifyOnExit {
            ByteWriting.appendStatic("true", to: &out)
        } else {
            ByteWriting.appendStatic("false", to: &out)
        }
    }

    /// The shortest text that reads back as the same Double (finite values only).
    static func appendNumber(_ v: Double, to out: inout [UInt8]) {
        if v == v.rounded(), abs(v) < 1e15 {
            ByteWriting.appendInt(Int64(v), to: &out)
        } else {
            out.append(contentsOf: v.description.utf8)
        }
    }
}

extension JSONScanner {
    var peek: UInt8? {
        mutating get {
            skipWhitespace()
            return i < bytes.count ? bytes[i] : nil
        }
    }

    /// Consumes `null` if it is next.
    mutating func takeNull() -> Bool {
        skipWhitespace()
        if i + 4 <= bytes.count, bytes[i] == UInt8(ascii: "n"), bytes[i + 1] == UInt8(ascii: "u"),
            bytes[i + 2] == UInt8(ascii: "l"), bytes[i + 3] == UInt8(ascii: "l")
        {
            i += 4
            return true
        }
        return false
    }

    /// A string, or `nil` for any other value (skipped).
    mutating func optionalString() throws(Failure) -> String? {
        if peek == 0x22 { return try string() }
        try skipValue()
        return nil
    }

    /// A number, or `nil` for any other value (skipped).
    mutating func optionalNumber() throws(Failure) -> Double? {
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") || (bytes[i] >= 48 && bytes[i] <= 57) { return try number() }
        if case .number(let n) = try value() { return n }
        return nil
    }

    /// `true` or `false`, or `nil` for any other value (skipped).
    mutating func optionalBool() throws(Failure) -> Bool? {
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "f") {
            try literal("false")
            return false
        }
        try skipValue()
        return nil
    }

    mutating func idValue() throws(Failure) -> RegionDefinition.Feature.IDValue {
        switch try value() {
        case .string(let s): .string(s)
        case .number(let n): .number(n)
        default: .other
        }
    }

    /// Nested arrays of numbers (GeoJSON coordinates); any other value inside is refused. Each
    /// number and array takes one of `budget`: past it, a ``FormatsError/Code/tooLarge`` error.
    mutating func coordinates(depth: Int, budget: inout Int) throws(Failure) -> RegionDefinition.Coordinates {
        skipWhitespace()
        guard i < bytes.count else { throw fail("expected coordinates") }
        budget -= 1
        guard budget >= 0 else { throw FormatsError(.tooLarge, "too many coordinates", byteOffset: i) }
        if bytes[i] != UInt8(ascii: "[") {
            guard bytes[i] == UInt8(ascii: "-") || (bytes[i] >= 48 && bytes[i] <= 57) else {
                throw fail("expected a number in coordinates")
            }
            return .number(try number())
        }
        guard depth < Self.maxDepth else { throw fail("arrays nested deeper than \(Self.maxDepth) levels") }
        i += 1
        var out: [RegionDefinition.Coordinates] = []
        if take(UInt8(ascii: "]")) { return .list(out) }
        repeat { out.append(try coordinates(depth: depth + 1, budget: &budget)) } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"))
        return .list(out)
    }
}

// MARK: - The region store's saved states (region-states.json)

extension RegionDefinition {
    /// Reads `region-states.json`: `{"inside": [{"id", "enteredAt"?, "dwellReported"}, ...]}`.
    public static func parseSavedStates(_ data: [UInt8]) throws(FormatsError)
        -> [(id: String, enteredAt: Double?, dwellReported: Bool)]
    {
        var s = JSONScanner(data)
        var out: [(id: String, enteredAt: Double?, dwellReported: Bool)] = []
        do {
            try s.members { (s, key) throws(FormatsError) in
                guard key == "inside" else {
                    try s.skipValue()
                    return
                }
                try s.elements { (s) throws(FormatsError) in
                    var id: String?, enteredAt: Double?, dwell = false
                    try s.members { (s, k) throws(FormatsError) in
                        switch k {
                        case "id": id = try s.string()
                        case "enteredAt": enteredAt = try s.optionalNumber()
                        case "dwellReported": dwell = try s.optionalBool() ?? false
                        default: try s.skipValue()
                        }
                    }
                    guard let id else { throw FormatsError(.invalid, "an inside region without an id") }
                    out.append((id, enteredAt, dwell))
                }
            }
            guard s.atEnd else { throw s.fail("data after the object") }
        }
        return out
    }

    /// Writes `region-states.json` for these inside regions.
    public static func appendSavedStates(
        _ inside: [(id: String, enteredAt: Double?, dwellReported: Bool)],
        to out: inout [UInt8]
    ) {
        ByteWriting.appendStatic("{\"inside\":[", to: &out)
        for (k, e) in inside.enumerated() {
            if k > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendStatic("{\"dwellReported\":", to: &out)
            if e.dwellReported {
                ByteWriting.appendStatic("true", to: &out)
            } else {
                ByteWriting.appendStatic("false", to: &out)
            }
            if let t = e.enteredAt {
                ByteWriting.appendStatic(",\"enteredAt\":", to: &out)
                appendNumber(t, to: &out)
            }
            ByteWriting.appendStatic(",\"id\":", to: &out)
            ByteWriting.appendJSONString(e.id, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("]}\n", to: &out)
    }
}
