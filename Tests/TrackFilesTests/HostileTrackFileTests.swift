import Geo
import KeepTrackTesting
import Testing
import TrackFiles

@Suite("Track files: hostile and malformed input")
struct HostileTrackFileTests {
    @Test func aBillionLaughsGPXIsRefusedAtItsDocumentTypeDeclaration() throws {
        let r = try read("billion-laughs.gpx", as: .gpx)
        let e = try #require(r.error)
        #expect(e.code == .doctype)
        #expect(e.line == 2 && e.byteOffset == 22)
        #expect(e.format == .gpx)
        #expect(r.fixes.isEmpty)
    }

    @Test func anEntityThatIsNotPredefinedIsRefused() throws {
        let r = try read("external-entity.gpx", as: .gpx)
        #expect(r.error?.code == .entity)
        #expect(r.fixes.isEmpty)
    }

    @Test func aTruncatedGPXLosesNothingBeforeTheCut() throws {
        let r = try read("truncated.gpx", as: .gpx)
        let e = try #require(r.error)
        #expect(e.code == .malformed)
        #expect(e.message.contains("ends early"))
        #expect(r.fixes.count > 10)
    }

    @Test func aMismatchedEndTagIsNamedByLineAfterTheFixesBeforeIt() throws {
        let r = try read("mismatched.gpx", as: .gpx)
        let e = try #require(r.error)
        #expect(e.code == .malformed && e.line == 4)
        #expect(r.fixes.count == 1)
    }

    @Test func aCSVCellThatIsNotANumberIsNamedByLine() throws {
        let r = try read("bad-cell.csv", as: .csv)
        let e = try #require(r.error)
        #expect(e.code == .invalidValue && e.line == 7)
        #expect(e.description.contains("latitude"))
        #expect(r.fixes.count == 5)
    }

    @Test func aTruncatedTakeoutFileLosesNothingBeforeTheCut() throws {
        let r = try read("truncated.takeout.json", as: .takeout)
        #expect(r.error?.code == .malformed)
        #expect(r.fixes.count > 40)
    }

    @Test func errorsNameNoCoordinate() throws {
        for (name, format) in [("bad-cell.csv", TrackFileFormat.csv), ("mismatched.gpx", .gpx)] {
            let e = try #require(try read(name, as: format).error)
            #expect(!e.description.contains("48.1"))
        }
    }

    static func feed(_ reader: inout some TrackReader, _ text: String) -> (fixes: [Fix], error: TrackFileError?) {
        var fixes: [Fix] = []
        do throws(TrackFileError) {
            try reader.read(Array(text.utf8)) { fixes.append($0) }
        } catch {
            return (fixes, error)
        }
        return (fixes, nil)
    }

    @Test(arguments: [
        ("<gpx>" + String(repeating: "<a>", count: 300), TrackFileError.Code.tooLarge),
        ("<gpx>" + String(repeating: "x", count: 100) + "</gpx><gpx/>", .malformed),
        ("<gpx a='1' a='2'/>", .malformed),
        ("<kml/>", .missingField),
        ("<gpx><wpt lat='91' lon='0'><time>2024-01-01T00:00:00Z</time></wpt></gpx>", .invalidValue),
        ("<gpx><wpt lat='1' lon='0'><time>2024-13-01T00:00:00Z</time></wpt></gpx>", .invalidValue),
        ("<gpx><wpt lat='x' lon='0'/></gpx>", .invalidValue),
        ("<gpx>&#0;</gpx>", .malformed),
        ("<gpx><!ENTITY x 'y'></gpx>", .malformed),
        ("", .malformed),
    ])
    func malformedGPX(_ text: String, _ code: TrackFileError.Code) {
        var reader = GPXReader()
        #expect(Self.feed(&reader, text).error?.code == code)
    }

    @Test(arguments: [
        (String(repeating: "[", count: 200), TrackFileError.Code.tooLarge),
        ("{\"locations\":[{\"latitudeE7\":1}],}", .malformed),
        ("{\"a\":\"" + String(repeating: "x", count: 1 << 20 + 1) + "\"}", .tooLarge),
        ("{\"a\":\"\\ud800\"}", .malformed),
        ("{\"a\":01}", .malformed),
        ("{} {}", .malformed),
        ("{\"locations\":[{\"latitudeE7\":1,\"longitudeE7\":1,\"timestampMs\":\"soon\"}]}", .invalidValue),
    ])
    func malformedJSON(_ text: String, _ code: TrackFileError.Code) {
        var reader = JSONTrackReader()
        #expect(Self.feed(&reader, text).error?.code == code)
    }

