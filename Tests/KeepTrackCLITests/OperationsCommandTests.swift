import ConfigFile
import Formats
import Foundation
import KeepTrackTesting
import Testing

@testable import keeptrack

/// Runs a program in the package root and returns its standard output (blocking, as ``keeptrack(_:stdin:environment:)``).
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, String) {
    let r = try runCommand(URL(fileURLWithPath: executable), arguments, environment: environment)
    return (r.status, r.output)
}

@Suite("keeptrack --version", .offThePool)
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
        let dir = try TemporaryDirectory("keeptrack-buildinfo").url
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "9.8.7\n".write(to: dir.appendingPathComponent("VERSION"), atomically: true, encoding: .utf8)
        let script = packageRoot.appendingPathComponent("tools/build-info").path
        let generated = dir.appendingPathComponent("out/BuildInfo+Generated.swift")
        var env = ProcessInfo.processInfo.environment
        env["KEEPTRACK_COMMIT"] = nil
        env["GIT_CEILING_DIRECTORIES"] = dir.deletingLastPathComponent().path
        #expect(
            try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        var text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedVersion = \"9.8.7\""))
        #expect(text.contains("generatedCommit = \"unknown\""))
        env["KEEPTRACK_COMMIT"] = "abc123"
        #expect(
            try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedCommit = \"abc123\""))
    }
}

@Suite("Durations on the command line and in the config file", .offThePool)
struct DurationOptionTests {
    @Test func everyDurationOptionTakesUnits() throws {
        let t = try Track.parse([
            "--gpsd", "localhost:2947", "--upload", "embedded", "--batch-wait", "2m", "--max-backoff", "1h",
            "--outbox-max-age", "12h", "--shutdown-timeout", "90", "--regions", "fixtures/walk-15min.regions.geojson",
            "--dwell", "5m",
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
        // Issue 25: the first-request timeout, and a cap sized from the descriptor limit unless given.
        let serve = try Serve.parse(["--first-request-timeout", "5s"]).serverConfiguration()
        #expect(serve.firstRequestTimeout == .seconds(5) && serve.maxConnections == nil)
        #expect(try Serve.parse([]).serverConfiguration().firstRequestTimeout == .seconds(10))
        #expect(try Serve.parse(["--max-connections", "64"]).serverConfiguration().maxConnections == 64)
    }

    @Test func aBadDurationNamesTheOptionWhatWasGivenAndWhatIsAccepted() throws {
        let r = try keeptrack(["replay", "--upload", "embedded", "--batch-wait", "5x", "fixtures/walk-15min.nmea"])
        #expect(r.status == 64)
        #expect(
            r.stderr.contains(
                "The value '5x' is invalid for '--batch-wait <duration>': '5x' is not a duration: "
                    + "write a number of seconds (90) or a number with s, m, h or d (90s, 5m, 2h, 30d)"), "\(r.stderr)")
    }

    @Test func theConfigFileTakesDurationsAndNamesTheLineOfABadOne() throws {
        let dir = try TemporaryDirectory("keeptrack-durations").url
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
        try "gpsd: localhost\nupload: embedded\nmax-backoff: 5 minutes\n".write(
            toFile: bad, atomically: true, encoding: .utf8)
        let r = try keeptrack(["config", "check", bad])
        #expect(r.status == 1)
        #expect(
            r.stderr.contains(
                "bad.yaml:3: max-backoff: The value '5 minutes' is invalid for '--max-backoff <duration>': "
                    + "'5 minutes' is not a duration"), "\(r.stderr)")
    }
}

@Suite("Every location setting reachable", .offThePool)
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
        #expect(
            try Track.parse(["--gpsd", "h", "--max-fix-age", "none"]).location.settings.configuration.standardUpdates?
                .maxAge
                == .infinity)
        // The library's defaults when the options are absent.
        let d = try #require(try Track.parse(["--gpsd", "h"]).location.settings.configuration.standardUpdates)
        #expect(d.maxAge == 10 && d.stationaryRadius == 25 && d.stopTimeout == 300 && d.timeInterval == nil)
        for key in [
            "time-interval", "heading-change", "stationary-radius", "stationary-timeout",
            "significant-change-distance", "significant-change-interval", "max-fix-age",
        ] {
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
            let dir = try TemporaryDirectory("keeptrack-fixage").path
            defer { try? FileManager.default.removeItem(atPath: dir) }

            // The default: fixes arrive and are all filtered as stale.
            let control = dir + "/control.sock"
            let stale = try Tool(
                executable: productsDirectory.appendingPathComponent("keeptrack"),
                [
                    "track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--distance-filter", "10", "--control", control,
                    "--data-dir", dir,
                ])
            stale.guardAgainstHang(seconds: 60)
            var status = ""
            for _ in 0..<600 {
                status = (try? keeptrack(["status", "--control", control]).stdout) ?? ""
                if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("fixes: ") }),
                    let received = Int(line.dropFirst(7).prefix { $0.isNumber }), received >= 5
                {
                    break
                }
                usleep(50_000)  // polling the tracker's counters until it has seen 5 fixes
            }
            stale.terminate()

            // --max-fix-age none: the same log gives location events.
            let track = try Tool(
                executable: productsDirectory.appendingPathComponent("keeptrack"),
                [
                    "track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--distance-filter", "10", "--max-fix-age", "none",
                    "--control", control, "--data-dir", dir,
                ])
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

