import FoundationEssentials
import Geo

/// Region definitions read from GeoJSON: Point features with a `radius` (metres) property are
/// circles, Polygon features polygons (outer ring); the feature's `id` (or `properties.id`) names
/// the region. Optional properties: `dwell` (loitering delay, seconds), `notifyOnEntry`,
/// `notifyOnExit` (booleans).
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

    /// A problem in a GeoJSON file, naming the feature.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var message: String
        public var description: String { message }
    }

    /// Parses a FeatureCollection (or a single Feature).
    public static func parseGeoJSON(_ data: [UInt8]) throws(ParseError) -> [RegionDefinition] {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: Data(data))
        } catch {
            throw ParseError(message: "not valid JSON: \(error)")
        }
        let features: [JSONValue]
        switch root["type"]?.string {
        case "FeatureCollection":
            guard let list = root["features"]?.array else { throw ParseError(message: "FeatureCollection without features") }
            features = list
        case "Feature":
            features = [root]
        default:
            throw ParseError(message: "expected a GeoJSON FeatureCollection or Feature")
        }
        var out: [RegionDefinition] = []
        for (index, feature) in features.enumerated() {
            let name = "feature \(index + 1)"
            let props = feature["properties"]
            let id: String
            if let s = feature["id"]?.string ?? props?["id"]?.string {
                id = s
            } else if let n = feature["id"]?.number ?? props?["id"]?.number {
                id = n == n.rounded() ? String(Int(n)) : String(n)
            } else {
                throw ParseError(message: "\(name): no id (set the feature's \"id\" or properties.id)")
            }
            guard let geometry = feature["geometry"], let type = geometry["type"]?.string else {
                throw ParseError(message: "\(name) (\(id)): no geometry")
            }
            let shape: Shape
            switch type {
            case "Point":
                guard let c = geometry["coordinates"]?.array, c.count >= 2, let lon = c[0].number, let lat = c[1].number
                else { throw ParseError(message: "\(name) (\(id)): a Point needs [lon, lat] coordinates") }
                guard let radius = props?["radius"]?.number else {
                    throw ParseError(message: "\(name) (\(id)): a Point region needs a numeric properties.radius in metres")
                }
                shape = .circle(center: Coordinate(latitude: lat, longitude: lon), radius: radius)
            case "Polygon":
                guard let rings = geometry["coordinates"]?.array, let outer = rings.first?.array else {
                    throw ParseError(message: "\(name) (\(id)): a Polygon needs coordinates [[[lon, lat], ...]]")
                }
                var ring: [Coordinate] = []
                for (k, p) in outer.enumerated() {
                    guard let pair = p.array, pair.count >= 2, let lon = pair[0].number, let lat = pair[1].number else {
                        throw ParseError(message: "\(name) (\(id)): vertex \(k + 1) is not [lon, lat]")
                    }
                    ring.append(Coordinate(latitude: lat, longitude: lon))
                }
                shape = .polygon(ring)
            default:
                throw ParseError(message: "\(name) (\(id)): geometry \(type) is not supported (Point with radius, or Polygon)")
            }
            out.append(RegionDefinition(
                id: id, shape: shape, dwell: props?["dwell"]?.number,
                notifyOnEntry: props?["notifyOnEntry"]?.bool ?? true, notifyOnExit: props?["notifyOnExit"]?.bool ?? true))
        }
        return out
    }
}

/// A minimal JSON value for reading documents of loose shape.
enum JSONValue: Decodable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    var string: String? { if case .string(let s) = self { s } else { nil } }
    var number: Double? { if case .number(let n) = self { n } else { nil } }
    var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
}
