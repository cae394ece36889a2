import Foundation
import KeepTrackTesting
import Testing

@testable import keeptrack

#if canImport(Glibc)
    import Glibc
#endif

/// A real HTTP endpoint on 127.0.0.1 that speaks our JSON batch and does not deduplicate: it counts
/// every record id it is sent, so a record sent twice shows. It says on standard output `listening
/// PORT`, then one JSON object a request, before answering it: `{"stored":N,...}` with what it got so
/// far (`requests`, distinct `ids`, the `max` times one id was sent). With `hold` it holds that
/// request (1 for the first) without storing or answering it, says `{"holding":true,...}`, and lets
/// it go once its client is gone (a SIGKILLed uploader's connection closes).
final class CountingEndpoint: @unchecked Sendable {
    static let script = """
        import gzip, json, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        hold = int(sys.argv[1])
        lock = threading.Lock()
        seen = {}
        state = {"requests": 0}
        def say(event):
            event.update(requests=state["requests"], ids=len(seen), max=max(seen.values(), default=0))
            print(json.dumps(event), flush=True)
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args):
                pass
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with lock:
                    state["requests"] += 1
                    held = state["requests"] == hold
                    if held:
                        say({"holding": True})
                if held:
                    while self.connection.recv(4096):
                        pass
                    self.close_connection = True
                    return
                ids = [r["id"] for r in json.loads(body)["records"]]
                with lock:
                    for i in ids:
                        seen[i] = seen.get(i, 0) + 1
                    say({"stored": len(ids)})
                answer = json.dumps({"accepted": len(ids), "duplicates": 0}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        print(f"listening {server.server_address[1]}", flush=True)
        server.serve_forever()
        """

    /// What it said about a request.
    struct Event: Decodable, Hashable {
        var stored: Int?
        var holding: Bool?
        var requests: Int
        var ids: Int
        var max: Int
    }

    let tool: Tool
    let url: String

    init(hold: Int = 0) throws {
        tool = try Tool(executable: URL(fileURLWithPath: "/usr/bin/python3"), ["-c", Self.script, "\(hold)"])
        tool.guardAgainstHang(seconds: 240)
        let line = try #require(tool.readLine(), "\(tool.errors())")
        let port = try #require(line.hasPrefix("listening ") ? line.split(separator: " ").last : nil, "\(line)")
        url = "http://127.0.0.1:\(port)/v1/locations"
    }

    /// The host and port of its URL.
    var host: String { String(url.dropFirst("http://".count).prefix { $0 != "/" }) }

    /// What it says about the next request (blocking: call off the cooperative pool), or nil if it
    /// ended.
    func next() throws -> Event? {
        guard let line = tool.readLine() else { return nil }
        return try JSONDecoder().decode(Event.self, from: Data(line.utf8))
    }

    /// Stops it (every request it answered was said before its answer) and says what it got: the
    /// requests, the distinct ids, the most times one id was sent.
    func stop() throws -> (requests: Int, ids: Int, max: Int) {
        kill(tool.process.processIdentifier, SIGKILL)
        var got = (requests: 0, ids: 0, max: 0)
        while let e = try next() {
            got = (Swift.max(got.requests, e.requests), Swift.max(got.ids, e.ids), Swift.max(got.max, e.max))
        }
        return got
    }
}

/// Issue 36, item 4: `keeptrack outbox send` drains a backlog to every target now, and a batch that
/// fills while it waits goes at once. The built binary, against real endpoints on 127.0.0.1.
@Suite("keeptrack outbox send")
struct OutboxSendCommandTests {
    func temporaryDirectory() -> String {
        do { return try TemporaryDirectory("keeptrack-send").path } catch { preconditionFailure("\(error)") }
    }