@Suite("track --metrics-listen", .offThePool)
struct MetricsListenTests {
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
        return (
            Int(lines.first ?? "") ?? 0, lines.count > 1 ? String(lines[1]) : "",
            lines.count > 2 ? String(lines[2]) : ""
        )
    }

    @Test func servesTheTrackersPrometheusTextOverHTTP() async throws {
        let (line, seen, metrics, root) = try await offThePool {
            () throws -> (String?, [String], (status: Int, type: String, body: String), Int) in
            let gpsd = try GPSFake.start("walk-15min.nmea")
            defer { try? gpsd.stop() }
            let dir = try TemporaryDirectory("keeptrack-metrics").path
            defer { try? FileManager.default.removeItem(atPath: dir) }
            // Port 0: the endpoint says the port it got in its log.
            let track = try Tool(
                executable: productsDirectory.appendingPathComponent("keeptrack"),
                [
                    "track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--max-fix-age", "none",
                    "--metrics-listen", "127.0.0.1:0", "--log-level", "notice",
                    "--control", dir + "/control.sock", "--data-dir", dir,
                ])
            track.guardAgainstHang(seconds: 60)
            defer { track.terminate() }
            var seen: [String] = []
            let line = track.readLine(containing: "\"event\":\"location\"", seen: &seen)
            while !track.errors(limit: 100_000).contains("metrics endpoint listening"), let next = track.readLine() {
                seen.append(next)
            }
            let said = track.errors(limit: 100_000)
            guard let match = said.firstMatch(of: /127\.0\.0\.1:(\d+)\/metrics/), let port = Int(match.1) else {
                throw TimedOut(what: "the metrics endpoint to say its port: \(said)")
            }
            return (
                line, seen, try get("http://127.0.0.1:\(port)/metrics"), try get("http://127.0.0.1:\(port)/").status
            )
        }
        #expect(line != nil, "\(seen)")
        #expect(metrics.status == 200)
        #expect(metrics.type.hasPrefix("text/plain; version=0.0.4"))
        func value(_ name: String) -> Double? {
            metrics.body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
                Double($0.split(separator: " ")[1])
            }
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

    /// An address another process listens on is said with the address and the system's reason, not
    /// NIO's `bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`; the tracker stops.
    @Test func aBusyAddressIsNamed() throws {
        let dir = try TemporaryDirectory("keeptrack-metrics-busy").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let taken = try ReservedPort()
        let r = try keeptrack([
            "track", "--serial", dir + "/nothing-there", "--metrics-listen", "127.0.0.1:\(taken.number)",
            "--data-dir", dir, "--control", dir + "/control.sock",
        ])
        #expect(r.status == 1)
        let said = "the metrics endpoint cannot listen on 127.0.0.1:\(taken.number): address already in use"
        #expect(r.stderr.contains(said), "\(r.stderr)")
    }
}

