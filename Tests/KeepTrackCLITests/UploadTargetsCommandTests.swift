import Foundation
import KeepTrackTesting
import Testing
import TrackStore

@testable import keeptrack

/// Issue 29, item 1: `--upload` repeated, per-target options paired by order, each target a lane.
@Suite("keeptrack replay with several --upload targets", .offThePool)
struct UploadTargetsCommandTests {
    func temporaryDirectory() -> String {
        do { return try TemporaryDirectory("keeptrack-targets").path } catch { preconditionFailure("\(error)") }
    }

    /// A replay to two targets, one of them refusing connections: the other gets everything, the
    /// end says what stays for which target, `outbox status` shows each; the next run, with the
    /// second target up, delivers what it lacked and sends the first nothing twice.
    @Test func aTargetThatIsDownGetsItsRecordsWithTheNextRun() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let closed = try ReservedPort()
        let replay: @Sendable (String) throws -> CLIResult = { fleet in
            try keeptrack([
                "replay", "--upload", "embedded", "--upload", fleet, "--target-name", "local", "--target-name", "fleet",
                "--token", "t0ken", "--max-backoff", "0.01", "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        let first = try await offThePool { try replay("http://127.0.0.1:\(closed.number)/v1/locations") }
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("upload to local: 895 records acknowledged"), "\(first.stderr)")
        #expect(first.stderr.contains("upload to fleet: 0 records acknowledged"))
        #expect(first.stderr.contains("895 left for it in the outbox (cannot reach"))
        #expect(first.stderr.contains("they go with the next run"))
        let status = try keeptrack(["outbox", "status", "--data-dir", dir])
        #expect(status.stdout.contains("895 pending"))
        #expect(status.stdout.contains("target fleet (http://127.0.0.1:\(closed.number)/v1/locations): 895 pending"))
        #expect(status.stdout.contains("target local (embedded): 0 pending"))

        let (server, url) = try serve(dir + "/fleet.sqlite")
        defer { server.terminate() }
        let second = try await offThePool { try replay(url + "/v1/locations") }
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("upload to local: 895 records acknowledged"), "\(second.stderr)")
        #expect(second.stderr.contains("upload to fleet: 1,790 records acknowledged"))
        #expect(!second.stderr.contains("left for it in the outbox ("))
        let after = try keeptrack(["outbox", "status", "--data-dir", dir])
        #expect(after.stdout.contains(": device ") && after.stdout.contains(", 0 pending"))
        closed.release()
    }

