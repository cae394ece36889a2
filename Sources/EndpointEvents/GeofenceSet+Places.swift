import Geo
import LocationService

#if canImport(Glibc)
    import Glibc
#endif

extension GeofenceSet {
    /// The names of the geofences for `device` (its own and those of every device) that contain
    /// `point`, the smallest first, then by name: the user's own names of a place ("home" inside
    /// "city"), which name a visit there before a reverse geocoder (docs/endpoint.md, "Place names").
    /// A point on a boundary is inside.
    public func names(containing point: Coordinate, device: String) -> [String] {
        var found: [(area: Double, name: String)] = []
        let location = Probe.Location(latitude: point.latitude, longitude: point.longitude)
        forEachCandidate(at: point) { slot in
            let i = Int(slot)
            let geofence = slots[i].geofence
            guard geofence.applies(to: device), probes[i].mayBeInside(location, margin: 0),
                geofence.region.signedDistance(to: point) <= 0
            else { return }
            found.append((Self.area(of: geofence.region), geofence.name))
        }
        return found.sorted { ($0.area, $0.name) < ($1.area, $1.name) }.map(\.name)
    }

    /// A region's area in square metres, to order nested ones: a circle's π r², a polygon's in a
    /// local equirectangular projection about its first vertex (as exact as a geofence needs).
    static func area(of region: Region) -> Double {
        switch region.shape {
        case .circle(_, let radius):
            return .pi * radius * radius
        case .polygon(let polygon):
            let ring = polygon.vertices
            guard let origin = ring.first else { return 0 }
            let k = Geodesy.meanRadius * .pi / 180
            let cosLat = cos(origin.latitude * .pi / 180)
            func xy(_ c: Coordinate) -> (Double, Double) {
                (
                    Geodesy.normalizeLongitude(c.longitude - origin.longitude) * k * cosLat,
                    (c.latitude - origin.latitude) * k
                )
            }
            var twice = 0.0
            var previous = xy(ring[ring.count - 1])
            for vertex in ring {
                let p = xy(vertex)
                twice += previous.0 * p.1 - p.0 * previous.1
                previous = p
            }
            return abs(twice) / 2
        }
    }
}
