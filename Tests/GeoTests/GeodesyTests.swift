import Foundation
import Testing

@testable import Geo

/// Reference values computed with GeographicLib (Karney), see tools/geodesic-reference.py.
struct ReferenceRow {
    var name: String
    var p: Coordinate
    var q: Coordinate
    var distance: Double
    var azimuth1: Double
    var azimuth2: Double

    static let all: [ReferenceRow] = {
        guard
            let url = Bundle.module.url(
                forResource: "geodesic-reference", withExtension: "csv", subdirectory: "Resources"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { fatalError("geodesic-reference.csv missing from the test bundle") }
        return text.split(separator: "\n").dropFirst().map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            return ReferenceRow(
                name: f[0], p: Coordinate(latitude: Double(f[1])!, longitude: Double(f[2])!),
                q: Coordinate(latitude: Double(f[3])!, longitude: Double(f[4])!), distance: Double(f[5])!,
                azimuth1: Double(f[6])!, azimuth2: Double(f[7])!)
        }
    }()
}

func angleDifference(_ a: Double, _ b: Double) -> Double {
    let d = abs(Geodesy.normalize(a) - Geodesy.normalize(b))
    return min(d, 360 - d)
}

@Suite("Geodesy against GeographicLib")
struct GeodesyTests {
    @Test func referenceTableIsLoaded() {
        #expect(ReferenceRow.all.count >= 200)
    }

    @Test func vincentyMatchesGeographicLibWithinAMillimetre() {
        var checked = 0
        for row in ReferenceRow.all where !row.name.hasPrefix("antipodal") {
            let d = Geodesy.distance(row.p, row.q)
            #expect(
                abs(d - row.distance) < 0.001,
                "\(row.name): \(d) vs \(row.distance) \(Geodesy.vincentyInverse(row.p, row.q) == nil)")
            checked += 1
        }
        #expect(checked > 180)
    }

    @Test func antipodalPairsFallBackWithinHalfAPercent() {
        for row in ReferenceRow.all where row.name.hasPrefix("antipodal") {
            let d = Geodesy.distance(row.p, row.q)
            #expect(abs(d - row.distance) / row.distance < 0.005, "\(row.name): \(d) vs \(row.distance)")
        }
    }

    @Test func haversineIsWithinSixTenthsOfAPercentOfTheEllipsoid() {
        // The sphere's error peaks near 0.56 % on meridians; the ellipsoid is what `distance` uses.
        for row in ReferenceRow.all where row.distance > 1000 {
            let d = Geodesy.haversineDistance(row.p, row.q)
            #expect(abs(d - row.distance) / row.distance < 0.006, "\(row.name)")
        }
    }

    @Test func initialBearingMatchesGeographicLib() {
        for row in ReferenceRow.all
        where !row.name.hasPrefix("antipodal") && !row.name.hasPrefix("identical") && abs(row.p.latitude) < 90
            && abs(row.q.latitude) < 90 && !row.name.hasPrefix("pole") && row.distance > 0.001
        {
            let bearing = Geodesy.initialBearing(from: row.p, to: row.q)
            #expect(angleDifference(bearing, row.azimuth1) < 1e-6, "\(row.name): \(bearing) vs \(row.azimuth1)")
        }
    }

    @Test func destinationPointInvertsTheDistanceAndBearing() {
        for row in ReferenceRow.all
        where !row.name.hasPrefix("antipodal") && !row.name.hasPrefix("identical") && abs(row.p.latitude) < 90
            && !row.name.hasPrefix("pole")
        {
            let q = Geodesy.destination(from: row.p, bearing: row.azimuth1, distance: row.distance)
            // 1e-8 degrees is about a millimetre.
            #expect(abs(q.latitude - row.q.latitude) < 1e-8, "\(row.name)")
            #expect(angleDifference(q.longitude, row.q.longitude) < 1e-8 || abs(row.q.latitude) > 89.9, "\(row.name)")
        }
    }

    @Test func normalizesAngles() {
        #expect(Geodesy.normalize(-90) == 270)
        #expect(Geodesy.normalize(720) == 0)
        #expect(Geodesy.normalizeLongitude(190) == -170)
        #expect(Geodesy.normalizeLongitude(-190) == 170)
    }
}

@Suite("Polygons")
struct PolygonTests {
    let square = [
        Coordinate(latitude: 48.0, longitude: 11.0), Coordinate(latitude: 48.0, longitude: 11.1),
        Coordinate(latitude: 48.1, longitude: 11.1), Coordinate(latitude: 48.1, longitude: 11.0),
    ]