    /// Each target files the records under its own `--device-id`, whatever its format: two JSON
    /// targets (the second's records kept the first's ids, `x1:1` in a batch of x2, and were each
    /// refused into a dead letter) and an OsmAnd one (it sent the first's id), all to one serve.
    @Test func eachTargetFilesTheRecordsUnderItsOwnDeviceID() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (server, url) = try serve(dir + "/fleet.sqlite")
        defer { server.terminate() }
        let r = try await offThePool {
            try keeptrack([
                "replay", "--upload", url + "/v1/locations", "--upload", url + "/v1/locations", "--upload", url + "/",
                "--format", "json", "--format", "json", "--format", "osmand", "--target-name", "a", "--target-name",
                "b",
                "--target-name", "c", "--device-id", "x1", "--device-id", "x2", "--device-id", "o1",
                "--token", "t0ken", "--max-backoff", "0.01", "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        #expect(r.status == 0, "\(r.stderr)")
        for target in ["a", "b", "c"] {
            #expect(r.stderr.contains("upload to \(target): 895 records acknowledged"), "\(r.stderr)")
        }
        #expect(!r.stderr.contains("dead letter"), "\(r.stderr)")
        server.terminate()
        server.drain()
        let store = try SQLiteTrackStore(path: dir + "/fleet.sqlite")
        #expect(try await store.devices().map(\.id) == ["o1", "x1", "x2"])
        for device in ["o1", "x1", "x2"] { #expect(try await store.device(device)?.points == 895, "\(device)") }
        await store.close()
    }

    /// A target the run leaves out is named at the start, with what it lacked.
    @Test func aRunWithoutATargetSaysWhatItLacked() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let closed = try ReservedPort()
        let url = "http://127.0.0.1:\(closed.number)/v1/locations"
        let first = try keeptrack([
            "replay", "--upload", "embedded", "--upload", url, "--max-backoff", "0.01",
            "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
        #expect(first.status == 0)
        let second = try keeptrack(["replay", "--upload", "embedded", "--data-dir", dir, "fixtures/walk-15min.nmea"])
        #expect(second.status == 0)
        #expect(
            second.stderr.contains(
                "895 records in the outbox were not delivered to 127.0.0.1:\(closed.number)"
                    + "/v1/locations, which this run does not upload to"), "\(second.stderr)")
        #expect(second.stderr.contains("upload: 895 records acknowledged"))
        #expect(second.stderr.contains("0 left in the outbox"))
        let status = try keeptrack(["outbox", "status", "--data-dir", dir])
        #expect(status.stdout.contains("orphaned: not in the last run"))
        let forget = try keeptrack([
            "outbox", "forget-target", "127.0.0.1:\(closed.number)/v1/locations",
            "--data-dir", dir,
        ])
        #expect(forget.status == 0 && forget.stdout.contains("forgot target"))
        closed.release()
    }

    /// `keeptrack status` of a tracker with two targets, one of them (`keeptrack serve --faults`)
    /// rejecting records: a line per target, the dead letters against the one that rejected them.
    @Test func statusShowsEachTargetsUploadsAndDeadLetters() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (server, url) = try serve(dir + "/fleet.sqlite", ["--faults"])
        defer { server.terminate() }
        // The next two requests are refused with 422: the first batch (two records) and, bisected,
        // its first record, which becomes a dead letter; the second record is stored.
        let (put, answer) = try run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sys, urllib.request
                r = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="PUT",
                    headers={"Authorization": "Bearer t0ken", "Content-Type": "application/json"})
                print(urllib.request.urlopen(r, timeout=60).status)
                """,
                url + "/v1/faults", #"{"failNext":2,"failStatus":422}"#,
            ])
        #expect(put == 0 && answer == "200\n", "\(answer)")
        let receiver = try Tool(
            "tools/fake-receiver.py",
            ["fixtures/walk-15min.nmea", "--now", "--baud", "38400", "--rate", "4", "--link", dir + "/ttyGPS"])
        receiver.guardAgainstHang(seconds: 240)
        defer { receiver.terminate() }
        _ = receiver.readLine()
        let control = dir + "/control.sock"
        let track = try Tool(
            executable: URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", "exec \"$0\" \"$@\" >/dev/null",
                productsDirectory.appendingPathComponent("keeptrack").path, "track", "--serial", dir + "/ttyGPS",
                "--baud", "38400", "--upload", "embedded", "--upload", url + "/v1/locations", "--target-name", "local",
                "--target-name", "fleet", "--token", "t0ken", "--batch-size", "2", "--batch-wait", "1",
                "--data-dir", dir, "--control", control,
            ])
        track.guardAgainstHang(seconds: 240)
        defer { track.terminate() }
        @Sendable func figure(_ line: Substring?, before words: String) -> Int {
            guard let line, let end = line.range(of: " " + words) else { return -1 }
            return Int(line[..<end.lowerBound].split(separator: " ").last?.filter(\.isNumber) ?? "") ?? -1
        }
        let (status, fleet, local) = try await offThePool { () throws -> (String, Substring?, Substring?) in
            var (status, fleet, local): (String, Substring?, Substring?) = ("", nil, nil)
            for _ in 0..<2400 {
                status = (try? keeptrack(["status", "--control", control]).stdout) ?? ""
                let lines = status.split(separator: "\n")
                fleet = lines.first { $0.hasPrefix("uploads to fleet: ") }
                local = lines.first { $0.hasPrefix("uploads to local: ") }
                if figure(fleet, before: "dead letter") > 0 && figure(fleet, before: "record") > 0
                    && figure(local, before: "record") > 0
                {
                    break
                }
                usleep(50_000)  // polling the tracker's counters until both targets have stored records
            }
            return (status, fleet, local)
        }
        #expect(!status.contains("\nuploads: "), "\(status)")
        // One or two dead letters: two if the first batch left with a single record.
        #expect((1...2).contains(figure(fleet, before: "dead letter")), "\(status)")
        #expect(fleet?.contains(#/ requests?, /#) == true && fleet?.contains(" failed, ") == true, "\(status)")
        #expect(fleet?.hasSuffix(" s ago") == true, "\(status)")
        #expect(figure(local, before: "dead letter") == 0, "\(status)")
        #expect(figure(local, before: "record") > 0, "\(status)")
        #expect(local?.hasSuffix(" s ago") == true, "\(status)")
    }

    /// `keeptrack status` reads the uploads' figures by name and labels, in any order: one line when
    /// the counters have no `target` label (a single target, as before), one per target by name when
    /// they have (escapes undone); a series cut short is skipped.
    @Test func statusReadsTheUploadFiguresOfEachTargetLabel() {
        let single = """
            # TYPE keeptrack_upload_records_total counter
            keeptrack_upload_records_total{result="ok"} 28
            keeptrack_upload_records_total{result="dead_letter"} 0
            keeptrack_upload_requests_total{result="ok"} 3
            keeptrack_upload_requests_total{result="retried"} 0
            keeptrack_last_upload_timestamp_seconds 0
            """
        // The last success's gauge is 0 until there is one: never, not 56 years ago.
        #expect(
            TrackerStatus.uploadLines(single) == [
                "uploads: 28 records in 3 requests, 0 failed, 0 dead letters; last success never"
            ])
        let several = """
            keeptrack_upload_records_total{target="b \\"x\\"",result="ok"} 1500
            keeptrack_upload_records_total{result="dead_letter",target="a"} 2
            keeptrack_upload_requests_total{result="retried",target="a"} 4
            keeptrack_upload_records_total{result="ok",target="cut 9
            """
        #expect(
            TrackerStatus.uploadLines(several) == [
                "uploads to a: 0 records in 4 requests, 4 failed, 2 dead letters; last success never",
                "uploads to b \"x\": 1,500 records in 0 requests, 0 failed, 0 dead letters; last success never",
            ])
    }

    /// `ctl status` adds a line while the input is lost (it said nothing of it, only a growing age
    /// of the last fix), and none once it is back.
    @Test func statusSaysWhileTheInputIsLost() {
        let base =
            #"{"state":"active","policy":"ios7","modes":[],"backgroundTimeRemaining":null,"tasks":[],"#
            + #""lastFixAge":5.678,"locationUpdates":true,"inputLost":"#
        let lost = TrackerStatus.describe(base + #""/dev/ttyACM0 is not there (receiver unplugged?)"}"#)
        #expect(lost.hasSuffix("location updates: on\ninput lost: /dev/ttyACM0 is not there (receiver unplugged?)"))
        #expect(!TrackerStatus.describe(base + "null}").contains("input lost"))
    }

    /// The pairing rules: one value for all, one per --upload in order, anything else named.
    @Test(arguments: [
        (
            [
                "--upload", "embedded", "--upload", "http://a.example/", "--format", "json", "--format", "osmand",
                "--format", "owntracks",
            ],
            "--format is given 3 times for 2 --upload targets: give it once (for every target) or once per --upload"
        ),
        (
            ["--upload", "http://a.example/", "--token", "x", "--token", "y"],
            "--token is given 2 times for 1 --upload target"
        ),
        (
            [
                "--upload", "http://a.example/", "--upload", "http://b.example/", "--user", "a", "--user", "b",
                "--user", "c",
            ], "--user is given 3 times for 2 --upload targets"
        ),
        (
            ["--upload", "http://a.example/x", "--upload", "http://a.example/x?k=1"],
            "two --upload targets are named 'a.example/x': give each a --target-name."
        ),
        (["--upload", "embedded", "--upload", "embedded"], "--upload embedded is given twice"),
        (
            ["--upload", "embedded", "--upload", "mqtt://h", "--format", "json", "--format", "osmand"],
            "--upload mqtt://h: --upload mqtt(s):// publishes OwnTracks JSON or Home Assistant's discovery: --format osmand "
                + "does not apply."
        ),
        (["--upload", "embedded", "--target-header", "3:X-A: b"], "--target-header takes 'N:Name: value'"),
        (
            [
                "--upload", "embedded", "--upload", "http://a.example/", "--secret-file", "/nonexistent",
                "--secret-file",
                "",
            ], "--secret-file encrypts OwnTracks payloads"
        ),
    ])
    func pairingProblemsAreNamed(options: [String], message: String) throws {
        let r = try keeptrack(["replay"] + options + ["fixtures/walk-15min.nmea"])
        #expect(r.status == 64)
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }
}

@Suite("tools/crash-test.py --two-targets: each target holds everything once", .offThePool)
struct TwoTargetsCrashTestTests {
    /// A few SIGKILLs of the uploader while the second endpoint is killed and restarted: both hold
    /// every printed location exactly once (`tools/crash-test.py --two-targets --kills 100` is the long
    /// version).
    @Test func killsOfTheUploaderAndOfOneTargetLoseNothingForEither() async throws {
        let tool = try Tool(
            "tools/crash-test.py",
            [
                "--two-targets", "--kills", "4", "--seed", "11", "--speed", "120",
                "--keeptrack", productsDirectory.appendingPathComponent("keeptrack").path,
            ])
        tool.guardAgainstHang(seconds: 600)
        let lines = try await tool.remainingLines()
        #expect(
            lines.last == "OK: both targets hold every printed location exactly once, nothing lost, order kept",
            "\(lines) \(tool.errors())")
    }
}
