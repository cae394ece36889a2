/// A simple polygon of coordinates (one outer ring, no holes), closed implicitly.
///
/// Containment uses the even-odd ray-casting rule in plain latitude/longitude, which is exact for
/// polygons that are small compared with the Earth and do not cross the antimeridian or a pole;
/// rings that cross the antimeridian are unwrapped to continuous longitudes first.
public struct Polygon: Hashable, Sendable {
    /// The vertices, without the repeated closing vertex.
    public let vertices: [Coordinate]
    /// Whether the ring crosses the antimeridian (longitudes were unwrapped).
    let unwrapped: [Coordinate]

    /// Validates and creates a polygon. A repeated closing vertex is dropped.
    ///
    /// - Throws: ``GeoError`` when the ring has fewer than 3 vertices, an invalid coordinate, or
    ///   crosses itself.
    /// - Complexity: O(n²) for the self-intersection check.
    public init(_ ring: [Coordinate]) throws(GeoError) {
        var ring = ring
        if ring.count > 1, ring.first == ring.last { ring.removeLast() }
        for (i, c) in ring.enumerated() where !c.isValid { throw GeoError(.invalidCoordinate, index: i) }
        guard ring.count >= 3 else { throw GeoError(.tooFewVertices, count: ring.count) }
        self.vertices = ring
        self.unwrapped = Polygon.unwrap(ring)
        if let (e, o) = Polygon.firstSelfIntersection(unwrapped) {
            throw GeoError(.selfIntersecting, index: e, otherIndex: o)
        }
    }

    static func unwrap(_ ring: [Coordinate]) -> [Coordinate] {
        var out = [ring[0]]
        out.reserveCapacity(ring.count)
        for c in ring.dropFirst() {
            var lon = c.longitude
            let prev = out[out.count - 1].longitude
            while lon - prev > 180 { lon -= 360 }
            while lon - prev < -180 { lon += 360 }
            out.append(Coordinate(latitude: c.latitude, longitude: lon))
        }
        return out
    }

    /// Whether `point` lies inside the polygon (points exactly on an edge may go either way).
    public func contains(_ point: Coordinate) -> Bool {
        var inside = false
        let ring = unwrapped
        // Try the point's longitude and its ±360° twins so unwrapped rings match.
        for shift in [0.0, 360, -360] {
            let x = point.longitude + shift, y = point.latitude
            inside = false
            var j = ring.count - 1
            for i in 0..<ring.count {
                let xi = ring[i].longitude, yi = ring[i].latitude
                let xj = ring[j].longitude, yj = ring[j].latitude
                if (yi > y) != (yj > y), x < (xj - xi) * (y - yi) / (yj - yi) + xi {
                    inside.toggle()
                }
                j = i
            }
            if inside { return true }
        }
        return false
    }

    /// The bounding box of the (unwrapped) ring: south, west, north, east.
    public var bounds: (south: Double, west: Double, north: Double, east: Double) {
        var s = 90.0, n = -90.0, w = Double.infinity, e = -Double.infinity
        for c in unwrapped {
            s = min(s, c.latitude)
            n = max(n, c.latitude)
            w = min(w, c.longitude)
            e = max(e, c.longitude)
        }
        return (s, w, n, e)
    }

    static func firstSelfIntersection(_ ring: [Coordinate]) -> (Int, Int)? {
        let n = ring.count
        @inline(__always) func orient(_ p: Coordinate, _ q: Coordinate, _ r: Coordinate) -> Double {
            (q.longitude - p.longitude) * (r.latitude - p.latitude) - (q.latitude - p.latitude)
                * (r.longitude - p.longitude)
        }
        @inline(__always) func onSegment(_ p: Coordinate, _ q: Coordinate, _ r: Coordinate) -> Bool {
            min(p.longitude, r.longitude) <= q.longitude && q.longitude <= max(p.longitude, r.longitude)
                && min(p.latitude, r.latitude) <= q.latitude && q.latitude <= max(p.latitude, r.latitude)
        }
        func intersects(_ p1: Coordinate, _ p2: Coordinate, _ q1: Coordinate, _ q2: Coordinate) -> Bool {
            let d1 = orient(q1, q2, p1), d2 = orient(q1, q2, p2)
            let d3 = orient(p1, p2, q1), d4 = orient(p1, p2, q2)
            if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) {
                return true
            }
            if d1 == 0 && onSegment(q1, p1, q2) { return true }
            if d2 == 0 && onSegment(q1, p2, q2) { return true }
            if d3 == 0 && onSegment(p1, q1, p2) { return true }
            if d4 == 0 && onSegment(p1, q2, p2) { return true }
            return false
        }
        for i in 0..<n {
            let a1 = ring[i], a2 = ring[(i + 1) % n]
            for j in (i + 1)..<n {
                // Adjacent edges share a vertex: skip them.
                if j == i + 1 || (i == 0 && j == n - 1) { continue }
                let b1 = ring[j], b2 = ring[(j + 1) % n]
                if intersects(a1, a2, b1, b2) { return (i, j) }
            }
        }
        return nil
    }
}