    /// Fuzz findings: an error at byte 0 kept its offset only when fed whole; text outside the root
    /// was named on the line where the chunk ended.
    @Test(arguments: ["\u{5}?ml~", "<?xml version=\"1.0\"?>\n\n  junk\n<gpx/>"])
    func anErrorIsNamedAtItsByteAndLineWhateverTheChunks(_ text: String) throws {
        var errors: [String] = []
        for size in [1, 2, 5, 1000] {
            var reader = GPXReader()
            let bytes = Array(text.utf8)
            var failure: TrackFileError?
            var start = 0
            while start < bytes.count, failure == nil {
                let piece = Array(bytes[start..<min(start + size, bytes.count)])
                failure = piece.withUnsafeBytes { b in
                    do throws(TrackFileError) { try reader.feed(b) { _ in } } catch { return error }
                    return nil
                }
                start += size
            }
            errors.append(failure.map(\.description) ?? "none")
        }
        #expect(Set(errors).count == 1)
        #expect(errors[0].contains(text.hasPrefix("<") ? "<input>:3: byte 25:" : "<input>:1: byte 0:"))
    }

    @Test func aByteOrderMarkMayOpenAGPXOrAJSONFile() {
        var gpx = GPXReader()
        let a = Self.feed(&gpx, "\u{FEFF}<gpx><wpt lat='1' lon='2'><time>2024-01-01T00:00:00Z</time></wpt></gpx>")
        #expect(a.error == nil && a.fixes.count == 1)
        var json = JSONTrackReader()
        let b = Self.feed(
            &json,
            "\u{FEFF}{\"type\":\"Feature\",\"geometry\":{\"type\":\"Point\",\"coordinates\":[2,1]},"
                + "\"properties\":{\"time\":\"2024-01-01T00:00:00Z\"}}")
        #expect(b.error == nil && b.fixes.count == 1)
        var late = GPXReader()
        #expect(Self.feed(&late, "<gpx/>\u{FEFF}").error?.code == .malformed)
    }

