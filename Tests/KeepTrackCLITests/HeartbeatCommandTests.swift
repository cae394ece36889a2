import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `keeptrack replay --heartbeat` end to end: the night log's long stops, on the log's clock, into
/// the embedded endpoint.
@Suite("keeptrack replay --heartbeat", .offThePool)
struct HeartbeatCommandTests {
    @Test func theNightsStopsBeatEveryMinuteAndTheBeatsReachTheEmbeddedEndpoint() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try keeptrack([
            "replay", "--heartbeat", "60s", "--distance-filter", "50", "--upload", "embedded",
            "--data-dir", dir, "fixtures/visits-night.nmea.gz",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        var lastLocation: [String: Any]?
        var lastTime = -Double.infinity
        var beats: [String] = []
        var late: [Double] = []
        for line in r.stdout.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let time = (object["time"] as? String).map(VisitsCommandTests.seconds)
            switch object["event"] as? String {
            case "location":
                (lastLocation, lastTime) = (object, try #require(time))
            case "heartbeat":
                // The last location's fields at the time then: a minute after the last record.
                let location = try #require(lastLocation)
                for key in ["lat", "lon", "hAcc"] {
                    #expect(object[key] as? Double == location[key] as? Double, "\(key)")
                }
                let t = try #require(time)
                #expect(t - lastTime >= 60, "\(line)")
                if t - lastTime >= 61 { late.append(t - lastTime) }
                lastTime = t
                beats.append(try #require(object["time"] as? String))
            default:
                break
            }
        }
        // To the fix (one a second), except the first fix after the log's 30-minute dropout at home:
        // one heartbeat then, not a burst.
        #expect(late.count == 1 && late[0] > 1800, "\(late)")
        // Five hours of stops: hundreds of beats.
        #expect(beats.count > 200, "\(beats.count) heartbeats")
        #expect(r.stderr.contains("\(beats.count) heartbeats stored for device"), "\(r.stderr)")

        // The endpoint's trail holds every heartbeat, at its time.
        let trails = try FileManager.default.contentsOfDirectory(atPath: dir + "/trails")
        let geo = try Data(contentsOf: URL(fileURLWithPath: dir + "/trails/" + trails[0]))
        let json = try #require(try JSONSerialization.jsonObject(with: geo) as? [String: Any])
        let features = try #require(json["features"] as? [[String: Any]])
        let stored = features.compactMap { $0["properties"] as? [String: Any] }
            .filter { $0["event"] as? String == "heartbeat" }.compactMap { $0["time"] as? String }
        #expect(stored == beats)
    }

    @Test func withoutTheOptionNothingBeatsAndAZeroIntervalIsRefused() throws {
        let r = try keeptrack(["replay", "--distance-filter", "50", "fixtures/walk-15min.nmea"])
        #expect(r.status == 0)
        #expect(!r.stdout.contains("\"heartbeat\""))
        let zero = try keeptrack(["replay", "--heartbeat", "0", "fixtures/walk-15min.nmea"])
        #expect(zero.status == 64)
        #expect(zero.stderr.contains("--heartbeat must be more than 0s."), "\(zero.stderr)")
        let help = try keeptrack(["replay", "--help"])
        #expect(help.stdout.contains("--heartbeat <duration>"))
    }

    @Test func theConfigFileTakesAHeartbeatAndNamesTheLineOfABadOne() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "gpsd: localhost:2947\nheartbeat: 90s\n".write(toFile: dir + "/ok.yaml", atomically: true, encoding: .utf8)
        try "gpsd: localhost:2947\nheartbeat: 0\n".write(toFile: dir + "/bad.yaml", atomically: true, encoding: .utf8)
        let ok = try keeptrack(["config", "check", dir + "/ok.yaml"])
        #expect(ok.status == 0 && ok.stdout.contains("heartbeat"), "\(ok.stdout)\(ok.stderr)")
        let bad = try keeptrack(["config", "check", dir + "/bad.yaml"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("bad.yaml:2: heartbeat: --heartbeat must be more than 0s."), "\(bad.stderr)")
    }
}
