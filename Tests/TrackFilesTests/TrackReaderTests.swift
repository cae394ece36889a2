import Geo
import KeepTrackTesting
import NMEA
import Testing
import TrackFiles

/// Reads a fixture with a fresh reader of its format, fed in pieces of `chunk` bytes (0: whole).
func read(_ name: String, as format: TrackFileFormat, chunk: Int = 0) throws -> (
    fixes: [Fix], statistics: TrackFileStatistics, error: TrackFileError?
) {
    let bytes = try fixtureBytes("tracks/" + name)
    var reader = try #require(format.makeReader())
    var fixes: [Fix] = []
    do throws(TrackFileError) {
        let step = chunk > 0 ? chunk : max(bytes.count, 1)
        var start = 0
        while start < bytes.count {
            let end = min(start + step, bytes.count)
            let piece = Array(bytes[start..<end])
            let result: Result<Void, TrackFileError> = piece.withUnsafeBytes { b in
                Result { () throws(TrackFileError) in try reader.feed(b) { fixes.append($0) } }
            }
            try result.get()
            start = end
        }
        try reader.finish { fixes.append($0) }
    } catch {
        return (fixes, reader.statistics, error)
    }
    return (fixes, reader.statistics, nil)
}

/// The first two minutes of the walk as the NMEA decoder reads them: what every format's fixture holds.
func walkTwoMinutes() throws -> [Fix] {
    let decoded = try NMEADecoder.decode(try fixtureBytes("walk-15min.nmea"))
    return Array(decoded.fixes.filter(\.hasPosition).prefix(120))
}

@Suite("Track file readers")
struct TrackReaderTests {
    static let formats: [(String, TrackFileFormat, fixes: Int, untimed: Int, other: Int, skip: Int)] = [
        ("walk-2min.gpx", .gpx, 121, 1, 0, 1),
        ("walk-2min.gpx10.gpx", .gpx, 120, 2, 0, 0),
        ("walk-2min.geojson", .geojson, 120, 0, 1, 0),
        ("walk-2min.points.geojson", .geojson, 120, 0, 0, 0),
        ("walk-2min.csv", .csv, 120, 0, 0, 0),
        ("walk-2min.ms.csv", .csv, 120, 1, 0, 0),
        ("walk-2min.rec", .owntracksRec, 120, 0, 2, 0),
        ("walk-2min.takeout.json", .takeout, 120, 0, 0, 0),
    ]

    @Test(arguments: formats)
    func everyFormatHoldsTheWalkAsTheNMEADecoderReadsIt(
        _ c: (String, TrackFileFormat, fixes: Int, untimed: Int, other: Int, skip: Int)
    ) throws {
        let r = try read(c.0, as: c.1)
        #expect(r.error == nil, "\(r.error.map { "\($0)" } ?? "")")
        #expect(r.fixes.count == c.fixes)
        #expect(r.statistics.fixes == c.fixes)
        #expect(r.statistics.untimed == c.untimed)
        #expect(r.statistics.otherRecords == c.other)
        let truth = try walkTwoMinutes()
        let fixes = Array(r.fixes.dropFirst(c.skip))
        try #require(fixes.count == truth.count)
        for (fix, expected) in zip(fixes, truth) {
            #expect(fix.time?.nanosecondsSince1970 == expected.time?.nanosecondsSince1970)
            let a = try #require(fix.coordinate), b = try #require(expected.coordinate)
            #expect(abs(a.latitude - b.latitude) < 1e-6 && abs(a.longitude - b.longitude) < 1e-6)
            #expect(fix.hasPosition)
        }
    }

    @Test func gpxReadsElevationSpeedCourseAndDilutionFromEitherVersion() throws {
        let v11 = try read("walk-2min.gpx", as: .gpx)
        let v10 = try read("walk-2min.gpx10.gpx", as: .gpx)
        #expect(v11.statistics.version == "1.1")
        #expect(v10.statistics.version == "1.0")
        let a = v11.fixes[5], b = v10.fixes[4]
        #expect(a.altitudeMSL != nil && a.altitudeMSL == b.altitudeMSL)
        #expect(a.speed != nil && a.speed == b.speed)
        #expect(a.course != nil && a.course == b.course)
        #expect(a.hdop == 1.8 && a.satellitesUsed == 4 && a.mode == .threeD)
        #expect(a.lines != nil)
    }

    @Test func owntracksVelocityIsKilometresPerHourAndTakeoutVelocityMetresPerSecond() throws {
        let rec = try read("walk-2min.rec", as: .owntracksRec)
        let takeout = try read("walk-2min.takeout.json", as: .takeout)
        let csv = try read("walk-2min.csv", as: .csv)
        let i = 60
        let speed = try #require(csv.fixes[i].speed)
        #expect(abs(try #require(rec.fixes[i].speed) - speed) < 0.3)
        #expect(abs(try #require(takeout.fixes[i].speed) - speed) < 0.5)
        #expect(rec.fixes[i].horizontalAccuracy == 5 && takeout.fixes[i].horizontalAccuracy == 5)
    }

    /// A negative speed or course is unknown (iOS, Overland and OwnTracks write −1), not 359°; a
    /// course past 360° is taken round.
    @Test func aNegativeSpeedOrCourseIsUnknown() throws {
        var reader = try #require(TrackFileFormat.csv.makeReader())
        var fixes: [Fix] = []
        let text =
            "time,lat,lon,speed,course\n2024-05-14T09:30:00Z,48.1,11.5,-1,-1\n2024-05-14T09:30:01Z,48.1,11.5,1.5,370\n"
        let fed: Result<Void, TrackFileError> = Array(text.utf8).withUnsafeBytes { b in
            Result { () throws(TrackFileError) in try reader.feed(b) { fixes.append($0) } }
        }
        try fed.get()
        try reader.finish { fixes.append($0) }
        #expect(fixes.count == 2)
        #expect(fixes[0].speed == nil && fixes[0].course == nil)
        #expect(fixes[1].speed == 1.5 && fixes[1].course == 10)
    }

    static let chunkSizes = [1, 2, 3, 7, 64, 4096]

    @Test(arguments: formats.map(\.0) + ["truncated.gpx", "mismatched.gpx", "bad-cell.csv", "truncated.takeout.json"])
    func anySplitOfTheInputGivesTheSameFixesAndTheSameError(_ name: String) throws {
        let format = try TrackFileFormat.sniff(path: fixturePath("tracks/" + name))
        let whole = try read(name, as: format)
        for size in Self.chunkSizes {
            let r = try read(name, as: format, chunk: size)
            #expect(r.fixes == whole.fixes, "chunks of \(size)")
            #expect(r.statistics == whole.statistics, "chunks of \(size)")
            #expect(r.error?.description == whole.error?.description, "chunks of \(size)")
        }
    }
}
