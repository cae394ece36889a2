#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Distances, bearings and destinations on the WGS84 ellipsoid and on a sphere.
///
/// `distance` and `initialBearing` use Vincenty's inverse formulae on WGS84 (sub-millimetre on
/// all but nearly antipodal pairs, checked against GeographicLib in the tests); where Vincenty's
/// iteration does not converge (points within about 0.5° of antipodal) they fall back to the
/// haversine result on the mean-radius sphere, which is within 0.5 % there.
public enum Geodesy {
    /// WGS84 semi-major axis, metres.
    public static let a = 6_378_137.0
    /// WGS84 flattening.
    public static let f = 1 / 298.257_223_563
    /// WGS84 semi-minor axis, metres.
    public static let b = a * (1 - f)
    /// Mean Earth radius (IUGG R1 = (2a + b) / 3), metres, used by the spherical formulae.
    public static let meanRadius = 6_371_008.8

    @inline(__always) static func rad(_ d: Double) -> Double { d * .pi / 180 }
    @inline(__always) static func deg(_ r: Double) -> Double { r * 180 / .pi }

    /// Great-circle distance on the mean-radius sphere, in metres.
    ///
    /// - Complexity: O(1); about 4× cheaper than ``vincentyDistance(_:_:)``.
    @inlinable
    public static func haversineDistance(_ p: Coordinate, _ q: Coordinate) -> Double {
        let phi1 = p.latitude * .pi / 180
        let phi2 = q.latitude * .pi / 180
        let dPhi = phi2 - phi1
        let dLambda = (q.longitude - p.longitude) * .pi / 180
        let s1 = sin(dPhi / 2)
        let s2 = sin(dLambda / 2)
        let h = s1 * s1 + cos(phi1) * cos(phi2) * s2 * s2
        return 2 * meanRadius * asin(min(1, h.squareRoot()))
    }

    /// The result of Vincenty's inverse problem.
    public struct Inverse: Hashable, Sendable {
        /// Distance in metres.
        public var distance: Double
        /// Initial azimuth at the first point, degrees in 0..<360.
        public var initialBearing: Double
        /// Final azimuth at the second point, degrees in 0..<360.
        public var finalBearing: Double
    }

