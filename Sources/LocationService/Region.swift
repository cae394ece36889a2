import Geo

/// A monitored area: a circle or a polygon, with an identifier that is unique in a monitor.
public struct Region: Hashable, Sendable {
    public enum Shape: Hashable, Sendable {
        /// Centre and radius in metres.
        case circle(center: Coordinate, radius: Double)
        case polygon(Polygon)
    }

    public let id: String
    public let shape: Shape
    /// Report entries. The default is `true`.
    public var notifyOnEntry = true
    /// Report exits. The default is `true`.
    public var notifyOnExit = true
    /// Report a dwell after staying inside this many seconds. The default is `nil` (no dwell).
    public var loiteringDelay: Double?

    /// The largest extent of a region, in metres: a circle's diameter (a radius of 100 km at most),
    /// a polygon's bounds north to south and east to west. CoreLocation bounds its regions too
    /// (`maximumRegionMonitoringDistance`): a monitor indexes a region in every grid cell its bounds
    /// touch, so one the size of a country would cost gigabytes (a radius of 21,000 km asked for
    /// 35 GB), and its distances are a local projection's, exact for tens of kilometres.
    public static let maximumExtent = 200_000.0

    /// A circular region.
    ///
    /// - Throws: ``LocationError`` (`invalidRegion`) for an empty id, a radius that is not positive
    ///   and finite or is more than half ``maximumExtent``, or a centre off the globe.
    public init(id: String, center: Coordinate, radius: Double) throws(LocationError) {
        guard !id.isEmpty else { throw LocationError(.invalidRegion, "the id is empty", region: id) }
        guard radius > 0, radius.isFinite else {
            let reason = "the radius must be a positive number of metres, got \(radius)"
            throw LocationError(.invalidRegion, reason, region: id)
        }
        guard radius <= Self.maximumExtent / 2 else {
            let reason =
                "the radius must be at most \(Int(Self.maximumExtent / 2_000)) km, got \(Int(radius / 1000)) km"
            throw LocationError(.invalidRegion, reason, region: id)
        }
        guard center.isValid else {
            let reason = "the centre is not a valid coordinate (lat -90...90, lon -180...180)"
            throw LocationError(.invalidRegion, reason, region: id)
        }
        self.id = id
        self.shape = .circle(center: center, radius: radius)
    }

    /// A polygonal region.
    ///
    /// - Throws: ``LocationError`` (`invalidRegion`) for an empty id, fewer than 3 vertices, an
    ///   invalid vertex, a ring that crosses itself, or bounds wider than ``maximumExtent``.
    public init(id: String, ring: [Coordinate]) throws(LocationError) {
        guard !id.isEmpty else { throw LocationError(.invalidRegion, "the id is empty", region: id) }
        let polygon: Polygon
        do throws(GeoError) {
            polygon = try Polygon(ring)
        } catch {
            throw LocationError(.invalidRegion, region: id, underlying: error)
        }
        let b = polygon.bounds
        let degree = Geodesy.meanRadius * .pi / 180
        let northSouth = (b.north - b.south) * degree
        let eastWest = (b.east - b.west) * degree * cos((b.north + b.south) / 2 * .pi / 180)
        guard max(northSouth, eastWest) <= Self.maximumExtent else {
            let reason =
                "the polygon spans \(Int(max(northSouth, eastWest) / 1000)) km, more than "
                + "\(Int(Self.maximumExtent / 1000)) km"
            throw LocationError(.invalidRegion, reason, region: id)
        }
        self.shape = .polygon(polygon)
        self.id = id
    }

    /// Signed distance in metres from `point` to the region's boundary: negative inside.
    public func signedDistance(to point: Coordinate) -> Double {
        switch shape {
        case .circle(let center, let radius):
            return Geodesy.haversineDistance(center, point) - radius
        case .polygon(let polygon):
            let d = polygon.distanceToBoundary(point)
            return polygon.contains(point) ? -d : d
        }
    }

    /// South, west, north, east, in degrees (circles: their bounding box on the sphere).
    public var bounds: (south: Double, west: Double, north: Double, east: Double) {
        switch shape {
        case .circle(let c, let r):
            let dLat = r / Geodesy.meanRadius * 180 / .pi
            let cosLat = max(cos(c.latitude * .pi / 180), 1e-6)
            let dLon = min(180, dLat / cosLat)
            return (c.latitude - dLat, c.longitude - dLon, c.latitude + dLat, c.longitude + dLon)
        case .polygon(let p):
            return p.bounds
        }
    }
}

extension Polygon {
    /// Distance in metres from `point` to the nearest edge (local equirectangular projection:
    /// exact enough for geofences up to tens of kilometres).
    public func distanceToBoundary(_ point: Coordinate) -> Double {
        let k = Geodesy.meanRadius * .pi / 180
        let cosLat = cos(point.latitude * .pi / 180)
        var best = Double.infinity
        let ring = vertices
        var j = ring.count - 1
        for i in 0..<ring.count {
            var lonA = ring[j].longitude - point.longitude
            var lonB = ring[i].longitude - point.longitude
            lonA = Geodesy.normalizeLongitude(lonA)
            lonB = Geodesy.normalizeLongitude(lonB)
            let ax = lonA * k * cosLat, ay = (ring[j].latitude - point.latitude) * k
            let bx = lonB * k * cosLat, by = (ring[i].latitude - point.latitude) * k
            let dx = bx - ax, dy = by - ay
            let len2 = dx * dx + dy * dy
            let t = len2 > 0 ? max(0, min(1, -(ax * dx + ay * dy) / len2)) : 0
            let px = ax + t * dx, py = ay + t * dy
            best = min(best, (px * px + py * py).squareRoot())
            j = i
        }
        return best
    }
}

#if canImport(Glibc)
    import Glibc
#endif
