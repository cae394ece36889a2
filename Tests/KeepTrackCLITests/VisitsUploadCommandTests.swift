import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// docs/guide.md's "What did my day look like?": the night log replayed with --visits into the embedded
/// endpoint, then exported as a picture with its visits and trips, and as one GPX track per trip.
@Suite("keeptrack replay --visits --upload embedded, keeptrack export --trips", .offThePool)
struct VisitsUploadCommandTests {
    @Test func theNightsVisitsAndTripsAreStoredDrawnAndExported() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack([
            "replay", "--visits", "--upload", "embedded", "--data-dir", dir,
            "fixtures/visits-night.nmea.gz",
        ])
        #expect(r.status == 0)
        // 4 arrivals, 3 departures, 3 trips: 10 records besides the points.
        #expect(r.stderr.contains("0 region events, 10 visit and trip records stored for device"))
        let visitLines = r.stdout.split(separator: "\n").filter { $0.hasPrefix("{\"event\":\"visit\"") }
        #expect(visitLines.count == 7)

        let svg = try keeptrack(["export", "--data-dir", dir, "--output", dir + "/night.svg"])
        #expect(svg.status == 0)
        let picture = try String(contentsOfFile: dir + "/night.svg", encoding: .utf8)
        #expect(picture.components(separatedBy: "<circle class=\"visit\"").count - 1 == 4)
        #expect(picture.components(separatedBy: "<polyline class=\"trip\"").count - 1 == 3)
        #expect(picture.contains(">20:30–21:15 UTC · 45 min</text>"))
        #expect(picture.contains(">from 01:09 UTC, still there</text>"))
        #expect(!picture.contains("class=\"stop\""))

        let gpx = try keeptrack(["export", "--data-dir", dir, "--trips"])
        #expect(gpx.status == 0)
        #expect(gpx.stdout.components(separatedBy: "<trk>").count - 1 == 3)
        #expect(gpx.stderr.hasPrefix("3 trips of "), "\(gpx.stderr)")
        #expect(
            gpx.stdout.contains("trip 2025-03-14T21:15:00.000Z – 2025-03-14T21:25:55.000Z</name><desc>5.20 km</desc>"))
        let refused = try keeptrack(["export", "--data-dir", dir, "--trips", "--format", "geojson"])
        #expect(refused.status != 0 && refused.stderr.contains("--trips writes GPX"))
        let zero = try keeptrack(["export", "--data-dir", dir, "--trips", "--max-accuracy", "0"])
        #expect(zero.status != 0 && zero.stderr.contains("--max-accuracy must be a number of metres above 0."))
    }

    /// A trail without a stop has no trip: the empty GPX comes with why, rather than alone.
    @Test func tripsOfATrailWithoutAStopAreNoneAndSayWhy() throws {
        let dir = try TemporaryDirectory("kt-no-trips").path
        let r = try keeptrack(["replay", "--upload", "embedded", "--data-dir", dir, "fixtures/walk-15min.nmea"])
        #expect(r.status == 0, "\(r.stderr)")
        let gpx = try keeptrack(["export", "--data-dir", dir, "--trips", "--output", dir + "/trips.gpx"])
        #expect(gpx.status == 0, "\(gpx.stderr)")
        #expect(gpx.stderr.hasPrefix(dir + "/trips.gpx: no trip of keeptrack-"), "\(gpx.stderr)")
        #expect(
            gpx.stderr.contains(
                "a trip runs from one stop to the next, and none lies whole within its 895 points here"),
            "\(gpx.stderr)")
        let file = try String(contentsOfFile: dir + "/trips.gpx", encoding: .utf8)
        #expect(file.hasPrefix("<?xml") && !file.contains("<trk>"))
    }
}
