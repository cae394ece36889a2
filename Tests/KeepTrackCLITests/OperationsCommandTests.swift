import ConfigFile
import Foundation
import KeepTrackTesting
import Testing

@testable import keeptrack

/// Runs a program in the package root and returns its standard output (standard error discarded).
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.currentDirectoryURL = packageRoot
    if let environment { process.environment = environment }
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("keeptrack --version")
struct VersionTests {
    @Test func printsTheVersionFileAndTheCommitItWasBuiltFrom() throws {
        let r = try keeptrack(["--version"])
        #expect(r.status == 0)
        let version = try String(contentsOf: packageRoot.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let (status, head) = try run("/usr/bin/git", ["-c", "safe.directory=*", "rev-parse", "--short=12", "HEAD"])
        #expect(status == 0)
        let commit = head.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(r.stdout.hasPrefix("\(version) (commit \(commit)"), "\(r.stdout)")
        #expect(commit.count == 12)
    }

    @Test func saysUnknownOutsideAGitCheckoutUnlessTold() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keeptrack-buildinfo-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "9.8.7\n".write(to: dir.appendingPathComponent("VERSION"), atomically: true, encoding: .utf8)
        let script = packageRoot.appendingPathComponent("tools/build-info").path
        let generated = dir.appendingPathComponent("out/BuildInfo+Generated.swift")
        var env = ProcessInfo.processInfo.environment
        env["KEEPTRACK_COMMIT"] = nil
        env["GIT_CEILING_DIRECTORIES"] = dir.deletingLastPathComponent().path
        #expect(try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        var text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedVersion = \"9.8.7\""))
        #expect(text.contains("generatedCommit = \"unknown\""))
        env["KEEPTRACK_COMMIT"] = "abc123"
        #expect(try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedCommit = \"abc123\""))
    }
}

@Suite("Durations on the command line and in the config file")
struct DurationOptionTests {
    @Test func everyDurationOptionTakesUnits() throws {
        let t = try Track.parse([
            "--gpsd", "localhost:2947", "--upload", "embedded", "--batch-wait", "2m", "--max-backoff", "1h",
            "--outbox-max-age", "12h", "--shutdown-timeout", "90", "--regions", "r.geojson", "--dwell", "5m",
            "--sample-interval", "2m", "--budget", "1h", "--warning-lead", "10s", "--grace", "1m",
            "--wake-window", "30s", "--total-cap", "2h",
        ])
        #expect(t.upload.batchWait == 120)
        #expect(t.upload.maxBackoff == 3600)
        #expect(t.upload.outboxMaxAge == 43_200)
        #expect(t.upload.shutdownTimeout == 90)
        #expect(t.location.dwell == 300)
        #expect(t.lifecycle.sampleInterval == 120)
        let p = try t.lifecycle.policyOptions.resolved()
        #expect(p.budget == 3600 && p.warningLead == 10 && p.grace == 60 && p.wakeWindow == 30 && p.totalCap == 7200)
        // A bare --outbox-max-age counts days, as it always has.
        #expect(try Track.parse(["--gpsd", "h", "--outbox-max-age", "30"]).upload.outboxMaxAge == 2_592_000)
        #expect(try Simulate.parse(["--duration", "2h"]).duration == 7200)
        #expect(try Serve.parse(["--idle-timeout", "1m", "--body-timeout", "90s"]).bodyTimeout == 90)
    }

