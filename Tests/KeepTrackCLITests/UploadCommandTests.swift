import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("keeptrack replay --upload, keeptrack serve", .offThePool)
struct UploadCommandTests {
    func temporaryDirectory() -> String {
        do { return try TemporaryDirectory("keeptrack-cli").path } catch { preconditionFailure("\(error)") }
    }

    /// README's first command: the bundled walk through the whole pipeline into the embedded
    /// endpoint, ending with where the trail is and how much was stored.
    @Test func theMainJobStoresTheWalkInTheEmbeddedEndpoint() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack([
            "replay", "--upload", "embedded", "--regions", "fixtures/walk-15min.regions.geojson",
            "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0)
        #expect(r.stderr.contains("upload: 900 records acknowledged"))
        #expect(r.stderr.contains("0 left in the outbox"))
        #expect(r.stderr.contains("embedded endpoint: 895 points and 5 region events stored for device"))
        let trails = try FileManager.default.contentsOfDirectory(atPath: dir + "/trails")
        #expect(trails.count == 1)
        let geo = try Data(contentsOf: URL(fileURLWithPath: dir + "/trails/" + trails[0]))
        let json = try #require(try JSONSerialization.jsonObject(with: geo) as? [String: Any])
        let features = try #require(json["features"] as? [[String: Any]])
        let line = try #require(features.first?["geometry"] as? [String: Any])
        #expect((line["coordinates"] as? [Any])?.count == 895)
        #expect(features.count == 6)
        // No log lines on standard output: it carries the events only.
        #expect(r.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("{\"event\":") })
    }

    @Test func anUnreachableEndpointKeepsEverythingForTheNextRun() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack([
            "replay", "--upload", "http://127.0.0.1:9/v1/locations", "--max-backoff", "0.01",
            "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0)
        #expect(r.stderr.contains("895 left in the outbox"))
        #expect(r.stderr.contains("they go with the next run"))
        // The next run, with the endpoint there, sends both runs' records.
        let next = try keeptrack(["replay", "--upload", "embedded", "--data-dir", dir, "fixtures/walk-15min.nmea"])
        #expect(next.status == 0)
        #expect(next.stderr.contains("upload: 1,790 records acknowledged"))
    }

    /// `keeptrack outbox`: what waits, and the dead letters' way back. (The processes are waited
    /// for off the cooperative pool: two threads here, which the pty tests need.)
    /// A CA file that isn't there is named and the records stay. (The refused MQTT client used to
    /// be freed twice; run by hand the process aborted with "double free or corruption", while
    /// under this test glibc did not always notice.)
    @Test func aMissingCAFileForMQTTIsNamedAndTheRecordsStay() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await offThePool {
            try keeptrack([
                "replay", "--upload", "mqtts://127.0.0.1:9", "--ca-file", dir + "/missing.pem", "--max-backoff", "0.01",
                "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("the CA file \(dir)/missing.pem: No such file or directory"), "\(r.stderr)")
        #expect(r.stderr.contains("; check --ca-file"), "\(r.stderr)")
        #expect(r.stderr.contains("895 left in the outbox"), "\(r.stderr)")
    }

    /// libmosquitto (and the OpenSSL it links) is opened at the first MQTT connection, not when
    /// keeptrack starts: the dynamic loader's own list of what it loads at start (what `ldd` prints)
    /// names none of them. The MQTT tests show that the connection still opens it.
    @Test func startingLoadsNoMQTTLibrary() throws {
        let loaded = try keeptrack(["--version"], environment: ["LD_TRACE_LOADED_OBJECTS": "1"]).stdout
        #expect(loaded.contains("libgps.so"), "\(loaded)")
        for library in ["libmosquitto", "libssl", "libcrypto"] {
            #expect(!loaded.contains(library), "\(library) loaded at start:\n\(loaded)")
        }
    }

    @Test func theOutboxCommandShowsWhatWaits() async throws {
        let parent = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: parent) }
        // A first run: the data directory does not exist yet, and uploading creates it.
        let dir = parent + "/first-run/keeptrack"
        let results = try await offThePool { () throws -> [CLIResult] in
            let missing = try keeptrack(["outbox", "status", "--data-dir", dir])
            _ = try keeptrack([
                "replay", "--upload", "http://127.0.0.1:9/v1/locations", "--max-backoff", "0.01",
                "--device-id", "van-1", "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
            return [missing]
                + (try [["status"], ["dead-letters"], ["retry", "--all"], ["retry"]].map {
                    try keeptrack(["outbox"] + $0 + ["--data-dir", dir])
                })
        }
        #expect(results[0].stderr.contains("no outbox at \(dir)/outbox.sqlite"))
        #expect(results[1].status == 0)
        #expect(results[1].stdout.contains("device van-1, 895 pending"))
        #expect(results[1].stdout.contains("0 dead letters"))
        #expect(results[2].stdout.isEmpty)
        #expect(results[3].stdout == "0 dead letters back in the outbox\n")
        #expect(results[4].stderr.contains("retry takes --all or sequence numbers"))
    }

    @Test(arguments: [
        (
            ["replay", "--upload", "ftp://x", "fixtures/walk-15min.nmea"],
            "--upload takes an http(s):// or mqtt(s):// URL"
        ),
        (
            ["replay", "--upload", "mqtt://h", "--format", "osmand", "fixtures/walk-15min.nmea"],
            "--upload mqtt(s):// publishes OwnTracks JSON or Home Assistant's discovery: --format osmand does not apply."
        ),
        (
            ["serve", "--mqtt", "mqtt://h:0"],
            "--mqtt: the port '0' of the mqtt:// URL is not a number from 1 to 65535."
        ),
        (
            ["replay", "--token", "t", "fixtures/walk-15min.nmea"],
            "--device-id, --token, --ca-file, --header and --user go with --upload URL."
        ),
        (
            ["replay", "--upload", "embedded", "--header", "nocolon", "fixtures/walk-15min.nmea"],
            "--header takes 'Name: value'"
        ),
        (["serve", "--fail-rate", "2"], "Faults: failRate must be between 0 and 1."),
        (["replay", "--upload", "embedded", "--format", "gpx", "fixtures/walk-15min.nmea"], "--format"),
    ])
    func badUploadOptionsAreNamed(arguments: [String], message: String) throws {
        let r = try keeptrack(arguments)
        #expect(r.status == 64)
        #expect(r.stderr.contains(message))
    }

    @Test func aCAFileThatIsNotPEMIsNamed() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack([
            "replay", "--upload", "https://127.0.0.1:9/v1/locations", "--ca-file",
            "fixtures/walk-15min.nmea", "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--ca-file fixtures/walk-15min.nmea: no PEM certificate could be read"))
    }
}

@Suite("tools/crash-test.py: nothing lost, nothing stored twice", .offThePool)
struct CrashTestTests {
    /// A handful of SIGKILLs of the uploader while the endpoint fails, drops, refuses and dies;
    /// the script checks the endpoint holds every id once, in order (`tools/crash-test.py --kills 100`
    /// is the long version).
    @Test func killsAndOutagesLoseNothingAndStoreNothingTwice() async throws {
        let tool = try Tool(
            "tools/crash-test.py",
            [
                "--kills", "5", "--seed", "7", "--speed", "120",
                "--keeptrack", productsDirectory.appendingPathComponent("keeptrack").path,
            ])
        tool.guardAgainstHang(seconds: 600)
        let lines = try await tool.remainingLines()
        #expect(
            lines.last == "OK: nothing lost, every printed location stored, nothing stored twice, order kept",
            "\(lines) \(tool.errors())")
        #expect(lines.first?.contains("5 SIGKILLs of the uploader") == true)
    }

    /// The same over MQTT: the uploader SIGKILLed while a real mosquitto is down or restarts, and
    /// `serve --mqtt` storing what the broker delivers (`tools/crash-test.py --mqtt --kills 100` is the
    /// long version).
    @Test func overMQTTKillsAndBrokerRestartsLoseNothingAndStoreNothingTwice() async throws {
        let tool = try Tool(
            "tools/crash-test.py",
            [
                "--mqtt", "--kills", "5", "--seed", "7", "--speed", "120",
                "--keeptrack", productsDirectory.appendingPathComponent("keeptrack").path,
            ])
        tool.guardAgainstHang(seconds: 600)
        let lines = try await tool.remainingLines()
        #expect(
            lines.last == "OK: nothing lost, every printed location stored, nothing stored twice, order kept",
            "\(lines) \(tool.errors())")
        #expect(lines.first?.contains("5 SIGKILLs of the uploader") == true)
    }

    /// The same with the endpoint on PostgreSQL (a throwaway cluster), which is also restarted and
    /// SIGKILLed mid-run (`tools/crash-test.py --postgres --kills 40` is the long version).
    @Test func onPostgreSQLKillsAndDatabaseRestartsLoseNothingAndStoreNothingTwice() async throws {
        let tool = try Tool(
            "tools/crash-test.py",
            [
                "--postgres", "--kills", "5", "--seed", "5", "--speed", "120",
                "--keeptrack", productsDirectory.appendingPathComponent("keeptrack").path,
            ])
        tool.guardAgainstHang(seconds: 600)
        let lines = try await tool.remainingLines()
        #expect(
            lines.last == "OK: nothing lost, every printed location stored, nothing stored twice, order kept",
            "\(lines) \(tool.errors())")
        #expect(lines.first?.contains("5 SIGKILLs of the uploader") == true)
    }
}

