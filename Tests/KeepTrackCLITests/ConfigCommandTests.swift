import ConfigFile
import Foundation
import KeepTrackTesting
import Testing

@testable import keeptrack

@Suite("keeptrack config", .offThePool)
struct ConfigCommandTests {
    func file(_ text: String) throws -> String {
        let dir = try TemporaryDirectory("keeptrack-config").path
        let path = dir + "/config.yaml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(arguments: [
        (
            "serial: /dev/ttyACM0\ndistance_filter: 10\n",
            ":2: unknown key 'distance_filter' (did you mean 'distance-filter'?)"
        ),
        (
            "serial: /dev/ttyACM0\nsignificant-changes: yes please\n",
            ":2: significant-changes: expected true or false, got 'yes please'"
        ),
        (
            "serial: /dev/ttyACM0\n\n\ndistance-filter: ten\n",
            ":4: distance-filter: The value 'ten' is invalid for '--distance-filter <metres>'"
        ),
        ("serial: [\n", ":2: not valid YAML: did not find expected node content"),
        ("serial: /dev/ttyACM0\nbaud: 1234\n", ":2: baud: --baud must be one of 4800, 9600"),
        ("- a list\n", ":1: expected keys and values (a mapping)"),
        ("serial: /dev/ttyACM0\nserial: /dev/ttyUSB0\n", ":2: 'serial' is set twice"),
        ("significant-changes: true\n", ": Choose one input"),
        ("serial: /dev/ttyACM0\nvisit-gap: 2h\n", ":2: visit-gap: --visit-gap goes with --visits."),
        (
            "serial: /dev/ttyACM0\nvisits: true\nvisit-radius: 0\n",
            ":3: visit-radius: --visit-radius must be more than 0."
        ),
        // A regions file that is not there is said by the check, not first by the service's start.
        (
            "serial: /dev/ttyACM0\nregions: /nonexistent/places.geojson\n",
            ":2: regions: --regions: cannot read /nonexistent/places.geojson: No such file or directory"
        ),
        // A negative number is the option's value, not an option ("Missing value for ...").
        ("serial: /dev/ttyACM0\ndistance-filter: -5\n", ":2: distance-filter: --distance-filter must be 0 or more"),
    ])
    func checkNamesTheKeyAndTheLine(text: String, message: String) throws {
        let path = try file(text)
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 1)
        #expect(r.stderr.contains(path + message), "\(r.stderr)")
    }

    /// The file's log-level and log-format set the logs up, as the options would: the packaged
    /// /etc/keeptrack/config.yaml asks for info and json (they were read before the file was).
    @Test func theFilesLogSettingsAreTheLogs() throws {
        let dir = try TemporaryDirectory("keeptrack-log-config").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try file(
            """
            serial: \(dir)/nothing-there
            log-level: info
            log-format: json
            data-dir: \(dir)
            control: \(dir)/control.sock
            """)
        let track = try Tool(
            executable: URL(fileURLWithPath: "/bin/sh"),
            [
                "-c", "exec \"$0\" track --config \"$1\" 2>&1 >/dev/null",
                productsDirectory.appendingPathComponent("keeptrack").path, path,
            ])
        track.guardAgainstHang(seconds: 60)
        defer { track.terminate() }
        let first = try #require(track.readLine())
        let object = try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any]
        #expect(object?["level"] as? String == "info" && object?["message"] as? String == "tracker started", "\(first)")
        // `--log-level=warning` (the "=" form) on the command line wins over the file's.
        #expect(LoggingOptions.scan(["track", "--log-level", "info", "--log-level=warning"]).0 == .warning)
        #expect(LoggingOptions.scan(["track", "--log-format=json"]).1 == .json)
    }

    @Test func aGoodFileChecksOut() throws {
        let path = try file(
            """
            gpsd:                    # localhost:2947
            significant-changes: true
            background: false
            upload: embedded
            header:
              - "X-Team: blue"
              - "X-Van: 7"
            shutdown-timeout: 20
            """)
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 0)
        #expect(
            r.stdout
                == "\(path): ok, 6 settings: gpsd, significant-changes, background, upload, header, shutdown-timeout\n")
    }

    @Test func visitKeysCheckOut() throws {
        let path = try file(
            "serial: /dev/ttyACM0\nvisits: true\nvisit-min-duration: 5m\nvisit-radius: 40\nvisit-gap: 2h\n")
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "\(path): ok, 5 settings: serial, visits, visit-min-duration, visit-radius, visit-gap\n")
    }

    @Test func theCommandLineWinsOverTheFile() throws {
        let path = try file("serial: /dev/ttyACM0\nbaud: 4800\n")
        let r = try keeptrack(["track", "--config", path, "--baud", "1234"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("got '1234'"))
        let broken = try file("serial: /dev/ttyACM0\nbaud_rate: 4800\n")
        let b = try keeptrack(["track", "--config", broken])
        #expect(b.status == 64)
        #expect(b.stderr.contains("\(broken):2: unknown key 'baud_rate'"))
    }

    /// A bad value in the file is said at the command's start with the file, line and key, as
    /// `config check` says it, not as if it were an option of the command line; a value the
    /// command line replaces is not read at all.
    @Test func aBadValueInTheFileIsSaidWithItsLineAtTheStart() throws {
        let path = try file("distance-filter: 5\n\nheartbeat: abc\n")
        let r = try keeptrack(["track", "--config", path, "--gpsd", "127.0.0.1:1"])
        #expect(r.status == 64)
        #expect(
            r.stderr.hasPrefix("keeptrack: \(path):3: heartbeat: The value 'abc' is invalid for '--heartbeat")
                && r.stderr.contains("(keeptrack config check \(path))"), "\(r.stderr)")
        let replaced = try keeptrack(["track", "--config", path, "--gpsd", "127.0.0.1:1", "--heartbeat", "5x"])
        #expect(replaced.status == 64)
        #expect(replaced.stderr.contains("'5x'") && !replaced.stderr.contains("'abc'"), "\(replaced.stderr)")
        // A problem of the command line's own is said as before, with its usage.
        let own = try keeptrack(["track", "--config", path, "--gpsd", "127.0.0.1:1", "--baud", "12"])
        #expect(own.status == 64)
        #expect(!own.stderr.contains("\(path):") && own.stderr.contains("Usage: keeptrack track"), "\(own.stderr)")
        // `outbox send` reads the file's upload keys, `serve` its own file: the same.
        let upload = try file("upload: http://127.0.0.1:1/v1/locations\nbatch-wait: 5x\n")
        let send = try keeptrack(["outbox", "send", "--config", upload, "--data-dir", "/nonexistent"])
        #expect(send.stderr.hasPrefix("keeptrack: \(upload):2: batch-wait: "), "\(send.stderr)")
        let serveFile = try file("host: 127.0.0.1\nport: abc\n")
        let serve = try keeptrack(["serve", "--config", serveFile])
        #expect(serve.status == 64)
        #expect(serve.stderr.hasPrefix("keeptrack: \(serveFile):2: port: The value 'abc'"), "\(serve.stderr)")
    }

    /// A 358-byte "billion laughs" whose aliases are used as keys: refused before anything
    /// expands (it ran for minutes).
    @Test func refusesAnAliasBombUsedAsKeysAndSaysWhy() throws {
        let bomb =
            ["# billion laughs, keys: *h", #"a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]"#]
            + zip("bcdefgh", "abcdefg").map {
                "\($0): &\($0) [" + Array(repeating: "*\($1)", count: 9).joined(separator: ",") + "]"
            }
            + ["? *h", ": x", "? [*h, *h]", ": y", ""]
        let text = bomb.joined(separator: "\n")
        #expect(text.utf8.count == 358)
        let path = try file(text)
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 1)
        #expect(
            r.stderr == "keeptrack config check: \(path):7: the document stands for more than 100000 values once "
                + "its aliases (*name) are expanded: refused (an alias bomb?)\n")
    }

    @Test func saysRandomBinaryIsNotYAMLNamingTheByteAndLine() throws {
        var state: UInt64 = 7
        let bytes = (0..<4096).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        let dir = try TemporaryDirectory("keeptrack-config").path
        let path = dir + "/random.bin"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 1)
        let offset = try #require(
            bytes.firstIndex { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D) || $0 >= 0x7F })
        let line = bytes[..<offset].filter { $0 == 0x0A }.count + 1
        #expect(
            r.stderr.hasPrefix("keeptrack config check: \(path):\(line): not YAML (a binary file?): byte 0x"),
            "\(r.stderr)")
        #expect(r.stderr.contains(" at byte \(offset) is not text"), "\(r.stderr)")
        #expect(!r.stderr.contains("set twice"))
    }

    /// 20,000 `header:` items took 45 s: argument-parser is quadratic in the argument count. They
    /// are checked in slices now, a number of parses proportional to the items.
    @Test func checksTwentyThousandHeadersInLinearlyManyParses() throws {
        let items = (0..<20_000).map { "  - \"X-Item-\($0): \($0)\"" }.joined(separator: "\n")
        let path = try file("upload: embedded\nserial: /dev/ttyACM0\nheader:\n" + items + "\n")
        var parses = 0
        let entries = try TrackConfig.check(path, parses: &parses)
        #expect(entries.map(\.key) == ["upload", "serial", "header"])
        #expect(entries.last?.items.count == 20_000)
        #expect(parses == (20_000 + ConfigReader.sliceSize - 1) / ConfigReader.sliceSize)
    }

    @Test func namesTheLineOfABadItemInALongList() throws {
        var items = (0..<1_000).map { "  - \"X-Item-\($0): \($0)\"" }
        items[990] = "  - \"no colon here\""
        let path = try file("upload: embedded\nserial: /dev/ttyACM0\nheader:\n" + items.joined(separator: "\n") + "\n")
        let r = try keeptrack(["config", "check", path])
        #expect(r.status == 1)
        #expect(
            r.stderr.contains("\(path):994: header: --header takes 'Name: value', got 'no colon here'"), "\(r.stderr)")
    }

    /// Every long option of `track` can be set in the file, and the file knows no other key.
    @Test func everyTrackOptionIsAConfigKey() throws {
        let help = try keeptrack(["track", "--experimental-dump-help"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(help.stdout.utf8)) as? [String: Any])
        let command = try #require(json["command"] as? [String: Any])
        let arguments = try #require(command["arguments"] as? [[String: Any]])
        var options: Set<String> = []
        for a in arguments {
            for n in (a["names"] as? [[String: Any]]) ?? [] where n["kind"] as? String == "long" {
                options.insert(n["name"] as! String)
            }
        }
        options.subtract(["help", "config", "version"])
        options.insert("targets")  // a list of upload targets (issue 29): --upload and its options, paired
        // Each key, set alone, parses (values are placeholders the parser accepts).
        let keys = try keeptrack(["config", "check", "--list-keys"]).stdout.split(separator: "\n").map(String.init)
        #expect(Set(keys) == options)
    }
}