    @Test func aBadDurationNamesTheOptionWhatWasGivenAndWhatIsAccepted() throws {
        let r = try keeptrack(["replay", "--upload", "embedded", "--batch-wait", "5x", "fixtures/walk-15min.nmea"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("The value '5x' is invalid for '--batch-wait <duration>': '5x' is not a duration: "
            + "write a number of seconds (90) or a number with s, m, h or d (90s, 5m, 2h, 30d)"), "\(r.stderr)")
    }

    @Test func theConfigFileTakesDurationsAndNamesTheLineOfABadOne() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keeptrack-durations-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good.yaml").path
        try "gpsd: localhost\nupload: embedded\nbatch-wait: 5m\noutbox-max-age: 7d\n".write(
            toFile: good, atomically: true, encoding: .utf8)
        let ok = try keeptrack(["config", "check", good])
        #expect(ok.status == 0, "\(ok.stderr)")
        let arguments = try TrackConfig.reader.optionArguments(path: good).flatMap(\.arguments)
        #expect(try Track.parse(arguments).upload.batchWait == 300)
        let bad = dir.appendingPathComponent("bad.yaml").path
        try "gpsd: localhost\nupload: embedded\nmax-backoff: 5 minutes\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let r = try keeptrack(["config", "check", bad])
        #expect(r.status == 1)
        #expect(r.stderr.contains("bad.yaml:3: max-backoff: The value '5 minutes' is invalid for '--max-backoff <duration>': "
            + "'5 minutes' is not a duration"), "\(r.stderr)")
    }
}

@Suite("Every location setting reachable")
struct LocationSettingsTests {
    @Test func everyLibrarySettingHasAnOptionAndAConfigKey() throws {
        let t = try Track.parse([
            "--gpsd", "h", "--time-interval", "1m", "--heading-change", "30", "--pause-when-stationary",
            "--stationary-radius", "40", "--stationary-timeout", "2m", "--significant-changes",
            "--significant-change-distance", "1000", "--significant-change-interval", "10m", "--max-fix-age", "1h",
        ])
        let c = t.location.settings.configuration
        let s = try #require(c.standardUpdates)
        #expect(s.timeInterval == 60 && s.headingChange == 30 && s.stationaryRadius == 40 && s.stopTimeout == 120)
        #expect(s.maxAge == 3600)
        #expect(c.significantChanges?.distance == 1000 && c.significantChanges?.minimumInterval == 600)
        #expect(try Track.parse(["--gpsd", "h", "--max-fix-age", "none"]).location.settings.configuration.standardUpdates?.maxAge
            == .infinity)
        // The library's defaults when the options are absent.
        let d = try #require(try Track.parse(["--gpsd", "h"]).location.settings.configuration.standardUpdates)
        #expect(d.maxAge == 10 && d.stationaryRadius == 25 && d.stopTimeout == 300 && d.timeInterval == nil)
        for key in ["time-interval", "heading-change", "stationary-radius", "stationary-timeout",
                    "significant-change-distance", "significant-change-interval", "max-fix-age"] {
            #expect(TrackConfig.keys[key] != nil, "\(key)")
        }
        #expect(throws: (any Error).self) { try Track.parse(["--gpsd", "h", "--stationary-radius", "40"]) }
        #expect(throws: (any Error).self) { try Track.parse(["--gpsd", "h", "--significant-change-distance", "9"]) }
    }

    /// An old log through a real gpsd: every fix is years stale for the wall clock, so nothing is
    /// delivered, until `--max-fix-age none`.
    @Test func anOldLogThroughGPSFakeGivesEventsWithMaxFixAgeNone() async throws {
        // gpsfake, the trackers and their answers block: off the cooperative pool, which other
        // suites need meanwhile.
        let (status, line, seen) = try await offThePool { () throws -> (String, String?, [String]) in
            let gpsd = try GPSFake.start("walk-15min.nmea")
            defer { try? gpsd.stop() }
            var template = Array("/tmp/keeptrack-fixage-XXXXXX".utf8CString)
            let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
            defer { try? FileManager.default.removeItem(atPath: dir) }

            // The default: fixes arrive and are all filtered as stale.
            let control = dir + "/control.sock"
            let stale = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"),
                                 ["track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--distance-filter", "10", "--control", control,
                                  "--data-dir", dir])
            stale.guardAgainstHang(seconds: 60)
            var status = ""
            for _ in 0..<600 {
                status = (try? keeptrack(["status", "--control", control]).stdout) ?? ""
                if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("fixes: ") }),
                   let received = Int(line.dropFirst(7).prefix { $0.isNumber }), received >= 5 { break }
                usleep(50_000)  // polling the tracker's counters until it has seen 5 fixes
            }
            stale.terminate()

            // --max-fix-age none: the same log gives location events.
            let track = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"),
                                 ["track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--distance-filter", "10", "--max-fix-age", "none",
                                  "--control", control, "--data-dir", dir])
            track.guardAgainstHang(seconds: 60)
            defer { track.terminate() }
            var seen: [String] = []
            let line = track.readLine(containing: "\"event\":\"location\"", seen: &seen)
            return (status, line, seen)
        }
        #expect(status.contains(" 0 delivered as locations"), "\(status)")
        #expect(!status.contains("fixes: 0 received"), "\(status)")
        #expect(line?.contains("\"time\":\"20") == true, "\(seen)")
    }
}