@Suite("Valid output: GPX read back by gpsbabel, GeoJSON checked by a validator", .offThePool)
struct ValidOutputTests {
    func temporaryDirectory() -> String {
        do { return try TemporaryDirectory("keeptrack-valid").path } catch { preconditionFailure("\(error)") }
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
        let (status, out) = try run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sys, geojson
                o = geojson.load(open(sys.argv[1]))
                print("ok" if o.is_valid else o.errors())
                """, path,
            ])
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
            let replay = try keeptrack([
                "replay", "--upload", "embedded", "--device-id", device, "--data-dir", dir, log,
            ])
            #expect(replay.status == 0, "\(replay.stderr)")
            for format in ["gpx", "geojson"] {
                let path = "\(dir)/\(device).\(format)"
                let export = try keeptrack([
                    "export", "--db", dir + "/endpoint.sqlite", "--device", device,
                    "--format", format, "--output", path,
                ])
                #expect(export.status == 0, "\(export.stderr)")
                if format == "gpx" {
                    #expect(try gpsbabelTrackPoints(path).count == expected)
                } else {
                    #expect(try geojsonProblems(path) == nil)
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    #expect(
                        text.contains(expected == 1 ? #""geometry":{"type":"Point""# : #""type":"LineString""#),
                        "\(device): \(text.prefix(200))")
                }
            }
            // The trail the replay wrote for the embedded endpoint, too.
            #expect(try geojsonProblems("\(dir)/trails/\(device).geojson") == nil)
        }
        // A --db that is not there is said as such: no advice to name one.
        let missing = try keeptrack(["export", "--db", dir + "/none.sqlite"])
        #expect(missing.status == 1 && missing.stderr == "Error: no endpoint database at \(dir)/none.sqlite\n")
        let decoded = try keeptrack(["decode", "--format", "geojson", "fixtures/walk-15min.nmea"])
        try decoded.stdout.write(toFile: dir + "/decoded.geojson", atomically: true, encoding: .utf8)
        #expect(try geojsonProblems(dir + "/decoded.geojson") == nil)
    }
}

@Suite("Logs worth reading", .offThePool)
struct OperationalLogTests {
    /// The JSON log lines of a run, as objects.
    func logs(_ stderr: String) throws -> [[String: Any]] {
        try stderr.split(separator: "\n").filter { $0.hasPrefix("{") }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    @Test func startSourceAndLifecycleAreLoggedWithMetadataAndNoCoordinates() async throws {
        // The process is waited for off the cooperative pool (the pty tests need its two threads).
        let r = try await offThePool {
            try keeptrack([
                "replay", "--background", "--pause-when-stationary", "--significant-changes",
                "--log-level", "info", "--log-format", "json", "--quiet", "fixtures/walk-15min.nmea",
            ])
        }
        #expect(r.status == 0)
        let lines = try logs(r.stderr)
        func first(_ message: String) -> [String: String]? {
            lines.first { $0["message"] as? String == message }?["metadata"] as? [String: String]
        }
        let start = try #require(first("tracker started"))
        #expect(start["version"]?.contains("(commit ") == true)
        #expect(start["significant-changes"] == "true" && start["policy"] == "ios7")
        let source = try #require(first("source changed"))
        #expect(source["kind"] == "connected" && source["source"]?.contains("walk-15min.nmea") == true)
        let transitions = lines.filter { $0["message"] as? String == "lifecycle transition" }
            .compactMap { $0["metadata"] as? [String: String] }
        #expect(transitions.contains { $0["from"] == "inactive" && $0["to"] == "background" })
        // (The lines' own times are left out: "07:00:48.130Z" holds "48.13".)
        let logged = r.stderr.replacing(#/"time":"[^"]*"/#, with: "")
        #expect(!logged.contains("48.13") && !logged.contains("11.57"))
    }

    @Test func uploadFailuresRecoveriesAndOutboxDepthAreLogged() async throws {
        // An endpoint that is not there: every attempt fails, the outbox fills past a tenth of its cap.
        let dir = try TemporaryDirectory("keeptrack-logs").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await offThePool {
            try keeptrack([
                "replay", "--upload", "http://127.0.0.1:9/v1/locations", "--outbox-max-records", "1000",
                "--shutdown-timeout", "0s", "--log-level", "info", "--log-format", "json", "--quiet",
                "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        let lines = try logs(r.stderr)
        let depth = lines.filter { $0["message"] as? String == "outbox filling up" }
        #expect(depth.map { ($0["metadata"] as? [String: String])?["level"] } == ["100", "500"])
        #expect(depth.allSatisfy { $0["level"] as? String == "warning" })
        #expect(lines.contains { $0["message"] as? String == "upload failed" && $0["level"] as? String == "warning" })
    }
}

@Suite("Options tables", .offThePool)
struct ReadmeOptionsTests {
    /// The rows of every table in docs/configuration.md headed `| option | default | what |`: option name and default.
    func readmeRows() throws -> [(option: String, value: String)] {
        let readme = try String(
            contentsOf: packageRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var rows: [(String, String)] = []
        var inTable = false
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "| option | default | what |" { inTable = true; continue }
            guard inTable, line.hasPrefix("|") else { inTable = false; continue }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2, cells[0].hasPrefix("`--") else { continue }
            rows.append((String(cells[0].dropFirst(3).dropLast()), cells[1]))
        }
        return rows
    }

    /// `track`'s options as `--experimental-dump-help` gives them: help text and section, by name.
    func trackOptions() throws -> [String: (abstract: String, section: String, defaultValue: String?)] {
        let help = try keeptrack(["track", "--experimental-dump-help"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(help.stdout.utf8)) as? [String: Any])
        let arguments = try #require((json["command"] as? [String: Any])?["arguments"] as? [[String: Any]])
        var out: [String: (String, String, String?)] = [:]
        for a in arguments {
            for n in (a["names"] as? [[String: Any]]) ?? [] where n["kind"] as? String == "long" {
                out[n["name"] as! String] = (
                    a["abstract"] as? String ?? "", a["sectionTitle"] as? String ?? "",
                    a["defaultValue"] as? String
                )
            }
        }
        return out
    }

    /// The default a help text states ("... The default is 30s."), if any.
    func statedDefault(_ abstract: String) -> String? {
        guard let range = abstract.range(of: "The default is ") else { return nil }
        var text = abstract[range.upperBound...]
        if let end = text.range(of: ". ") {
            text = text[..<end.lowerBound]
        } else if text.hasSuffix(".") {
            text = text.dropLast()
        }
        return String(text)
    }

    @Test func theTablesAgreeWithHelpBothWays() throws {
        let rows = try readmeRows()
        let options = try trackOptions()
        #expect(rows.count >= 20)
        for row in rows {
            let option = try #require(
                options[row.option], "docs/configuration.md lists --\(row.option), which `track --help` does not have")
            // The help states a default once: in its text, or as argument-parser's "(default: ...)".
            #expect(
                statedDefault(option.abstract) == nil || option.defaultValue == nil,
                "--\(row.option) states its default twice")
            if let stated = statedDefault(option.abstract) ?? option.defaultValue {
                #expect(
                    row.value == stated,
                    "--\(row.option): docs/configuration.md says '\(row.value)', --help says '\(stated)'")
            } else {
                #expect(
                    ["off", "none"].contains(row.value),
                    "--\(row.option): docs/configuration.md says '\(row.value)', --help states no default")
            }
            if let shown = option.defaultValue, !["off", "none"].contains(row.value) {
                #expect(
                    shown == row.value || Double(shown) == Double(row.value),
                    "--\(row.option): docs/configuration.md says '\(row.value)', the option's default is \(shown)")
            }
        }
        // Every location and upload option has its row.
        let listed = Set(rows.map(\.option))
        for (name, option) in options
        where option.section.hasPrefix("Location service") || option.section.hasPrefix("Upload") {
            #expect(
                listed.contains(name),
                "--\(name) (\(option.section)) is missing from the options tables of docs/configuration.md")
        }
    }

    @Test func theTablesDurationsAndNumbersAreTheCodesDefaults() throws {
        let rows = Dictionary(try readmeRows().map { ($0.option, $0.value) }, uniquingKeysWith: { a, _ in a })
        let t = try Track.parse(["--gpsd", "h", "--pause-when-stationary", "--significant-changes", "--visits"])
        let s = try #require(t.location.settings.configuration.standardUpdates)
        let sc = try #require(t.location.settings.configuration.significantChanges)
        let visits = try #require(t.location.settings.configuration.visits)
        #expect(visits.radius == nil && rows["visit-radius"] == "adaptive")
        let durations: [String: Double] = [
            "batch-wait": t.upload.batchWait, "max-backoff": t.upload.maxBackoff,
            "shutdown-timeout": t.upload.shutdownTimeout,
            "outbox-max-age": t.upload.outboxMaxAge, "max-fix-age": s.maxAge, "stationary-timeout": s.stopTimeout,
            "significant-change-interval": sc.minimumInterval, "visit-min-duration": visits.minimumDuration,
            "visit-gap": visits.maximumGap,
        ]
        for (option, value) in durations {
            let text = try #require(rows[option], "--\(option) missing from docs/configuration.md")
            #expect(
                try DurationText.parse(text) == value,
                "--\(option): docs/configuration.md says \(text), the code \(value) s")
        }
        let numbers: [String: Double] = [
            "distance-filter": s.distanceFilter, "stationary-radius": s.stationaryRadius,
            "significant-change-distance": sc.distance, "batch-size": Double(t.upload.batchSize),
            "outbox-max-records": Double(t.upload.outboxMaxRecords),
        ]
        for (option, value) in numbers {
            #expect(
                rows[option].flatMap(Double.init) == value,
                "--\(option): docs/configuration.md says \(rows[option] ?? "nothing"), the code \(value)")
        }
        #expect(rows["desired-accuracy"] == s.desiredAccuracy.rawValue)
        #expect(rows["format"] == t.upload.format)
    }
}
