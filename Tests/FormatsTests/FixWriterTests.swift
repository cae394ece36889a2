import Foundation
import Geo
import Testing

@testable import Formats

@Suite("Fix formats")
struct FixWriterTests {
    let fix = Fix(
        time: GNSSTime(
            year: 2024, month: 3, dayOfMonth: 9, hour: 12, minute: 0, second: 1, nanosecond: 500_000_000,
            fractionDigits: 2),
        coordinate: Coordinate(latitude: 48.137154, longitude: -11.5761249999), altitudeMSL: 519.25,
        geoidSeparation: 47, speed: 1.4, course: 33.2, mode: .threeD, quality: .gps, satellitesUsed: 8,
        satellitesInView: 12, hdop: 0.9, vdop: 1.2, pdop: 1.5, horizontalAccuracy: 4.5, verticalAccuracy: 6,
        accuracySource: .dopEstimate, lines: 10...15)

    func render(_ format: FixFormat, _ fixes: [Fix]) -> String {
        var writer = FixWriter(format: format)
        var out: [UInt8] = []
        writer.begin(into: &out)
        for f in fixes { writer.write(f, into: &out) }
        writer.end(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func writesTheDocumentedJSONLinesObject() {
        #expect(
            render(.jsonl, [fix]) == """
                {"time":"2024-03-09T12:00:01.50Z","lat":48.137154000,"lon":-11.576125000,"alt":519.250,"speed":1.400,\
                "course":33.20,"mode":"3d","quality":"gps","hAcc":4.50,"vAcc":6.00,"sats":8,"satsInView":12,"hdop":0.90,\
                "vdop":1.20,"pdop":1.50,"geoidSep":47.000,"lines":[10,15]}

                """)
    }

    @Test func writesNullsForUnknownValuesAndNoPositionWithoutAFix() throws {
        let empty = Fix(time: nil, coordinate: Coordinate(latitude: 1, longitude: 2), mode: .none)
        let line = render(.jsonl, [empty])
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["lat"] is NSNull)
        #expect(object?["time"] is NSNull)
        #expect(object?["mode"] as? String == "none")
        #expect(object?.count == 17)
    }