@Suite("track --metrics-listen")
struct MetricsListenTests {
    /// A free loopback port (bound, read and released; the tracker binds it next).
    func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// GET over real HTTP with Python's urllib (Debian's python3, a gpsd dependency): status,
    /// content type and body, retrying only while the port refuses connections (not yet listening).
    func get(_ url: String) throws -> (status: Int, type: String, body: String) {
        let script = """
            import sys, time, urllib.request, urllib.error
            for attempt in range(400):
                try:
                    r = urllib.request.urlopen(sys.argv[1], timeout=10)
                    print(r.status); print(r.headers.get('Content-Type')); sys.stdout.write(r.read().decode()); break
                except urllib.error.HTTPError as e:
                    print(e.code); print(e.headers.get('Content-Type')); break
                except urllib.error.URLError as e:
                    if not isinstance(e.reason, ConnectionRefusedError): raise
                    time.sleep(0.05)
            """
        let (status, out) = try run("/usr/bin/python3", ["-c", script, url])
        guard status == 0 else { throw TimedOut(what: "an answer from \(url) (python3 exited \(status)): \(out)") }
        let lines = out.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        return (Int(lines.first ?? "") ?? 0, lines.count > 1 ? String(lines[1]) : "", lines.count > 2 ? String(lines[2]) : "")
    }

    @Test func servesTheTrackersPrometheusTextOverHTTP() async throws {
        let (line, seen, metrics, root) = try await offThePool {
            () throws -> (String?, [String], (status: Int, type: String, body: String), Int) in
            let gpsd = try GPSFake.start("walk-15min.nmea")
            defer { try? gpsd.stop() }
            var template = Array("/tmp/keeptrack-metrics-XXXXXX".utf8CString)
            let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let port = freePort()
            let track = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"),
                                 ["track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--max-fix-age", "none",
                                  "--metrics-listen", "127.0.0.1:\(port)", "--control", dir + "/control.sock", "--data-dir", dir])
            track.guardAgainstHang(seconds: 60)
            defer { track.terminate() }
            var seen: [String] = []
            let line = track.readLine(containing: "\"event\":\"location\"", seen: &seen)
            return (line, seen, try get("http://127.0.0.1:\(port)/metrics"), try get("http://127.0.0.1:\(port)/").status)
        }
        #expect(line != nil, "\(seen)")
        #expect(metrics.status == 200)
        #expect(metrics.type.hasPrefix("text/plain; version=0.0.4"))
        func value(_ name: String) -> Double? {
            metrics.body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        #expect((value("keeptrack_fixes_total") ?? 0) >= 1, "\(metrics.body)")
        #expect((value("keeptrack_locations_delivered_total") ?? 0) >= 1)
        #expect(metrics.body.contains("# TYPE keeptrack_fixes_total counter"))
        #expect(root == 404)
    }