    @Test func overlandsBatchIsGeoJSON() {
        var reader = JSONTrackReader()
        let body = #"""
            {"locations":[{"type":"Feature","geometry":{"type":"Point","coordinates":[-122.030581,37.3318]},
            "properties":{"timestamp":"2015-10-01T08:00:00-0700","altitude":0,"speed":4,"horizontal_accuracy":30,
            "vertical_accuracy":-1,"motion":["driving","stationary"],"battery_level":0.89,"device_id":""}}]}
            """#
        let r = Self.feed(&reader, body)
        #expect(r.error == nil)
        let fix = r.fixes.first
        #expect(fix?.time?.iso8601 == "2015-10-01T15:00:00Z")
        #expect(fix?.speed == 4 && fix?.horizontalAccuracy == 30 && fix?.verticalAccuracy == nil)
    }

    @Test func takeoutCoordinatesPastTheRangeAre32BitOverflows() {
        var reader = JSONTrackReader(format: .takeout)
        let r = Self.feed(
            &reader,
            #"{"locations":[{"latitudeE7":4294067296,"longitudeE7":4293967296,"timestamp":"2024-01-01T00:00:00Z"}]}"#)
        #expect(r.error == nil)
        #expect(r.fixes.first?.coordinate == Coordinate(latitude: -0.09, longitude: -0.1))
    }

    @Test func csvNeedsLatitudeLongitudeAndTimeColumns() {
        var a = CSVReader()
        #expect(Self.feed(&a, "lat,lon\n1,2\n").error?.code == .missingField)
        var b = CSVReader()
        #expect(Self.feed(&b, "x,y,time\n").error?.code == .missingField)
        var c = CSVReader()
        #expect(Self.feed(&c, "time,lat,lon\n2024-01-01T00:00:00Z,1,\"2").error?.code == .malformed)
    }

    @Test func aRecLineWithoutATimeIsNamedByLine() {
        var reader = RecReader()
        let r = Self.feed(
            &reader,
            "2024-01-01T00:00:00Z\t*\t{\"_type\":\"location\",\"lat\":1,\"lon\":2,\"tst\":1704067200}\nnot a line\t\n")
        #expect(r.fixes.count == 1)
        #expect(r.error?.code == .malformed && r.error?.line == 2)
    }
}

@Suite("Track files: content sniffing and times")
struct SniffingTests {
    @Test(arguments: [
        ("tracks/walk-2min.gpx", TrackFileFormat.gpx), ("tracks/walk-2min.gpx.gz", .gpx),
        ("tracks/walk-2min.gpx10.gpx", .gpx), ("tracks/walk-2min.geojson", .geojson),
        ("tracks/walk-2min.points.geojson", .geojson), ("tracks/walk-2min.csv", .csv),
        ("tracks/walk-2min.ms.csv", .csv),
        ("tracks/walk-2min.rec", .owntracksRec), ("tracks/walk-2min.takeout.json", .takeout),
        ("tracks/billion-laughs.gpx", .gpx), ("walk-15min.nmea", .nmea), ("corrupted.nmea", .nmea),
        ("day-24h.nmea.gz", .nmea), ("walk-15min.regions.geojson", .geojson),
    ])
    func filesAreToldApartByContent(_ name: String, _ format: TrackFileFormat) throws {
        #expect(try TrackFileFormat.sniff(path: fixturePath(name)) == format)
    }

    @Test(arguments: [
        ("\u{FEFF}lat;lng;fixTime\n", TrackFileFormat.csv), ("  \n<?xml version='1.0'?><gpx/>", .gpx),
        ("[]", .geojson), ("$GPGGA,lat,lon\n", .nmea), ("latitude,longitude,time", .csv), ("hello\n", .nmea),
        ("", .nmea),
        // A header naming no latitude (the reader then says so), but not a banner line.
        ("time,y,x\n2024-05-14T09:30:00Z,48.1,11.5\n", .csv), ("u-blox AG, www.u-blox.com\n", .nmea),
        ("time\n", .nmea),
    ])
    func sniffingInMemory(_ text: String, _ format: TrackFileFormat) {
        let bytes = Array(text.utf8)
        #expect(bytes.withUnsafeBytes { TrackFileFormat.sniff($0, isWholeFile: true) } == format)
    }

    @Test func aMissingFileIsAnIOErrorNamingIt() {
        #expect(throws: TrackFileError.self) { try TrackFileFormat.sniff(path: "/nonexistent/walk.gpx") }
    }

    @Test(arguments: [
        ("2024-05-14T09:30:00Z", 1_715_679_000_000_000_000 as Int64?),
        ("2024-05-14T09:30:00.250Z", 1_715_679_000_250_000_000), ("2024-05-14 09:30:00", 1_715_679_000_000_000_000),
        ("2024-05-14T11:30:00+02:00", 1_715_679_000_000_000_000),
        ("2024-05-14T04:00:00-0530", 1_715_679_000_000_000_000),
        ("2024-05-14T09:30Z", 1_715_679_000_000_000_000), ("2024-02-30T00:00:00Z", nil), ("2024-05-14T24:00:00Z", nil),
        ("2024-05-14T09:30:00Zjunk", nil), ("1715679000", 1_715_679_000_000_000_000),
        ("1715679000123", 1_715_679_000_123_000_000), ("1715679000.5", 1_715_679_000_500_000_000), ("-1", nil),
        ("", nil), ("9999-12-31T23:59:59Z", nil), ("0001-01-01T00:00:00Z", nil), ("1970-01-01T00:00:00+01:00", nil),
        ("99999999999999", nil), ("9300000000", nil), ("2261-12-31T23:59:59Z", 9_214_646_399_000_000_000),
    ])
    func timesAreISO8601OrEpochSecondsOrMilliseconds(_ text: String, _ nanos: Int64?) {
        let bytes = Array(text.utf8)
        #expect(bytes.withUnsafeBytes { TimeText.any($0) }?.nanosecondsSince1970 == nanos)
    }
}