    @Test func writesCSVWithAHeaderAndEmptyUnknowns() {
        let text = render(.csv, [fix, Fix(mode: .none)])
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0].hasPrefix("time,lat,lon,alt"))
        #expect(
            lines[1]
                == "2024-03-09T12:00:01.50Z,48.137154000,-11.576125000,519.250,1.400,33.20,3d,gps,4.50,6.00,8,12,0.90,1.20,1.50,47.000,10,15"
        )
        #expect(lines[2] == ",,,,,,none,,,,,,,,,,,")
    }

    @Test func writesGeoJSONThatParses() throws {
        let text = render(.geojson, [fix, Fix(mode: .none), fix])
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        let features = try #require(object?["features"] as? [[String: Any]])
        #expect(features.count == 2)
        let geometry = features[0]["geometry"] as? [String: Any]
        #expect((geometry?["coordinates"] as? [Double])?.first == -11.576125)
    }

    @Test func writesGPXTrackPoints() {
        let text = render(.gpx, [fix])
        #expect(
            text.contains(
                "<trkpt lat=\"48.137154000\" lon=\"-11.576125000\"><ele>519.250</ele><time>2024-03-09T12:00:01.50Z</time>"
            ))
        #expect(text.contains("<fix>3d</fix><sat>8</sat><hdop>0.90</hdop>"))
        #expect(text.hasSuffix("</gpx>\n"))
    }

    @Test(arguments: [
        (0.0, 2, "0.00"), (-0.004, 2, "0.00"), (-1.005, 1, "-1.0"), (123.456789, 3, "123.457"),
        (Double.nan, 2, "null"), (1e30, 2, "null"), (-7.0, 0, "-7"),
    ])
    func formatsFixedPointNumbers(_ v: Double, _ decimals: Int, _ expected: String) {
        var out: [UInt8] = []
        ByteWriting.appendFixed(v, decimals: decimals, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == expected)
    }

    /// The JSON writer keeps the last date's text and reuses it while the day repeats: each line must
    /// still carry its own date (across midnight, back again, without a date, beyond year 9999).
    @Test func jsonLinesWriterReusesADateOnlyForTheSameDay() {
        func at(_ day: Int32?, _ seconds: Int64) -> Fix {
            var f = fix
            f.time = GNSSTime(day: day, nanosecondOfDay: seconds * 1_000_000_000, fractionDigits: 0)
            return f
        }
        let days: [Int32?] = [19_791, 19_791, 19_792, nil, 19_791, 2_932_897, 2_932_897, 19_792]
        let fixes = days.enumerated().map { at($0.element, Int64($0.offset)) }
        let times = render(.jsonl, fixes).split(separator: "\n").map { line in
            String(line.split(separator: "\"")[3])
        }
        #expect(times == fixes.map { $0.time!.iso8601 })
        #expect(times[2] == "2024-03-10T00:00:02Z" && times[3] == "00:00:03Z" && times[5].hasPrefix("10000-01-01T"))
    }

    /// The JSON writer's quality names are ``Fix/Quality/name``.
    @Test func jsonLinesQualityNamesAreTheQualitysNames() {
        for raw in UInt8(0)...8 {
            let q = Fix.Quality(rawValue: raw)!
            #expect(FixWriter.qualityName(q).description == q.name)
        }
    }

    /// The digit writers against the plain algorithm (scale, round, print the integer, place the
    /// point), over every decimals setting and magnitudes from 1e-12 to the limit, signs included;
    /// the array writer and the stack-line cursor must agree byte for byte.
    @Test func fixedPointWritersMatchThePlainAlgorithm() {
        func reference(_ v: Double, _ d: Int) -> String {
            let scale = (0..<d).reduce(1.0) { r, _ in r * 10 }
            guard v.isFinite, abs(v) * scale < 9.0e18 else { return "null" }
            let scaled = Int64((abs(v) * scale).rounded())
            var digits = String(scaled)
            while digits.count < d + 1 { digits = "0" + digits }
            let sign = v < 0 && scaled != 0 ? "-" : ""
            return sign + digits.dropLast(d) + (d > 0 ? "." + digits.suffix(d) : "")
        }
        var generator = SystemRandomNumberGenerator()
        var values: [Double] = [
            0, -0.0, 0.5, -0.5, 1, 9, 10, 99, 100, 999_999_999, 1e18, 9.1e17, -9.1e17, .nan,
            .infinity, -.infinity, 48.137366333, -11.575408667, 0.0049999, 1e-12,
            // Ties and near-ties: rounding is half away from zero, as `rounded()`.
            0.125, -0.125, 2.5, -2.5, 0.49999999999999994, 4_503_599_627_370_495.5, 1.005,
            8_999_999_999_999_999_000.0,
        ]
        for exponent in -12...19 {
            for _ in 0..<40 {
                let v = Double.random(in: 1..<10, using: &generator) * pow(10, Double(exponent))
                values += [v, -v]
            }
        }
        for d in 0...9 {
            for v in values {
                var array: [UInt8] = []
                ByteWriting.appendFixed(v, decimals: d, to: &array)
                var line: [UInt8] = []
                ByteWriting.appendLine(capacity: 64, to: &line) { $0.fixed(v, decimals: d) }
                #expect(String(decoding: array, as: UTF8.self) == reference(v, d), "\(v) with \(d) decimals")
                #expect(line == array, "\(v) with \(d) decimals")
            }
        }
    }

    @Test(arguments: [
        Int64.min, Int64.min + 1, -1_000_000, -10, -9, -1, 0, 1, 9, 10, 99, 100, 12_345,
        1_000_000_000_000, Int64.max,
    ])
    func integerWritersMatchString(_ v: Int64) {
        var array: [UInt8] = []
        ByteWriting.appendInt(v, to: &array)
        var line: [UInt8] = []
        ByteWriting.appendLine(capacity: 32, to: &line) { $0.int(v) }
        #expect(String(decoding: array, as: UTF8.self) == String(v))
        #expect(line == array)
    }
}