    @Test func aBadAddressIsNamed() throws {
        let r = try keeptrack(["track", "--gpsd", "localhost", "--metrics-listen", "9477"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--metrics-listen takes HOST:PORT or [IPv6]:PORT, got '9477'."))
        #expect(try Track.parse(["--gpsd", "h", "--metrics-listen", "[::1]:9477"]).metricsListen == "[::1]:9477")
    }
}

@Suite("Valid output: GPX read back by gpsbabel, GeoJSON checked by a validator")
struct ValidOutputTests {
    func temporaryDirectory() -> String {
        var template = Array("/tmp/keeptrack-valid-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    /// The track points gpsbabel reads from a GPX file (Debian's gpsbabel: `-t` reads tracks).
    func gpsbabelTrackPoints(_ path: String) throws -> [String] {
        let (status, out) = try run("/usr/bin/gpsbabel", ["-t", "-i", "gpx", "-f", path, "-o", "unicsv", "-F", "-"])
        #expect(status == 0)
        // unicsv ends lines with CR LF (one Character in Swift): split on any newline; the header first.
        return out.split(whereSeparator: \.isNewline).dropFirst().map(String.init)
    }

    /// Python's `geojson` package (Debian's python3-geojson): nil when valid, else its errors.
    func geojsonProblems(_ path: String) throws -> String? {
        let (status, out) = try run("/usr/bin/python3", ["-c", """
            import sys, geojson
            o = geojson.load(open(sys.argv[1]))
            print("ok" if o.is_valid else o.errors())
            """, path])
        #expect(status == 0)
        let verdict = out.trimmingCharacters(in: .whitespacesAndNewlines)
        return verdict == "ok" ? nil : verdict
    }

    @Test func decodedGPXRoundTripsThroughGPSBabelWithEveryPoint() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack(["decode", "--format", "gpx", "fixtures/walk-15min.nmea"])
        #expect(r.status == 0)
        try r.stdout.write(toFile: dir + "/walk.gpx", atomically: true, encoding: .utf8)
        let points = try gpsbabelTrackPoints(dir + "/walk.gpx")
        #expect(points.count == 895)
        // The first point's position, as gpsbabel read it back.
        #expect(points.first?.hasPrefix("1,48.137366,11.575409,") == true, "\(points.first ?? "")")
    }

    @Test func exportedTrailsAreValidGPXAndGeoJSONOneLocationOrMany() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A one-fix log: the walk's first epoch.
        let walk = try fixtureBytes("walk-15min.nmea")
        let eighthLineEnd = walk.indices.filter { walk[$0] == UInt8(ascii: "\n") }[7]
        try Data(walk[...eighthLineEnd]).write(to: URL(fileURLWithPath: dir + "/one.nmea"))
        for (device, log, expected) in [("one", dir + "/one.nmea", 1), ("walk", "fixtures/walk-15min.nmea", 895)] {
            let replay = try keeptrack(["replay", "--upload", "embedded", "--device-id", device, "--data-dir", dir, log])
            #expect(replay.status == 0, "\(replay.stderr)")
            for format in ["gpx", "geojson"] {
                let path = "\(dir)/\(device).\(format)"
                let export = try keeptrack(["export", "--db", dir + "/endpoint.sqlite", "--device", device,
                                            "--format", format, "--output", path])
                #expect(export.status == 0, "\(export.stderr)")
                if format == "gpx" {
                    #expect(try gpsbabelTrackPoints(path).count == expected)
                } else {
                    #expect(try geojsonProblems(path) == nil)
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    #expect(text.contains(expected == 1 ? #""geometry":{"type":"Point""# : #""type":"LineString""#),
                            "\(device): \(text.prefix(200))")
                }
            }
            // The trail the replay wrote for the embedded endpoint, too.
            #expect(try geojsonProblems("\(dir)/trails/\(device).geojson") == nil)
        }
        let decoded = try keeptrack(["decode", "--format", "geojson", "fixtures/walk-15min.nmea"])
        try decoded.stdout.write(toFile: dir + "/decoded.geojson", atomically: true, encoding: .utf8)
        #expect(try geojsonProblems(dir + "/decoded.geojson") == nil)
    }
}