@Suite("keeptrack track: graceful shutdown", .offThePool)
struct GracefulShutdownTests {
    /// SIGTERM stops the receiver, uploads what the outbox holds (nothing was uploaded before:
    /// batches wait an hour), stops the endpoint and removes the control socket. SIGHUP (a closed
    /// terminal) does the same: it used to kill the tracker with what it had printed and not committed.
    @Test(arguments: [SIGTERM, SIGHUP]) func sigtermUploadsTheOutboxBeforeExiting(signal: Int32) throws {
        let dir = try TemporaryDirectory("keeptrack-term").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try Tool(
            "tools/fake-receiver.py",
            [
                "fixtures/walk-15min.nmea", "--now", "--baud", "38400",
                "--rate", "4", "--link", dir + "/ttyGPS",
            ])
        receiver.guardAgainstHang(seconds: 120)
        defer { receiver.terminate() }
        _ = receiver.readLine()
        let errors = dir + "/stderr"
        let track = try Tool(
            executable: URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "exec \"$0\" track --serial \"$1\" --baud 38400 --upload embedded --batch-wait 3600 --data-dir \"$2\" "
                    + "--control \"$2/control.sock\" 2>\"$3\"",
                productsDirectory.appendingPathComponent("keeptrack").path, dir + "/ttyGPS", dir, errors,
            ])
        track.guardAgainstHang(seconds: 120)
        var seen: [String] = []
        for _ in 0..<3 { _ = track.readLine(containing: "\"event\":\"location\"", seen: &seen) }
        // keeptrack status reads the running tracker's state and metrics.
        let status = try keeptrack(["status", "--control", dir + "/control.sock"])
        #expect(status.status == 0)
        #expect(status.stdout.contains("state: active"))
        // How many fixes were filtered is not under test: on a loaded machine the receiver, descheduled
        // mid-epoch, has an epoch split by the serial source's end-of-epoch gap, and its halves lack
        // an accuracy or a position.
        #expect(status.stdout.contains(" delivered as locations, "))
        #expect(status.stdout.contains("uploads: 0 records in 0 requests"))
        let prometheus = try keeptrack(["status", "--prometheus", "--control", dir + "/control.sock"])
        #expect(prometheus.stdout.contains("# TYPE keeptrack_fixes_total counter"))
        #expect(prometheus.stdout.contains("keeptrack_lifecycle_state{state=\"active\"} 1"))
        kill(track.process.processIdentifier, signal)
        while let line = track.readLine() { seen.append(line) }
        let locations = seen.filter { $0.hasPrefix("{\"event\":\"location\"") }.count
        #expect(locations >= 3)
        let summary = try String(contentsOfFile: errors, encoding: .utf8)
        #expect(summary.contains("upload: \(locations) records acknowledged"), "\(summary)")
        #expect(summary.contains("embedded endpoint: \(locations) points"))
        #expect(summary.contains("0 left in the outbox"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/control.sock"))
    }
}

