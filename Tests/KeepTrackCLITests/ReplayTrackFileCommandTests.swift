import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("keeptrack replay of track files", .offThePool)
struct ReplayTrackFileCommandTests {
    @Test(arguments: [
        ("walk-2min.gpx", "gpx", 121), ("walk-2min.gpx.gz", "gpx", 121), ("walk-2min.gpx10.gpx", "gpx", 120),
        ("walk-2min.geojson", "geojson", 120), ("walk-2min.points.geojson", "geojson", 120),
        ("walk-2min.csv", "csv", 120), ("walk-2min.ms.csv", "csv", 120), ("walk-2min.rec", "owntracks-rec", 120),
        ("walk-2min.takeout.json", "takeout", 120),
    ])
    func replayReadsEachFormatByContentAndPrintsItsFixes(_ name: String, _ format: String, _ fixes: Int) throws {
        let r = try keeptrack(["replay", "fixtures/tracks/" + name])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("{\"time\":") }.count == fixes)
        #expect(lines.first?.contains("\"source\":\"\(format) fixtures/tracks/\(name)\"") == true)
        #expect(r.stderr.contains(": \(fixes) fixes"))
    }

    /// The whole pipeline on an imported history: every point of the file stored once.
    @Test(arguments: ["walk-2min.gpx", "walk-2min.geojson", "walk-2min.csv", "walk-2min.rec", "walk-2min.takeout.json"])
    func anImportThroughTheEmbeddedEndpointStoresEveryPointOnce(_ name: String) throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack(["replay", "--upload", "embedded", "--data-dir", dir, "fixtures/tracks/" + name])
        #expect(r.status == 0)
        // The GPX's timed waypoint is its first track point again: the location service takes it once.
        #expect(r.stderr.contains("upload: 120 records acknowledged"))
        #expect(r.stderr.contains("embedded endpoint: 120 points and 0 region events stored"))
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix("{\"event\":\"location\"") }.count == 120)
    }

    @Test func regionsWorkOnAnImportedHistoryAsOnTheNMEALog() throws {
        let args = ["replay", "--regions", "fixtures/walk-15min.regions.geojson"]
        let nmea = try keeptrack(args + ["fixtures/walk-15min.nmea"])
        let gpx = try keeptrack(args + ["fixtures/tracks/walk-2min.gpx"])
        #expect(gpx.status == 0)
        // Region events without their times (the accuracies differ: GST sigmas in the log, HDOP in the GPX).
        func events(_ out: String) -> [String] {
            out.split(separator: "\n").filter {
                !$0.hasPrefix("{\"event\":\"location\"") && $0.hasPrefix("{\"event\":")
            }
            .map { line in String(line.split(separator: ",\"time\"").first ?? line) }
        }
        let got = events(gpx.stdout)
        // The first two minutes: the initial states and leaving Marienplatz.
        #expect(got.count == 4)
        #expect(got.last == "{\"event\":\"exit\",\"region\":\"marienplatz\"")
        #expect(Array(events(nmea.stdout).prefix(got.count)) == got)
    }

    /// The night of visits, written out as a CSV of the log's own fixes (every field the location
    /// service reads), gives the same visits, trips and events as the log.
    @Test func visitsOnAnImportedHistoryAreTheLogsVisits() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fixes = try keeptrack(["replay", "fixtures/visits-night.nmea.gz"])
        #expect(fixes.status == 0)
        var csv = "time,lat,lon,altitude,speed,course,accuracy\n"
        for line in fixes.stdout.split(separator: "\n") where line.hasPrefix("{\"time\":") {
            let f = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let cells = ["time", "lat", "lon", "alt", "speed", "course", "hAcc"].map { key -> String in
                guard let v = f[key], !(v is NSNull) else { return "" }
                return key == "time" ? "\(v)" : "\((v as? NSNumber)?.stringValue ?? "")"
            }
            csv += cells.joined(separator: ",") + "\n"
        }
        let path = dir + "/night.csv"
        try csv.write(toFile: path, atomically: true, encoding: .utf8)
        let log = try keeptrack(["replay", "--visits", "fixtures/visits-night.nmea.gz"])
        let file = try keeptrack(["replay", "--visits", path])
        #expect(file.status == 0)
        // Visits and trips, coordinates to 7 decimals (the CSV holds the decode schema's 9, rounded). The
        // log's epochs without a position (a tunnel) also give a location-unknown error: a file has none.
        func events(_ out: String) -> [String] {
            out.split(separator: "\n")
                .filter { $0.hasPrefix("{\"event\":\"visit\"") || $0.hasPrefix("{\"event\":\"trip\"") }
                .map { String($0).replacing(#/(\.\d{7})\d\d/#) { String($0.output.1) } }
        }
        let expected = events(log.stdout)
        #expect(expected.filter { $0.hasPrefix("{\"event\":\"visit\"") }.count >= 4)
        #expect(events(file.stdout) == expected)
    }

    /// Standard input is NMEA only: a GPX there is said to be given by its path, not "0 fixes" alone.
    @Test func aTrackFileOnStandardInputIsSaidToNeedItsPath() throws {
        let gpx = try Data(contentsOf: packageRoot.appendingPathComponent("fixtures/tracks/walk-2min.gpx"))
        let r = try keeptrack(["replay", "-"], stdin: gpx)
        #expect(r.stderr.contains("log <stdin>: 0 fixes in "), "\(r.stderr)")
        #expect(r.stderr.contains("(standard input is read as NMEA only; give a GPX"), "\(r.stderr)")
        let nmea = try Data(contentsOf: packageRoot.appendingPathComponent("fixtures/walk-15min.nmea"))
        #expect(!(try keeptrack(["replay", "-"], stdin: nmea)).stderr.contains("NMEA only"))
    }

    /// A small gzipped GPX cut short is still a GPX (told by what it holds before the cut): its
    /// points before the cut are delivered, and the cut is said on standard error with status 1.
    @Test func aCutGzippedTrackFileKeepsItsPointsAndSaysTheCut() throws {
        let dir = try TemporaryDirectory("kt-cut").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let whole = try Data(contentsOf: packageRoot.appendingPathComponent("fixtures/tracks/walk-2min.gpx.gz"))
        let cut = dir + "/cut.gpx.gz"
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: cut))
        let r = try keeptrack(["replay", cut])
        #expect(r.status == 1)
        let fixes = r.stdout.split(separator: "\n").filter { $0.hasPrefix("{\"time\":") }.count
        #expect(fixes > 10 && fixes < 120, "\(r.stderr)")
        #expect(r.stderr.contains("gpx \(cut) 1.1: \(fixes) fixes"), "\(r.stderr)")
        #expect(
            r.stderr.hasSuffix("error: \(cut): byte \(whole.count / 2): gzip data ends early (truncated file?)\n"),
            "\(r.stderr)")
    }

    /// A file newest first: a location is never older than the last, so only the first is
    /// delivered, and the replay says how many were not and why, not silently.
    @Test func aFileOutOfTimeOrderSaysWhatItDidNotDeliver() throws {
        let dir = try TemporaryDirectory("kt-reversed").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lines = try String(
            contentsOf: packageRoot.appendingPathComponent("fixtures/tracks/walk-2min.csv"), encoding: .utf8
        ).split(whereSeparator: \.isNewline)  // CRLF: "\r\n" is one Character
        let reversed = dir + "/newest-first.csv"
        try ([lines[0]] + lines.dropFirst().reversed()).joined(separator: "\n").write(
            toFile: reversed, atomically: true, encoding: .utf8)
        let r = try keeptrack(["replay", "--distance-filter", "0", reversed])
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix(#"{"event":"location""#) }.count == 1)
        #expect(r.stderr.contains("warning: 119 fixes older than one before them were not delivered"), "\(r.stderr)")
        let inOrder = try keeptrack(["replay", "--distance-filter", "0", "fixtures/tracks/walk-2min.csv"])
        #expect(!inOrder.stderr.contains("not in time order"), "\(inOrder.stderr)")
    }

    @Test func aBillionLaughsGPXIsRefusedNamingFileLineAndByte() throws {
        let r = try keeptrack(["replay", "fixtures/tracks/billion-laughs.gpx"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("fixtures/tracks/billion-laughs.gpx:2: byte 22: doctype"))
    }

    @Test func aMalformedFileKeepsWhatCameBeforeTheError() throws {
        let r = try keeptrack(["replay", "fixtures/tracks/bad-cell.csv"])
        #expect(r.status == 1)
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix("{\"time\":") }.count == 5)
        #expect(r.stdout.contains("bad-cell.csv:7: byte 254: invalid-value: csv: a latitude cell that is not a number"))
    }
}