    @Test func containsPointsInsideAndNotOutside() throws {
        let p = try Polygon(square)
        #expect(p.contains(Coordinate(latitude: 48.05, longitude: 11.05)))
        #expect(!p.contains(Coordinate(latitude: 48.15, longitude: 11.05)))
        #expect(!p.contains(Coordinate(latitude: 48.05, longitude: 10.99)))
    }

    @Test func handlesConcavePolygons() throws {
        // A U shape: the notch is outside.
        let u = try Polygon([
            Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 0, longitude: 3),
            Coordinate(latitude: 3, longitude: 3), Coordinate(latitude: 3, longitude: 2),
            Coordinate(latitude: 1, longitude: 2), Coordinate(latitude: 1, longitude: 1),
            Coordinate(latitude: 3, longitude: 1), Coordinate(latitude: 3, longitude: 0),
        ])
        #expect(u.contains(Coordinate(latitude: 2, longitude: 0.5)))
        #expect(!u.contains(Coordinate(latitude: 2, longitude: 1.5)))
        #expect(u.contains(Coordinate(latitude: 0.5, longitude: 1.5)))
    }

    @Test func handlesRingsAcrossTheAntimeridian() throws {
        let p = try Polygon([
            Coordinate(latitude: -1, longitude: 179), Coordinate(latitude: -1, longitude: -179),
            Coordinate(latitude: 1, longitude: -179), Coordinate(latitude: 1, longitude: 179),
        ])
        #expect(p.contains(Coordinate(latitude: 0, longitude: 179.5)))
        #expect(p.contains(Coordinate(latitude: 0, longitude: -179.5)))
        #expect(!p.contains(Coordinate(latitude: 0, longitude: 178.5)))
    }

    @Test func rejectsSelfIntersectingRings() {
        // A bow tie.
        #expect(throws: GeoError(.selfIntersecting, index: 0, otherIndex: 2)) {
            try Polygon([
                Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 1, longitude: 1),
                Coordinate(latitude: 1, longitude: 0), Coordinate(latitude: 0, longitude: 1),
            ])
        }
    }

    @Test func rejectsTooFewVerticesAndBadCoordinates() {
        #expect(throws: GeoError(.tooFewVertices, count: 2)) {
            try Polygon([Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 1, longitude: 1)])
        }
        #expect(throws: GeoError(.invalidCoordinate, index: 1)) {
            try Polygon([
                Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 91, longitude: 1),
                Coordinate(latitude: 1, longitude: 0),
            ])
        }
    }

    @Test func dropsARepeatedClosingVertex() throws {
        let p = try Polygon(square + [square[0]])
        #expect(p.vertices.count == 4)
    }
}

@Suite("Time")
struct GNSSTimeTests {
    @Test(arguments: [(1970, 1, 1, 0), (2000, 3, 1, 11_017), (2024, 2, 29, 19_782), (1969, 12, 31, -1)])
    func convertsCivilDatesBothWays(_ y: Int, _ m: Int, _ d: Int, _ days: Int) {
        #expect(GNSSTime.daysFromCivil(year: y, month: m, day: d) == days)
        let back = GNSSTime.civilFromDays(days)
        #expect(back.year == y && back.month == m && back.day == d)
    }

    @Test func printsISO8601WithTheSourcePrecision() {
        let t = GNSSTime(
            year: 2024, month: 3, dayOfMonth: 9, hour: 7, minute: 5, second: 3, nanosecond: 120_000_000,
            fractionDigits: 2)
        #expect(t.iso8601 == "2024-03-09T07:05:03.12Z")
        #expect(GNSSTime(day: nil, nanosecondOfDay: 3_600_000_000_000).iso8601 == "01:00:00Z")
        #expect(t.secondsSince1970 == 1_709_967_903.12)
    }

    @Test func ordersUnknownDatesFirst() {
        let a = GNSSTime(day: nil, nanosecondOfDay: 5)
        let b = GNSSTime(day: 1, nanosecondOfDay: 0)
        #expect(a < b)
    }

    @Test func locationFromFixNeedsAPositionAndADate() {
        var fix = Fix(
            time: GNSSTime(day: 19_000, nanosecondOfDay: 0), coordinate: Coordinate(latitude: 1, longitude: 2),
            mode: .twoD, horizontalAccuracy: 5)
        let location = Location(fix)
        #expect(location?.horizontalAccuracy == 5)
        #expect(location?.verticalAccuracy == -1)
        #expect(location?.timestamp == Double(19_000 * 86_400))
        fix.time?.day = nil
        #expect(Location(fix) == nil)
        #expect("\(fix.coordinate!)" == "Coordinate(<redacted>)")
    }
}
