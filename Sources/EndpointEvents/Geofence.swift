import Formats
import Geo
import LocationService

/// A named area the endpoint watches its devices' locations against: a ``Region`` (a circle or a
/// polygon, with the device's own `dwell` and notification settings; its id is the geofence's name)
/// and the devices it is for.
public struct Geofence: Hashable, Sendable {
    /// The area, named by its id.
    public var region: Region
    /// The devices it is for, or `nil` for every device.
    public var devices: Set<String>?

    public init(region: Region, devices: Set<String>? = nil) {
        self.region = region
        self.devices = devices
    }

    /// Its name (the region's id): unique among the endpoint's geofences.
    public var name: String { region.id }

    /// Whether `device`'s locations are evaluated against it.
    public func applies(to device: String) -> Bool {
        devices?.contains(device) ?? true
    }
}

/// The endpoint's geofences as a document: GeoJSON as `keeptrack regions import` reads it (Points
/// with a `radius` in metres, Polygons by their outer ring; `id` or `properties.id` names each;
/// `dwell`, `notifyOnEntry`, `notifyOnExit` as for the device), plus `properties.devices`, the
/// devices a geofence is for (absent or `null`: every device).
///
/// A document is taken whole or not at all: every problem is found, each naming its feature (its
/// position and id) and what is wrong, and one error lists them (``EventsError/Code/invalidGeofences``).
/// Its size is bounded as it is read (``Limits``), so a hostile document costs no more than the
/// bounds.
public enum GeofenceDocument {
    /// What a document may hold (docs/limits.md).
    public struct Limits: Hashable, Sendable {
        /// The most bytes. The default is 64 MiB.
        public var bytes = 64 << 20
        /// The most geofences. The default is 100,000.
        public var geofences = 100_000
        /// The most vertices of one polygon. The default is 10,000 (a polygon's check that its
        /// ring does not cross itself takes time that grows with their square).
        public var verticesPerPolygon = 10_000
        /// The most vertices of all polygons together. The default is 1,000,000.
        public var vertices = 1_000_000
        /// The most devices one geofence lists. The default is 1,000.
        public var devicesPerGeofence = 1_000
        /// The largest circle's radius, in metres. The default is 100 km, the most a region has
        /// (``Region/maximumExtent``).
        public var radius = 100_000.0

        public init() {}
    }

    /// The most invalid geofences one error lists: reading stops at the next.
    public static let maxFailures = 1_000

    /// The geofences of a GeoJSON document (a FeatureCollection, or a Feature for one), in the
    /// document's order.
    ///
    /// - Throws: ``EventsError``: ``EventsError/Code/tooLarge`` past `limits`,
    ///   ``EventsError/Code/invalidDocument`` for what is not such a document (with the byte
    ///   offset), ``EventsError/Code/invalidGeofences`` listing every geofence that cannot be
    ///   evaluated (an invalid or repeated id, a shape off the globe, a ring that crosses itself, a
    ///   negative dwell, an invalid device id).
    /// - Complexity: O(bytes), plus O(n²) for each polygon of n vertices.
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(EventsError) -> [Geofence] {
        guard bytes.count <= limits.bytes else {
            throw EventsError(.tooLarge, "the document has \(bytes.count) bytes, more than \(limits.bytes)")
        }
        var out: [Geofence] = []
        var failures: [EventsError] = []
        var firstFeature: [String: Int] = [:]
        var vertices = 0
        var feature = 0
        let readerLimits = RegionDefinition.Limits(
            features: limits.geofences, verticesPerFeature: limits.verticesPerPolygon,
            devices: limits.devicesPerGeofence)
        do throws(FormatsError) {
            try RegionDefinition.parseGeoJSON(bytes, limits: readerLimits) { (d) throws(FormatsError) in
                feature += 1
                if case .polygon(let ring) = d.shape {
                    vertices += GeofenceDocument.vertexCount(ring)
                    if vertices > limits.vertices {
                        throw FormatsError(
                            .tooLarge, "feature \(feature) (\(d.id)): more than \(limits.vertices) vertices in all")
                    }
                }
                do throws(EventsError) {
                    let g = try geofence(d, feature: feature, limits: limits)
                    if let first = firstFeature[g.name] {
                        throw EventsError(
                            .invalidGeofence, "the id is feature \(first)'s too", feature: feature, geofence: g.name)
                    }
                    firstFeature[g.name] = feature
                    out.append(g)
                } catch {
                    failures.append(error)
                    if failures.count >= maxFailures {
                        throw FormatsError(.unsupported, "stopped after \(maxFailures) invalid geofences")
                    }
                }
            }
        } catch  where error.code == .unsupported {
            // Too many invalid ones to list: those found say enough.
        } catch {
            let code: EventsError.Code = error.code == .tooLarge ? .tooLarge : .invalidDocument
            throw EventsError(code, error.message, byteOffset: error.byteOffset, underlying: error)
        }
        guard failures.isEmpty else { throw EventsError(.invalidGeofences, failures: failures) }
        return out
    }

