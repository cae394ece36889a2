import Foundation
import KeepTrackTesting
import Testing

@Suite("keeptrack replay and track", .offThePool)
struct SourceCommandTests {
    @Test func replayPrintsTheSameFixesAsDecodeAndSourceEvents() throws {
        let replay = try keeptrack(["replay", "fixtures/walk-15min.nmea"])
        let decode = try keeptrack(["decode", "fixtures/walk-15min.nmea"])
        #expect(replay.status == 0)
        let lines = replay.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("{\"event\":\"source\",\"kind\":\"connected\"") == true)
        #expect(lines.last?.hasPrefix("{\"event\":\"source\",\"kind\":\"endOfInput\"") == true)
        #expect(lines.dropFirst().dropLast().joined(separator: "\n") + "\n" == decode.stdout)
        // Piped: no progress line, just the summary.
        #expect(!replay.stderr.contains("ETA"))
        #expect(replay.stderr.contains("895 fixes"))
    }

    @Test func replayOfAMissingFileFailsWithTheReason() throws {
        let r = try keeptrack(["replay", "missing.nmea"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("\"kind\":\"error\""))
        #expect(r.stdout.contains("missing.nmea"))
    }

    /// Through the tracker too (a location option, or an upload), a log that cannot be read or breaks
    /// off fails the run, after what came before it was tracked and uploaded.
    @Test func replayThroughTheTrackerFailsOnAMissingOrCutLog() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = try keeptrack(["replay", "--distance-filter", "5", "--data-dir", dir, "missing.nmea"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("error: missing.nmea: cannot open: No such file or directory"))
        let gz = try Data(contentsOf: URL(filePath: "fixtures/day-24h.nmea.gz"))
        let cut = dir + "/cut.nmea.gz"
        try gz.prefix(300_000).write(to: URL(filePath: cut))
        let embedded = try keeptrack(["replay", "--upload", "embedded", "--data-dir", dir, cut])
        #expect(embedded.status == 1)
        #expect(embedded.stderr.contains("error: \(cut): byte 300000: gzip data ends early"), "\(embedded.stderr)")
        // What the log held before its cut was tracked and stored all the same.
        let stored = try #require(embedded.stderr.split(separator: "\n").first { $0.hasPrefix("embedded endpoint: ") })
        let points = Int(stored.split(separator: " ")[2].filter(\.isNumber)) ?? 0
        #expect(points > 10_000, "\(stored)")
    }

    /// A log of times of day only gives no location: said, with the way out (`--date`), which
    /// gives each fix its location.
    @Test func replayOfALogWithoutDatesSaysSoAndTakesADate() throws {
        let r = try keeptrack(["replay", "--distance-filter", "0", "fixtures/nodate.nmea"])
        #expect(r.status == 0)
        #expect(!r.stdout.contains(#"{"event":"location""#))
        #expect(
            r.stderr.contains("warning: 116 fixes had a time of day but no date")
                && r.stderr.contains("--date YYYY-MM-DD"), "\(r.stderr)")
        let dated = try keeptrack(["replay", "--distance-filter", "0", "--date", "2024-05-14", "fixtures/nodate.nmea"])
        let locations = dated.stdout.split(separator: "\n").filter { $0.hasPrefix(#"{"event":"location""#) }
        #expect(locations.count == 116)
        #expect(locations.first?.contains(#""time":"2024-05-14T"#) == true)
        #expect(!dated.stderr.contains("no date"))
    }

    @Test func replayRejectsLoopingStandardInput() throws {
        let r = try keeptrack(["replay", "-", "--loop"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--loop needs a file"))
    }

    @Test func trackNeedsExactlyOneInput() throws {
        let none = try keeptrack(["track"])
        #expect(none.status == 64)
        #expect(none.stderr.contains("Choose one input: --gpsd [HOST[:PORT]] or --serial DEVICE."))
        let bad = try keeptrack(["track", "--serial", "/dev/ttyUSB0", "--baud", "1234"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--baud must be one of"))
    }

    /// A path that is no terminal will not become one: `track --serial` says so and ends with
    /// status 1, with or without location options (it retried for ever). A missing device is still
    /// waited for (SerialSourceTests).
    @Test(arguments: [[], ["--distance-filter", "5"]]) func trackOnAPathThatIsNoTerminalEnds(options: [String]) throws {
        let r = try keeptrack(["track", "--serial", "/dev/null"] + options)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.hasSuffix("error: /dev/null is not a serial device (Inappropriate ioctl for device)\n"))
    }

    @Test func trackWithGPSDAcceptsTheFlagWithoutAValue() throws {
        // Parsing only: --gpsd without a value means localhost:2947; --device then validates.
        let r = try keeptrack(["track", "--device", "/dev/ttyACM0"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("Choose one input"))
        let help = try keeptrack(["track", "--help"])
        #expect(help.stdout.contains("tools/fake-receiver.py"))
    }
}

@Suite("keeptrack replay: location events", .offThePool)
struct LocationEventCommandTests {
    @Test func printsTheDocumentedRegionAndLocationEvents() throws {
        let r = try keeptrack([
            "replay", "--regions", "fixtures/walk-15min.regions.geojson", "--distance-filter", "100",
            "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let regionLines = lines.filter { !$0.hasPrefix("{\"event\":\"location\"") }
        #expect(
            regionLines == [
                #"{"event":"state","region":"marienplatz","state":"inside"}"#,
                #"{"event":"state","region":"odeonsplatz","state":"outside"}"#,
                #"{"event":"state","region":"hofgarten","state":"outside"}"#,
                #"{"event":"exit","region":"marienplatz","time":"2024-05-14T09:30:45.000Z"}"#,
                #"{"event":"enter","region":"odeonsplatz","time":"2024-05-14T09:36:16.000Z"}"#,
                #"{"event":"exit","region":"odeonsplatz","time":"2024-05-14T09:39:05.000Z"}"#,
                #"{"event":"enter","region":"hofgarten","time":"2024-05-14T09:40:32.000Z"}"#,
                #"{"event":"exit","region":"hofgarten","time":"2024-05-14T09:42:22.000Z"}"#,
            ])
        let firstLocation = try #require(lines.first { $0.hasPrefix("{\"event\":\"location\"") })
        let first = try JSONSerialization.jsonObject(with: Data(firstLocation.utf8)) as? [String: Any]
        #expect(first?["event"] as? String == "location")
        #expect(first?["hAcc"] is Double)
        // 100 m distance filter over a ~1.2 km walk: about a dozen locations, not 895.
        let locations = lines.count - regionLines.count
        #expect(locations > 5 && locations < 20)
    }

    @Test func explainsABadRegionsFile() throws {
        let dir = try TemporaryDirectory("kt-regions").url
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("bad.geojson")
        try Data(
            #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"a","geometry":{"type":"Point","coordinates":[11.5,48.1]},"properties":{"radius":-5}}]}"#
                .utf8
        ).write(to: file)
        // A region that cannot be monitored is an event, as CoreLocation's monitoringDidFail; the rest runs.
        let r = try keeptrack(["replay", "--regions", file.path, "fixtures/walk-15min.nmea"])
        #expect(r.status == 0)
        #expect(
            r.stdout.hasPrefix(
                #"{"event":"error","code":"region-monitoring-failure","reason":"region a: the radius must be a positive number of metres, got -5.0"}"#
            ))
        #expect(r.stdout.contains(#"{"event":"location""#))
        // Importing it into the persisted set is refused whole.
        let dataDir = try TemporaryDirectory("kt-data").path
        let imported = try keeptrack(["regions", "import", file.path, "--data-dir", dataDir])
        #expect(imported.status == 64)
        #expect(imported.stderr.contains("nothing imported"))
        // Malformed JSON is a usage error naming the file.
        try Data("{".utf8).write(to: file)
        let broken = try keeptrack(["replay", "--regions", file.path, "fixtures/walk-15min.nmea"])
        #expect(broken.status == 64)
        #expect(broken.stderr.contains("not valid JSON"))
    }
}

@Suite("keeptrack regions", .offThePool)
struct RegionsCommandTests {
    @Test func importsListsAndRemovesRegions() throws {
        let dir = try TemporaryDirectory("kt-data").path
        let imported = try keeptrack(["regions", "import", "fixtures/walk-15min.regions.geojson", "--data-dir", dir])
        #expect(imported.status == 0)
        #expect(imported.stdout.contains("imported 3 regions (3 new); 3 monitored"))
        let list = try keeptrack(["regions", "list", "--data-dir", dir])
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix(#"{"region":"hofgarten","shape":"circle","lat":48.142780000"#))
        #expect(lines[0].hasSuffix(#","radius":80.0,"state":"unknown"}"#))
        let removed = try keeptrack(["regions", "remove", "hofgarten", "--data-dir", dir])
        #expect(removed.stdout.contains("removed 1; 2 monitored"))
        let missing = try keeptrack(["regions", "remove", "nowhere", "--data-dir", dir])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("no monitored region with id nowhere"))
    }
}