extension GracefulShutdownTests {
    /// At a replay's end the outbox goes out however long the endpoint takes: here an endpoint that
    /// answers every batch 503 with `Retry-After: 3600`, under `--max-backoff 1h`. SIGTERM then stops
    /// that upload as during the input, within the shutdown timeout: the process exits by itself (the
    /// group, shutting down already, used to ignore it and wait the hour) and keeps every record.
    /// Also when the endpoint never answers: the request in flight when the signal comes is let
    /// finish (its 30 s timeout), then the rest is bounded; the records stay, and the summary says
    /// why. (The stop once took the input's end for its cause and uploaded without a bound: 189 s.)
    @Test(arguments: ["busy", "silent"]) func sigtermAtTheEndOfAReplayStopsItsUpload(endpoint mode: String) throws {
        let dir = try TemporaryDirectory("keeptrack-end-term").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let endpoint = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c",
                """
                import http.server, sys, threading
                class H(http.server.BaseHTTPRequestHandler):
                    def do_POST(self):
                        self.rfile.read(int(self.headers.get("Content-Length", 0)))
                        print("request", flush=True)
                        if sys.argv[1] == "silent":
                            threading.Event().wait()
                        self.send_response(503)
                        self.send_header("Retry-After", "3600")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    def log_message(self, *args):
                        pass
                s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
                s.daemon_threads = True
                print(s.server_address[1], flush=True)
                s.serve_forever()
                """,
                mode,
            ])
        endpoint.guardAgainstHang(seconds: 180)
        defer { endpoint.terminate() }
        let port = try #require(endpoint.readLine())
        let replay = try Tool(
            executable: productsDirectory.appendingPathComponent("keeptrack"),
            [
                "replay", "--upload", "http://127.0.0.1:\(port)/v1/locations", "--max-backoff", "1h",
                "--shutdown-timeout", "1s", "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        // Past a request's 30 s timeout and the shutdown timeout; short of the unbounded upload.
        replay.guardAgainstHang(seconds: 50)
        // Every fix tracked (the last one's location printed), and the endpoint asked at least once.
        var seen: [String] = []
        #expect(replay.readLine(containing: "\"time\":\"2024-05-14T09:45:00", seen: &seen) != nil)
        #expect(endpoint.readLine() == "request")
        kill(replay.process.processIdentifier, SIGTERM)
        replay.drain()
        replay.process.waitUntilExit()
        #expect(replay.process.terminationReason == .exit, "killed by its hang guard: it ignored SIGTERM")
        #expect(replay.process.terminationStatus == 0, "\(replay.errors())")
        // The summary says why the records stay: the endpoint's last answer, or its silence.
        let why = mode == "busy" ? "the endpoint answered 503" : "127.0.0.1:\(port) did not answer within 30 s"
        #expect(replay.errors().contains("895 left in the outbox (\(why)"), "\(replay.errors())")
        let status = try keeptrack(["outbox", "status", "--data-dir", dir])
        #expect(status.stdout.contains("895 pending"), "\(status.stdout)")
    }
}

