import Foundation
import GPSInput
import KeepTrackTesting
import Testing
import TrackServer
import TrackStore
import Tracking

@testable import keeptrack

/// `--help` of every command and subcommand, as a user reads it on an 80-column terminal.
@Suite("keeptrack --help", .offThePool)
struct HelpCommandTests {
    /// A command as `--experimental-dump-help` describes it, with the words that lead to it.
    struct Command {
        var path: [String]
        var json: [String: Any]
    }

    /// Every command and subcommand of keeptrack.
    func commands() throws -> [Command] {
        let dump = try keeptrack(["--experimental-dump-help"])
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var out: [Command] = []
        func walk(_ json: [String: Any], _ path: [String]) {
            out.append(Command(path: path, json: json))
            for sub in (json["subcommands"] as? [[String: Any]]) ?? [] where sub["commandName"] as? String != "help" {
                walk(sub, path + [sub["commandName"] as? String ?? "?"])
            }
        }
        walk(try #require(root["command"] as? [String: Any]), [])
        return out
    }

    @Test func everyCommandHasHelpWithSubcommandsForItsVerbs() throws {
        let paths = try commands().map { $0.path.joined(separator: " ") }
        for verbs in [
            ["outbox status", "outbox send", "outbox dead-letters", "outbox retry", "outbox purge"],
            ["serve devices add", "serve devices list", "serve devices revoke"],
        ] {
            for path in verbs { #expect(paths.contains(path), "no subcommand '\(path)' in \(paths)") }
        }
        for path in try commands().map(\.path) {
            let r = try keeptrack(path + ["--help"], environment: ["COLUMNS": "80"])
            #expect(r.status == 0, "keeptrack \(path.joined(separator: " ")) --help: \(r.stderr)")
            #expect(r.stdout.contains("USAGE:"))
        }
    }

    /// An example wider than the terminal wraps in the middle of its command or comment.
    @Test func examplesFitEightyColumns() throws {
        for command in try commands() {
            let discussion = command.json["discussion"] as? String ?? ""
            for line in discussion.split(separator: "\n") where line.hasPrefix("  ") {
                let name = command.path.joined(separator: " ")
                #expect(line.count <= 80, "keeptrack \(name) --help: \(line.count) columns: \(line)")
            }
        }
    }

    /// argument-parser adds "(default: ...)" by itself: a help text that states it too says it twice.
    @Test func noOptionStatesItsDefaultTwice() throws {
        for command in try commands() {
            for argument in (command.json["arguments"] as? [[String: Any]]) ?? [] {
                guard let shown = argument["defaultValue"] as? String else { continue }
                let abstract = argument["abstract"] as? String ?? ""
                #expect(
                    !abstract.lowercased().contains("default"),
                    "keeptrack \(command.path.joined(separator: " ")): '\(abstract)' and (default: \(shown))")
            }
        }
    }
}

/// The libraries say what is wrong by field; the command line says it naming the flag, in the
/// sentences it always used.
@Suite("Problems said with their flags", .offThePool)
struct ProblemSentenceTests {
    @Test(arguments: [
        (["--distance-filter=-1"], "--distance-filter must be 0 or more metres."),
        (["--dwell", "5"], "--dwell applies to regions: add --regions FILE.geojson."),
        (["--heading-change", "200"], "--heading-change takes 1 to 180 degrees, got 200.0."),
        (["--time-interval", "0"], "--time-interval must be more than 0."),
        (
            ["--stationary-radius", "40"],
            "--stationary-radius and --stationary-timeout go with --pause-when-stationary."
        ),
        (
            ["--significant-change-distance", "9"],
            "--significant-change-distance and --significant-change-interval go with --significant-changes."
        ),
        (["--upload", "embedded", "--batch-size", "0"], "--batch-size must be 1 or more."),
        (
            ["--upload", "embedded", "--outbox-max-records", "0"],
            "--outbox-max-records and --outbox-max-age must be positive."
        ),
        (["--upload", "ftp://x"], "--upload takes an http(s):// or mqtt(s):// URL, or 'embedded', got 'ftp://x'."),
        (["--upload", "embedded", "--format", "gpx"], "--format takes"),
        (["--user", "anna"], "--device-id, --token, --ca-file, --header and --user go with --upload URL."),
        (["--upload", "mqtt://h", "--ca-file", "ca.pem"], "--ca-file goes with mqtts:// (TLS), not mqtt://"),
        (["--upload", "mqtt://h:0"], "--upload: the port '0' of the mqtt:// URL"),
        (["--policy", "ios5"], "--policy must be ios6, ios7 or ios13, got 'ios5'."),
    ])
    func trackSaysTheFlag(arguments: [String], sentence: String) {
        #expect { _ = try Track.parse(["--gpsd", "h"] + arguments) } throws: { error in
            Track.message(for: error).hasPrefix(sentence)
        }
    }