    /// Vincenty's inverse solution on WGS84, or `nil` when the iteration fails to converge
    /// (nearly antipodal points).
    public static func vincentyInverse(_ p: Coordinate, _ q: Coordinate) -> Inverse? {
        let L = rad(normalizeLongitude(q.longitude - p.longitude))
        let U1 = atan((1 - f) * tan(rad(p.latitude)))
        let U2 = atan((1 - f) * tan(rad(q.latitude)))
        let sinU1 = sin(U1), cosU1 = cos(U1), sinU2 = sin(U2), cosU2 = cos(U2)
        var lambda = L
        var sinSigma = 0.0, cosSigma = 0.0, sigma = 0.0, cos2Alpha = 0.0, cos2SigmaM = 0.0
        var sinLambda = 0.0, cosLambda = 0.0
        var converged = false
        for _ in 0..<200 {
            sinLambda = sin(lambda)
            cosLambda = cos(lambda)
            let t1 = cosU2 * sinLambda
            let t2 = cosU1 * sinU2 - sinU1 * cosU2 * cosLambda
            sinSigma = (t1 * t1 + t2 * t2).squareRoot()
            if sinSigma == 0 {
                return Inverse(distance: 0, initialBearing: 0, finalBearing: 0)
            }
            cosSigma = sinU1 * sinU2 + cosU1 * cosU2 * cosLambda
            sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1 * cosU2 * sinLambda / sinSigma
            cos2Alpha = 1 - sinAlpha * sinAlpha
            cos2SigmaM = cos2Alpha != 0 ? cosSigma - 2 * sinU1 * sinU2 / cos2Alpha : 0
            let C = f / 16 * cos2Alpha * (4 + f * (4 - 3 * cos2Alpha))
            let previous = lambda
            lambda =
                L + (1 - C) * f * sinAlpha
                * (sigma + C * sinSigma * (cos2SigmaM + C * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(lambda) > .pi { return nil }
            // Relative tolerance: for short lines lambda itself is tiny (1 m ≈ 1.6e-7 rad).
            if abs(lambda - previous) <= 1e-14 * max(abs(lambda), 1e-9) {
                converged = true
                break
            }
        }
        guard converged else { return nil }
        let uSq = cos2Alpha * (a * a - b * b) / (b * b)
        let A = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let B = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
        let deltaSigma =
            B * sinSigma
            * (cos2SigmaM + B / 4
                * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM) - B / 6 * cos2SigmaM
                    * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
        let s = b * A * (sigma - deltaSigma)
        let alpha1 = atan2(cosU2 * sinLambda, cosU1 * sinU2 - sinU1 * cosU2 * cosLambda)
        let alpha2 = atan2(cosU1 * sinLambda, -sinU1 * cosU2 + cosU1 * sinU2 * cosLambda)
        return Inverse(distance: s, initialBearing: normalize(deg(alpha1)), finalBearing: normalize(deg(alpha2)))
    }

    /// Ellipsoidal (WGS84) distance in metres; see the type's notes for the antipodal fallback.
    public static func distance(_ p: Coordinate, _ q: Coordinate) -> Double {
        vincentyInverse(p, q)?.distance ?? haversineDistance(p, q)
    }

    /// Initial bearing from `p` towards `q` on WGS84, degrees clockwise from true north in 0..<360.
    public static func initialBearing(from p: Coordinate, to q: Coordinate) -> Double {
        if let inverse = vincentyInverse(p, q) { return inverse.initialBearing }
        return sphericalInitialBearing(from: p, to: q)
    }

    /// Initial bearing on the sphere, degrees in 0..<360.
    public static func sphericalInitialBearing(from p: Coordinate, to q: Coordinate) -> Double {
        let phi1 = rad(p.latitude), phi2 = rad(q.latitude)
        let dLambda = rad(q.longitude - p.longitude)
        let y = sin(dLambda) * cos(phi2)
        let x = cos(phi1) * sin(phi2) - sin(phi1) * cos(phi2) * cos(dLambda)
        return normalize(deg(atan2(y, x)))
    }

    /// The point reached from `p` after `distance` metres on the initial `bearing` (Vincenty's
    /// direct formulae on WGS84).
    public static func destination(from p: Coordinate, bearing: Double, distance s: Double) -> Coordinate {
        let alpha1 = rad(bearing)
        let sinAlpha1 = sin(alpha1), cosAlpha1 = cos(alpha1)
        let tanU1 = (1 - f) * tan(rad(p.latitude))
        let cosU1 = 1 / (1 + tanU1 * tanU1).squareRoot()
        let sinU1 = tanU1 * cosU1
        let sigma1 = atan2(tanU1, cosAlpha1)
        let sinAlpha = cosU1 * sinAlpha1
        let cos2Alpha = 1 - sinAlpha * sinAlpha
        let uSq = cos2Alpha * (a * a - b * b) / (b * b)
        let A = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
        let B = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
        var sigma = s / (b * A)
        var cos2SigmaM = 0.0, sinSigma = 0.0, cosSigma = 0.0
        for _ in 0..<200 {
            cos2SigmaM = cos(2 * sigma1 + sigma)
            sinSigma = sin(sigma)
            cosSigma = cos(sigma)
            let deltaSigma =
                B * sinSigma
                * (cos2SigmaM + B / 4
                    * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM) - B / 6 * cos2SigmaM
                        * (-3 + 4 * sinSigma * sinSigma) * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
            let previous = sigma
            sigma = s / (b * A) + deltaSigma
            if abs(sigma - previous) < 1e-12 { break }
        }
        cos2SigmaM = cos(2 * sigma1 + sigma)
        sinSigma = sin(sigma)
        cosSigma = cos(sigma)
        let x = sinU1 * sinSigma - cosU1 * cosSigma * cosAlpha1
        let phi2 = atan2(
            sinU1 * cosSigma + cosU1 * sinSigma * cosAlpha1, (1 - f) * (sinAlpha * sinAlpha + x * x).squareRoot())
        let lambda = atan2(sinSigma * sinAlpha1, cosU1 * cosSigma - sinU1 * sinSigma * cosAlpha1)
        let C = f / 16 * cos2Alpha * (4 + f * (4 - 3 * cos2Alpha))
        let L =
            lambda - (1 - C) * f * sinAlpha
            * (sigma + C * sinSigma * (cos2SigmaM + C * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
        return Coordinate(latitude: deg(phi2), longitude: normalizeLongitude(p.longitude + deg(L)))
    }

    /// An angle in degrees mapped to 0..<360.
    @inlinable
    public static func normalize(_ degrees: Double) -> Double {
        let r = degrees.truncatingRemainder(dividingBy: 360)
        let v = r < 0 ? r + 360 : r
        return v >= 360 ? 0 : v
    }

    /// A longitude mapped to -180...180.
    @inlinable
    public static func normalizeLongitude(_ degrees: Double) -> Double {
        var r = (degrees + 180).truncatingRemainder(dividingBy: 360)
        if r < 0 { r += 360 }
        return r - 180
    }
}