@Suite("Ctrl-C", .offThePool)
struct InterruptTests {
    /// A paced replay stops at SIGINT (a graceful shutdown), rather than running to the end.
    @Test(arguments: [
        ["replay", "--speed", "1", "fixtures/walk-15min.nmea"],
        ["replay", "--speed", "1", "--distance-filter", "5", "fixtures/walk-15min.nmea"],
    ])
    func aPacedReplayStopsOnSIGINT(arguments: [String]) throws {
        let replay = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"), arguments)
        replay.guardAgainstHang(seconds: 60)
        var seen: [String] = []
        #expect(replay.readLine(containing: "\"time\":", seen: &seen) != nil)
        kill(replay.process.processIdentifier, SIGINT)
        while let line = replay.readLine() { seen.append(line) }
        // The walk has 895 fixes over 15 minutes: a handful were printed, then the end.
        #expect(seen.count < 100)
    }
}

@Suite("tools/events-crash-test.py: events exactly once over kill -9")
struct EventsCrashTestTests {
    /// Two serve instances on one throwaway PostgreSQL, each SIGKILLed in turn while a fleet uploads
    /// across geofences: every event the reference run finds is stored, delivered to the idempotent
    /// receiver (500 to every third post) with a valid signature and processed once, and every
    /// device has one `offline` more than `online` (`tools/events-crash-test.py --kills 20
    /// --devices 50` is the long version).
    @Test func twoInstancesKilledInTurnDeliverEveryEventOnce() async throws {
        let tool = try Tool(
            "tools/events-crash-test.py",
            [
                "--devices", "6", "--seconds", "300", "--kills", "2", "--seed", "7", "--offline-after", "5",
                "--keeptrack", productsDirectory.appendingPathComponent("keeptrack").path,
            ])
        tool.guardAgainstHang(seconds: 600)
        let lines = try await tool.remainingLines()
        #expect(
            lines.last
                == "OK: every event stored as the reference finds it, each delivered, signed, and processed once",
            "\(lines) \(tool.errors())")
        #expect(lines.first?.contains("2 SIGKILLs of the instances") == true, "\(lines)")
    }
}