    @Test(arguments: [
        (["--port", "70000"], "--port must be between 0 and 65535."),
        (["--max-body", "10"], "--max-body must be at least 1024 bytes."),
        (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together."),
        (["--max-connections", "0"], "--max-connections must be at least 1."),
        (["--first-request-timeout", "0"], "--first-request-timeout must be between 0 and 86400 seconds (not 0)."),
        (["--fail-rate", "0.5"], "The fault options need --faults (fault injection is off without it)."),
        (["--retention", "60"], "--retention must be at least 1h (a bare number is seconds: write 90d for 90 days)."),
        (["--homeassistant", "http://ha.lan"], "--homeassistant: the broker URL must start with mqtt:// or mqtts://."),
        (
            ["--homeassistant", "mqtt://broker.lan", "--homeassistant-ca-file", "ca.pem"],
            "--homeassistant: a CA file goes with mqtts:// (TLS), not mqtt://."
        ),
        (["--homeassistant-ca-file", "ca.pem"], "--homeassistant-ca-file goes with --homeassistant."),
    ])
    func serveSaysTheFlag(arguments: [String], sentence: String) {
        #expect { _ = try Serve.parse(arguments) } throws: { error in Serve.message(for: error) == sentence }
    }
}

/// The progress lines the command line draws from what the libraries count.
@Suite("Progress lines said", .offThePool)
struct ProgressWordsTests {
    @Test func aRunSaysItsInputThenTheUploadOfWhatIsLeft() {
        let input: (Double) -> String = { "\(Int($0)) s read" }
        #expect(RunProgress.input(elapsed: 3, outboxWaiting: 46_276).line(input: input) == "3 s read  outbox 46,276")
        #expect(RunProgress.input(elapsed: 3, outboxWaiting: nil).line(input: input) == "3 s read")
        var reading = BacklogProgress().reading(sent: 0, waiting: 10_000, now: 100)!
        #expect(RunProgress.upload(reading).line(input: input) == "uploading: 0 of 10,000 sent")
        (reading.sent, reading.rate, reading.secondsLeft) = (2_000, 1_000, 8)
        #expect(RunProgress.upload(reading).line(input: input) == "uploading: 2,000 of 10,000 sent  1,000/s  ETA 8 s")
    }

    @Test func aReplaySaysItsShareFixesRateAndTimeLeft() {
        var p = NMEALogSource.Progress()
        (p.fixes, p.position, p.size) = (400, 250, 1_000)
        #expect(p.line(elapsed: 2) == "25%  400 fixes  200 fixes/s  ETA 6 s")
        p.size = nil
        #expect(p.line(elapsed: 2) == "400 fixes, 200 fixes/s")
    }

    @Test func serveSaysTheSchemaUpgradeOfItsStore() {
        let upgrade = SQLiteTrackStore.Upgrade(
            path: "/d/endpoint.sqlite", migrations: ["v4-credentials", "v5-fleet"],
            points: 3_000, seconds: 2)
        #expect(
            upgrade.line == "/d/endpoint.sqlite: upgrading the schema (v4-credentials, v5-fleet) for 3,000 points, 2 s")
    }

    @Test func decodeSaysItsShareSpeedAndTimeLeft() {
        let p = LogDecoding.Progress(fraction: 0.466, megabytesPerSecond: 210.7, secondsLeft: 3)
        #expect(p.line == "decoding 46%  210 MB/s  ETA 3 s")
    }

    @Test func anExportSaysItsShareOfRecordsRead() {
        #expect(Export.progress(1_000, of: 2_500) == "exporting: 40%  1,000 of 2,500 records read")
    }
}