    /// A replay whose target is down leaves the walk in the outbox.
    func backlog(_ dir: String, name: String = "fleet") throws -> CLIResult {
        let closed = try ReservedPort()
        defer { closed.release() }
        return try keeptrack([
            "replay", "--upload", "http://127.0.0.1:\(closed.number)/v1/locations", "--target-name", name,
            "--device-id", "van-1", "--max-backoff", "0.01", "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
    }

    /// `keeptrack serve` answers 500 to a replay, which leaves the walk in the outbox; once the
    /// endpoint is healthy, `outbox send` drains it: a line for the target, everything stored once,
    /// nothing left, exit status 0; a second `outbox send` has nothing to send.
    @Test func aBacklogLeftByARefusedTargetIsDrained() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (server, base) = try await offThePool {
            try serve(dir + "/endpoint.sqlite", ["--faults", "--fail-rate", "1", "--fail-status", "500"])
        }
        defer { server.terminate() }
        let url = base + "/v1/locations"
        let host = String(base.dropFirst("http://".count))
        let replay = try await offThePool {
            try keeptrack([
                "replay", "--upload", url, "--token", "t0ken", "--device-id", "van-1", "--max-backoff", "0.01",
                "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(replay.stderr.contains("895 left in the outbox (the endpoint answered 500"), "\(replay.stderr)")
        let (put, answer) = try await offThePool {
            try run(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import sys, urllib.request
                    r = urllib.request.Request(sys.argv[1], data=b"{}", method="PUT",
                        headers={"Authorization": "Bearer t0ken", "Content-Type": "application/json"})
                    print(urllib.request.urlopen(r, timeout=60).status)
                    """,
                    base + "/v1/faults",
                ])
        }
        #expect(put == 0 && answer == "200\n", "\(answer)")
        let send = try await offThePool {
            try keeptrack(["outbox", "send", "--upload", url, "--token", "t0ken", "--data-dir", dir])
        }
        #expect(send.status == 0, "\(send.stderr)")
        #expect(
            send.stdout
                == "upload to \(host)/v1/locations: 895 records acknowledged by \(host) in 2 requests, 0 failed, "
                + "0 dead letters; 0 left for it in the outbox\n", "\(send.stdout)")
        // Not a terminal: no progress line.
        #expect(!send.stderr.contains("\u{1B}[K"), "\(send.stderr)")
        let (got, trail) = try await offThePool {
            try run(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import json, sys, urllib.request
                    r = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer t0ken"})
                    ids = [x["id"] for x in json.load(urllib.request.urlopen(r, timeout=60))["records"]]
                    print(len(ids), len(set(ids)))
                    """,
                    base + "/v1/devices/van-1/trail?format=json&limit=10000",
                ])
        }
        #expect(got == 0 && trail == "895 895\n", "\(trail)")
        let status = try await offThePool { try keeptrack(["outbox", "status", "--data-dir", dir]) }
        #expect(status.stdout.contains(", 0 pending"), "\(status.stdout)")
        let again = try await offThePool {
            try keeptrack(["outbox", "send", "--upload", url, "--token", "t0ken", "--data-dir", dir])
        }
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains(": 0 records acknowledged by \(host) in 0 requests"), "\(again.stdout)")
    }

    /// `outbox send` SIGKILLed while the endpoint holds its second request (the first one stored
    /// and acknowledged): the next run sends the rest, the held batch included, and the endpoint,
    /// which does not deduplicate, has every record exactly once.
    @Test func aSendKilledHalfwaySendsTheRestOnceNextTime() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let left = try await offThePool { try self.backlog(dir) }
        #expect(left.stderr.contains("895 left in the outbox"), "\(left.stderr)")
        let endpoint = try await offThePool { try CountingEndpoint(hold: 2) }
        let arguments = [
            "outbox", "send", "--upload", endpoint.url, "--target-name", "fleet", "--batch-size", "100",
            "--data-dir", dir,
        ]
        let first = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"), arguments)
        first.guardAgainstHang(seconds: 240)
        let said = try await offThePool { [endpoint] in [try endpoint.next(), try endpoint.next()] }
        #expect(said.map { $0?.stored } == [100, nil] && said.last??.holding == true, "\(said) \(first.errors())")
        // Killed while its second batch is in flight: the first is acknowledged, the second is not.
        kill(first.process.processIdentifier, SIGKILL)
        try await offThePool { first.drain() }
        let status = try await offThePool { try keeptrack(["outbox", "status", "--data-dir", dir]) }
        #expect(status.stdout.contains(", 795 pending"), "\(status.stdout)")
        let second = try await offThePool { try keeptrack(arguments) }
        #expect(second.status == 0, "\(second.stderr)")
        #expect(
            second.stdout.hasPrefix(
                "upload to fleet: 795 records acknowledged by \(endpoint.host) in 8 "
                    + "requests, 0 failed, 0 dead letters; 0 left for it in the outbox"), "\(second.stdout)")
        let got = try await offThePool { try endpoint.stop() }
        // 1 stored, 1 held and let go unstored, 8 from the second run; 895 ids, none twice.
        #expect(got.requests == 10 && got.ids == 895 && got.max == 1, "\(got)")
    }

    /// One sender per outbox: while `outbox send` is sending (the endpoint holds its second request),
    /// a second `outbox send` and a replay on the same data directory are refused, naming the first's
    /// process, and send nothing; once the first is SIGKILLed, its lock goes with it and the next
    /// `outbox send` sends the rest, every record once.
    @Test func aSecondSenderOnTheSameOutboxIsRefused() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await offThePool { try self.backlog(dir) }
        let endpoint = try await offThePool { try CountingEndpoint(hold: 2) }
        let arguments = [
            "outbox", "send", "--upload", endpoint.url, "--target-name", "fleet", "--batch-size", "100",
            "--data-dir", dir,
        ]
        let first = try Tool(executable: productsDirectory.appendingPathComponent("keeptrack"), arguments)
        first.guardAgainstHang(seconds: 240)
        let said = try await offThePool { [endpoint] in [try endpoint.next(), try endpoint.next()] }
        #expect(said.last??.holding == true, "\(said) \(first.errors())")
        let pid = first.process.processIdentifier
        let busy = "Error: the outbox \(dir)/outbox.sqlite is being sent by another keeptrack (pid \(pid)): one sender"
        let second = try await offThePool { try keeptrack(arguments) }
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stderr.contains(busy), "\(second.stderr)")
        let replay = try await offThePool {
            try keeptrack([
                "replay", "--upload", endpoint.url, "--target-name", "fleet", "--data-dir", dir,
                "fixtures/walk-15min.nmea",
            ])
        }
        #expect(replay.status == 1, "\(replay.stderr)")
        #expect(replay.stderr.contains(busy), "\(replay.stderr)")
        kill(pid, SIGKILL)
        try await offThePool { first.drain() }
        let third = try await offThePool { try keeptrack(arguments) }
        #expect(third.status == 0, "\(third.stderr)")
        let got = try await offThePool { try endpoint.stop() }
        // 1 stored, 1 held, 8 from the third run: neither refused run sent a request.
        #expect(got.requests == 10 && got.ids == 895 && got.max == 1, "\(got)")
    }

    /// A target that cannot be reached: its line says why, the exit status is 1, and a sentence on
    /// standard error names it and says what to do; the records stay.
    @Test func anUnreachableTargetExitsNonZeroWithASentence() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await offThePool { try self.backlog(dir) }
        let closed = try ReservedPort()
        defer { closed.release() }
        let host = "127.0.0.1:\(closed.number)"
        let r = try await offThePool {
            try keeptrack([
                "outbox", "send", "--upload", "http://\(host)/v1/locations", "--target-name", "fleet",
                "--max-backoff", "0.01", "--data-dir", dir,
            ])
        }
        #expect(r.status == 1, "\(r.stderr)")
        #expect(
            r.stdout.hasPrefix(
                "upload to fleet: 0 records acknowledged by \(host) in 5 requests, 5 failed, 0 dead letters; "
                    + "895 left for it in the outbox (cannot reach \(host)"), "\(r.stdout)")
        #expect(
            r.stderr.contains(
                "keeptrack outbox send: 895 records not sent to fleet, which still refuses them: cannot reach \(host)"),
            "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "; giving up for now after 5 attempts. Check that \(host) is up and reachable, then run keeptrack "
                    + "outbox send again; the records stay in the outbox until then.\n"), "\(r.stderr)")
        let status = try await offThePool { try keeptrack(["outbox", "status", "--data-dir", dir]) }
        #expect(status.stdout.contains(", 895 pending"), "\(status.stdout)")
    }

    /// A target that refuses the token: the settings are named, as options to check.
    @Test func aTargetRefusingTheTokenNamesTheOption() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await offThePool { try self.backlog(dir) }
        let (server, base) = try await offThePool { try serve(dir + "/endpoint.sqlite") }
        defer { server.terminate() }
        let r = try await offThePool {
            try keeptrack([
                "outbox", "send", "--upload", base + "/v1/locations", "--target-name", "fleet", "--token", "wrong",
                "--data-dir", dir,
            ])
        }
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stdout.contains("; 895 left for it in the outbox (the endpoint refuses our credentials (401"))
        #expect(
            r.stderr.contains(
                "895 records not sent to fleet, which refuses the settings: the endpoint refuses our credentials (401"),
            "\(r.stderr)")
        #expect(
            r.stderr.contains("check the token. Check --token, then run keeptrack outbox send again"), "\(r.stderr)")
    }

    /// The targets come from `track`'s configuration file (its data directory too) when the command
    /// line gives none; without either, the error names the targets the outbox knows.
    @Test func theTargetsComeFromTheConfigurationFile() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await offThePool { try self.backlog(dir) }
        let none = try await offThePool {
            try keeptrack(["outbox", "send", "--data-dir", dir], environment: ["HOME": dir])
        }
        #expect(none.status == 64, "\(none.stderr)")
        #expect(none.stderr.contains("outbox send needs its targets: give --upload URL"), "\(none.stderr)")
        #expect(none.stderr.contains("records wait for fleet (http://127.0.0.1:"), "\(none.stderr)")
        let endpoint = try await offThePool { try CountingEndpoint() }
        let config = dir + "/config.yaml"
        try """
        gpsd: localhost:2947
        significant-changes: true
        data-dir: \(dir)
        batch-size: 300
        targets:
          - url: \(endpoint.url)
            name: fleet
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let r = try await offThePool { try keeptrack(["outbox", "send", "--config", config]) }
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("upload to fleet: 895 records acknowledged by "), "\(r.stdout)")
        #expect(r.stdout.contains(" in 3 requests, 0 failed, 0 dead letters; 0 left for it in the outbox"))
        let got = try await offThePool { try endpoint.stop() }
        #expect(got.requests == 3 && got.ids == 895 && got.max == 1, "\(got)")
    }

    /// Every key `outbox send` reads from `track`'s file is a key of that file and an option of
    /// `outbox send`.
    @Test func theConfigurationKeysItReadsAreItsOptions() throws {
        for key in OutboxCommand.Send.configKeys {
            #expect(TrackConfig.keys[key] != nil, "\(key) is no key of track's file")
            if key == "targets" { continue }
            let arguments: [String]
            switch TrackConfig.keys[key] {
            case .flag?: arguments = ["--\(key)"]
            default: arguments = ["--\(key)", key == "upload" ? "http://a.example/" : "1"]
            }
            do {
                _ = try OutboxCommand.Send.parse(
                    arguments + (key == "upload" ? [] : ["--upload", "http://a.example/"]))
            } catch {
                let message = OutboxCommand.Send.message(for: error)
                #expect(!message.contains("Unknown option"), "--\(key): \(message)")
            }
        }
    }

    /// The line a run ends with reads as the README shows it, byte for byte (the port aside): the
    /// command line words the upload's typed report.
    @Test func theRunsUploadLineReadsAsTheREADMEShowsIt() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let readme = try String(contentsOf: packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let shown = try #require(
            readme.split(separator: "\n").first { $0.hasPrefix("upload: 900 records acknowledged by ") })
        let r = try await offThePool {
            try keeptrack([
                "replay", "--upload", "embedded", "--regions", "fixtures/walk-15min.regions.geojson",
                "--data-dir", dir, "fixtures/walk-15min.nmea",
            ])
        }
        #expect(r.status == 0, "\(r.stderr)")
        let line = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("upload: ") }, "\(r.stderr)")
        let host = try #require(line.firstMatch(of: /by (127\.0\.0\.1:\d+) in/)?.output.1)
        #expect(line == shown.replacing(/127\.0\.0\.1:\d+/, with: host))
    }

    /// A batch that fills while it waits goes at once: a replay fed the walk's first half through
    /// standard input, with --batch-wait an hour, uploads its full batches while its input lasts,
    /// before the rest of the walk is written (the endpoint saying it stored 100 records is what the test
    /// waits for; without the wake-up it would come only at the input's end, an hour of batch-wait
    /// later than the hang guard).
    @Test func aReplayUploadsFullBatchesWhileItsInputLasts() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let endpoint = try await offThePool { try CountingEndpoint() }
        // The walk's first half, up to the end of a line (its lines end in CR LF).
        let walk = try fixtureBytes("walk-15min.nmea")
        let half = try #require(walk[(walk.count / 2)...].firstIndex(of: UInt8(ascii: "\n"))) + 1
        let process = Process()
        process.executableURL = productsDirectory.appendingPathComponent("keeptrack")
        process.arguments = [
            "replay", "--upload", endpoint.url, "--device-id", "van-1", "--batch-size", "100", "--batch-wait", "1h",
            "--data-dir", dir, "-",
        ]
        process.currentDirectoryURL = packageRoot
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + 240) { if process.isRunning { kill(pid, SIGKILL) } }
        // Its events are read (and dropped) as they come, so that it never waits on a full pipe.
        let events = Thread { _ = output.fileHandleForReading.readDataToEndOfFile() }
        events.start()
        let writer = input.fileHandleForWriting
        try await offThePool { writer.write(Data(walk[..<half])) }
        // The first full batch arrives while the input is still open.
        let first = try await offThePool { [endpoint] in try endpoint.next() }
        #expect(first?.stored == 100, "\(String(describing: first))")
        try await offThePool {
            writer.write(Data(walk[half...]))
            try writer.close()
        }
        try await offThePool { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        let got = try await offThePool { try endpoint.stop() }
        #expect(got.ids == 895 && got.max == 1, "\(got)")
    }
}
