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
        /// When the visit began: the first fix, or once arrived, where the trip that led here came to
        /// rest inside the stay.
        var arrival: Double
        /// The trip under way as it stood at this stay's first fix, and at the first rest inside it
        /// (ended there): what the arrival reports as the trip.
        var firstMark: TripProgress?
        var restMark: TripProgress?

        init(_ sample: Sample, accuracy: Double) {
            origin = sample.coordinate
            originAccuracy = accuracy
            metresPerDegreeLongitude = Self.metresPerDegreeLatitude * cos(origin.latitude * .pi / 180)
            first = sample.time
            lastInside = sample.time
            lastInsideCoordinate = sample.coordinate
            arrival = sample.time
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

        /// Records the trip under way at a smoothed fix: at the stay's first fix, and where the device
        /// first came to rest inside the stay (`restSince`, the last moving fix before the rest).
        mutating func mark(_ trip: TripProgress, at time: Double, restSince: Motion.Rest?) {
            if firstMark == nil && time >= first { firstMark = trip }
            if restMark == nil, let rest = restSince, rest.time >= first {
                restMark = trip.ended(at: rest.time, rest.coordinate)
            }
        }

        func visit(departure: Double?) -> Visit {
            Visit(
                coordinate: centre, horizontalAccuracy: spread, arrival: arrival, departure: departure,
                fixCount: count)
        }
    }
}
