import Geo

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension VisitDetector {
    /// Fixes that may be one stay: their weighted sums on a local plane about the first fix, so that
    /// the centre, the spread and the mean accuracy cost O(1) per fix and no allocation.
    struct Stay: Sendable, Hashable, Codable {
        /// The first fix's coordinate (the plane's origin) and accuracy.
        let origin: Coordinate
        let originAccuracy: Double
        /// Metres per degree of longitude and of latitude at the origin (equirectangular: within a
        /// stay's metres it differs from the ellipsoidal distance by far less than GPS noise).
        let metresPerDegreeLongitude: Double
        static let metresPerDegreeLatitude = Geodesy.meanRadius * .pi / 180
        /// The time of the first fix.
        let first: Double
        /// The time and coordinate of the last fix inside.
        var lastInside: Double
        var lastInsideCoordinate: Coordinate
        var count = 0
        var sumWeight = 0.0
        var sumX = 0.0
        var sumY = 0.0
        var sumSquares = 0.0
        var sumAccuracy = 0.0
        /// The trip that led here, measured up to and including the first fix (for the trip the
        /// arrival ends).
        let tripToHere: TripProgress?

        init(_ sample: Sample, accuracy: Double, tripToHere: TripProgress?) {
            origin = sample.coordinate
            originAccuracy = accuracy
            metresPerDegreeLongitude = Self.metresPerDegreeLatitude * cos(origin.latitude * .pi / 180)
            first = sample.time
            lastInside = sample.time
            lastInsideCoordinate = sample.coordinate
            self.tripToHere = tripToHere
            add(sample, accuracy: accuracy)
        }

        /// A coordinate on the plane, in metres east and north of the origin.
        @inline(__always)
        func plane(_ c: Coordinate) -> (x: Double, y: Double) {
            var dLon = c.longitude - origin.longitude
            if dLon > 180 { dLon -= 360 } else if dLon < -180 { dLon += 360 }
            return (dLon * metresPerDegreeLongitude, (c.latitude - origin.latitude) * Self.metresPerDegreeLatitude)
        }

        mutating func add(_ sample: Sample, accuracy: Double) {
            let (x, y) = plane(sample.coordinate)
            let w = 1 / (max(accuracy, 1) * max(accuracy, 1))
            count += 1
            sumWeight += w
            sumX += w * x
            sumY += w * y
            sumSquares += w * (x * x + y * y)
            sumAccuracy += accuracy
            lastInside = sample.time
            lastInsideCoordinate = sample.coordinate
        }

        /// The centre on the plane.
        var centreXY: (x: Double, y: Double) { (sumX / sumWeight, sumY / sumWeight) }

        /// Whether `c` is within `radius` of the centre and, when `anchored`, within `radius` (plus the
        /// first fix's accuracy) of the first fix.
        func contains(_ c: Coordinate, radius: Double, anchored: Bool) -> Bool {
            let (x, y) = plane(c)
            let (cx, cy) = centreXY
            guard (x - cx) * (x - cx) + (y - cy) * (y - cy) <= radius * radius else { return false }
            return !anchored || x * x + y * y <= (radius + originAccuracy) * (radius + originAccuracy)
        }

        var meanAccuracy: Double { sumAccuracy / Double(count) }

        /// The weighted root mean square distance of the fixes from the centre.
        var spread: Double {
            let (cx, cy) = centreXY
            return max(0, sumSquares / sumWeight - cx * cx - cy * cy).squareRoot()
        }

        var centre: Coordinate {
            let (cx, cy) = centreXY
            return Coordinate(
                latitude: origin.latitude + cy / Self.metresPerDegreeLatitude,
                longitude: Geodesy.normalizeLongitude(origin.longitude + cx / metresPerDegreeLongitude))
        }

        func visit(departed: Bool) -> Visit {
            Visit(
                coordinate: centre, horizontalAccuracy: spread, arrival: first,
                departure: departed ? lastInside : nil, fixCount: count)
        }
    }

    /// A trip under way: where and when it began, and what its fixes added up to so far.
    ///
    /// The distance runs along vertices: a fix becomes the next vertex once it is at least its own
    /// accuracy from the last one, so a receiver's metres of noise between 1 Hz fixes do not add up
    /// along a slow walk; the trip's end is joined to the last vertex.
    struct TripProgress: Sendable, Hashable, Codable {
        let start: Double
        let startCoordinate: Coordinate
        var last: Double
        var lastCoordinate: Coordinate
        var vertex: Coordinate
        /// Metres along the vertices, up to ``vertex``.
        var distance = 0.0
        var maximumSpeed = 0.0

        init(start: Double, at coordinate: Coordinate) {
            self.start = start
            startCoordinate = coordinate
            last = start
            lastCoordinate = coordinate
            vertex = coordinate
        }

        mutating func add(_ sample: Sample, accuracy: Double) {
            let speed: Double
            if sample.speed >= 0 {
                speed = sample.speed
            } else {
                speed = Geodesy.distance(lastCoordinate, sample.coordinate) / (sample.time - last)
            }
            if speed > maximumSpeed { maximumSpeed = speed }
            let step = Geodesy.distance(vertex, sample.coordinate)
            if step >= accuracy {
                distance += step
                vertex = sample.coordinate
            }
            last = sample.time
            lastCoordinate = sample.coordinate
        }

        var trip: Trip {
            Trip(
                start: start, end: last, startCoordinate: startCoordinate, endCoordinate: lastCoordinate,
                distance: distance + Geodesy.distance(vertex, lastCoordinate), maximumSpeed: maximumSpeed)
        }
    }
}