    /// A ring's vertices, its closing repetition of the first not counted.
    static func vertexCount(_ ring: [Coordinate]) -> Int {
        ring.count > 1 && ring.first == ring.last ? ring.count - 1 : ring.count
    }

    /// One geofence from its definition, checked.
    static func geofence(_ d: RegionDefinition, feature: Int, limits: Limits) throws(EventsError) -> Geofence {
        func fail(_ message: String, _ underlying: (any Error)? = nil) -> EventsError {
            EventsError(.invalidGeofence, message, feature: feature, geofence: d.id, underlying: underlying)
        }
        if let problem = TrailRecord.identifierProblem(d.id) { throw fail("the id \(problem)") }
        if let dwell = d.dwell, dwell < 0 { throw fail("properties.dwell must be 0 or more seconds") }
        if case .circle(_, let radius) = d.shape, radius > limits.radius {
            throw fail("the radius must be at most \(Int(limits.radius)) metres")
        }
        if case .polygon(let ring) = d.shape, vertexCount(ring) > limits.verticesPerPolygon {
            throw fail(
                "a polygon may have at most \(limits.verticesPerPolygon) vertices, this one has \(vertexCount(ring))")
        }
        var devices: Set<String>?
        if let listed = d.devices {
            guard !listed.isEmpty else {
                throw fail("properties.devices is empty (leave it out, or null, for every device)")
            }
            for (i, device) in listed.enumerated() {
                if let problem = TrailRecord.identifierProblem(device) {
                    throw fail("properties.devices[\(i)]: the device id \(problem)")
                }
            }
            devices = Set(listed)
        }
        do throws(LocationError) {
            return Geofence(region: try Region(d), devices: devices)
        } catch {
            // The region's own words (a radius, a centre off the globe, a ring that crosses
            // itself: edges by number, never a coordinate).
            throw fail(error.underlying.map { "\($0)" } ?? error.reason, error)
        }
    }

    /// The geofences as a GeoJSON FeatureCollection that ``parse(_:limits:)`` reads back equal.
    public static func geoJSON(_ geofences: [Geofence]) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"type\":\"FeatureCollection\",\"features\":[", to: &out)
        for (i, g) in geofences.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendFeature(g, to: &out)
        }
        ByteWriting.appendStatic("]}\n", to: &out)
        return out
    }

    /// One geofence as a GeoJSON Feature (what `GET /v1/geofences/{name}` answers).
    public static func feature(_ g: Geofence) -> [UInt8] {
        var out: [UInt8] = []
        appendFeature(g, to: &out)
        out.append(UInt8(ascii: "\n"))
        return out
    }

    static func appendFeature(_ g: Geofence, to out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"type\":\"Feature\",\"id\":", to: &out)
        ByteWriting.appendJSONString(g.name, to: &out)
        ByteWriting.appendStatic(",\"geometry\":", to: &out)
        switch g.region.shape {
        case .circle(let c, _):
            ByteWriting.appendStatic("{\"type\":\"Point\",\"coordinates\":[", to: &out)
            appendExact(c.longitude, to: &out)
            out.append(UInt8(ascii: ","))
            appendExact(c.latitude, to: &out)
            ByteWriting.appendStatic("]}", to: &out)
        case .polygon(let p):
            ByteWriting.appendStatic("{\"type\":\"Polygon\",\"coordinates\":[[", to: &out)
            // GeoJSON closes a ring by repeating its first vertex.
            for (k, v) in (p.vertices + [p.vertices[0]]).enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                out.append(UInt8(ascii: "["))
                appendExact(v.longitude, to: &out)
                out.append(UInt8(ascii: ","))
                appendExact(v.latitude, to: &out)
                out.append(UInt8(ascii: "]"))
            }
            ByteWriting.appendStatic("]]}", to: &out)
        }
        ByteWriting.appendStatic(",\"properties\":{", to: &out)
        if case .circle(_, let radius) = g.region.shape {
            ByteWriting.appendStatic("\"radius\":", to: &out)
            appendExact(radius, to: &out)
            out.append(UInt8(ascii: ","))
        }
        if let dwell = g.region.loiteringDelay {
            ByteWriting.appendStatic("\"dwell\":", to: &out)
            appendExact(dwell, to: &out)
            out.append(UInt8(ascii: ","))
        }
        ByteWriting.appendStatic("\"notifyOnEntry\":", to: &out)
        out.append(contentsOf: (g.region.notifyOnEntry ? "true" : "false").utf8)
        ByteWriting.appendStatic(",\"notifyOnExit\":", to: &out)
        out.append(contentsOf: (g.region.notifyOnExit ? "true" : "false").utf8)
        ByteWriting.appendStatic(",\"devices\":", to: &out)
        if let devices = g.devices {
            out.append(UInt8(ascii: "["))
            for (i, d) in devices.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                ByteWriting.appendJSONString(d, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        } else {
            ByteWriting.appendStatic("null", to: &out)
        }
        ByteWriting.appendStatic("}}", to: &out)
    }

    /// The shortest decimal that reads back as the same number (Swift's own).
    static func appendExact(_ v: Double, to out: inout [UInt8]) {
        out.append(contentsOf: v.description.utf8)
    }
}