@Suite("Logs", .offThePool)
struct LoggingTests {
    /// With JSON logs every line on standard error is a JSON object: the command's summary (a
    /// notice), its failure and a usage error (errors) too, for a collector that reads every line.
    @Test func withJSONLogsEveryLineOnStandardErrorIsJSON() throws {
        func records(_ stderr: String) throws -> [[String: Any]] {
            try stderr.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)")
            }
        }
        let ok = try keeptrack(["replay", "--distance-filter", "5", "--log-format", "json", "fixtures/walk-15min.nmea"])
        #expect(ok.status == 0)
        let summary = try records(ok.stderr)
        #expect(
            summary.contains {
                $0["level"] as? String == "notice" && ($0["message"] as? String)?.contains("895 fixes") == true
            }, "\(ok.stderr)")
        let missing = try keeptrack(["replay", "--distance-filter", "5", "--log-format", "json", "nope.nmea"])
        #expect(missing.status == 1)
        #expect(
            try records(missing.stderr).contains {
                $0["level"] as? String == "error" && ($0["message"] as? String)?.contains("cannot open") == true
            })
        let usage = try keeptrack(["replay", "--log-format", "json", "--distance-filter", "ten", "x.nmea"])
        #expect(usage.status == 64)
        let refused = try records(usage.stderr)
        #expect(refused.count == 1 && (refused.first?["message"] as? String)?.contains("'ten'") == true)
        // Text logs are as before.
        #expect(try keeptrack(["replay", "--distance-filter", "ten", "x.nmea"]).stderr.hasPrefix("Error: "))
    }

    @Test func jsonLogsKeepCoordinatesOutAboveDebug() throws {
        let r = try keeptrack([
            "replay", "--significant-changes", "--log-level", "info", "--log-format", "json", "--quiet",
            "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0)
        let logs = r.stderr.split(separator: "\n").filter { $0.hasPrefix("{") }
        #expect(!logs.isEmpty)
        var significantChanges = 0
        for line in logs {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(o["level"] as? String == "info")
            // The line's own time left out: "10:23:48.133Z" holds "48.13".
            let logged = line.replacing(#/"time":"[^"]*"/#, with: "")
            #expect(!logged.contains("48.13") && !logged.contains("11.57"), "a coordinate in \(line)")
            if o["message"] as? String == "significant change" {
                significantChanges += 1
                #expect((o["metadata"] as? [String: String])?["lat"] == "<redacted>")
            }
        }
        #expect(significantChanges > 0)
        let debug = try keeptrack([
            "replay", "--significant-changes", "--log-level", "debug", "--quiet",
            "fixtures/walk-15min.nmea",
        ])
        #expect(debug.stderr.contains("lat=48.13736633"))
        let quiet = try keeptrack(["replay", "--significant-changes", "--quiet", "fixtures/walk-15min.nmea"])
        #expect(quiet.stderr.isEmpty)
    }
}
