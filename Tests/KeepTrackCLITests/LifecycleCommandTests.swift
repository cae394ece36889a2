import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// JSON Lines as dictionaries.
func jsonLines(_ text: String) throws -> [[String: Any]] {
    try text.split(separator: "\n").map {
        try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
    }
}

func parseTime(_ s: Any?) -> Double? {
    guard let s = s as? String else { return nil }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.date(from: s)?.timeIntervalSince1970
}

@Suite("keeptrack replay: the background budget", .offThePool)
struct LifecycleReplayTests {
    struct Stop {
        var name: String
        var start: Double
        var end: Double
    }

    func truthStops() throws -> [Stop] {
        let data = try Data(contentsOf: URL(fileURLWithPath: fixturePath("day-24h.truth.json")))
        let truth = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let stops = try #require(truth["stops"] as? [[String: Any]])
        return try stops.map {
            Stop(
                name: $0["name"] as! String, start: try #require(parseTime($0["start"])),
                end: try #require(parseTime($0["end"])))
        }
    }

    /// The day in the background with the location mode: every delivered location refreshes the
    /// budget, so the app is never suspended while fixes keep coming.
    @Test func theLocationModeKeepsADayLongTrackerAlive() throws {
        let r = try keeptrack(["replay", "--background", "--significant-changes", "fixtures/day-24h.nmea.gz"])
        #expect(r.status == 0)
        let events = try jsonLines(r.stdout)
        #expect(events.filter { $0["event"] as? String == "suspended" }.isEmpty)
        #expect(events.filter { $0["event"] as? String == "location" }.count >= 86_000)
        #expect(events.first?["event"] as? String == "inactive")
        #expect(events.dropFirst().first?["event"] as? String == "background")
    }

    /// With auto-pause, updates pause during long stops, the app is suspended, and the next
    /// significant change wakes it: checked against the fixture's true stops.
    @Test func withAutoPauseItSuspendsDuringLongStopsAndWakesOnTheNextSignificantChange() throws {
        let r = try keeptrack([
            "replay", "--background", "--pause-when-stationary", "--significant-changes",
            "fixtures/day-24h.nmea.gz",
        ])
        #expect(r.status == 0)
        let events = try jsonLines(r.stdout)
        let stops = try truthStops()
        var suspended = false
        var suspendedIn: Stop?
        var locationsSinceWake = 0
        var suspensions: [Double] = []
        for e in events {
            let kind = e["event"] as? String
            let t = parseTime(e["time"])
            switch kind {
            case "suspended":
                let t = try #require(t)
                // Suspended only after updates paused, five minutes into a true stop.
                let stop = stops.first { t >= $0.start + 240 && t <= $0.end }
                #expect(stop != nil, "suspended at \(e["time"]!) outside any stop")
                #expect(!suspended)
                if !suspensions.isEmpty { #expect(locationsSinceWake > 0, "woken but delivered nothing") }
                suspended = true
                suspendedIn = stop
                suspensions.append(t)
            case "resumed":
                let t = try #require(t)
                #expect(suspended)
                #expect((e["reason"] as? String) == "woken by a significant change")
                // Woken after the stop ended, within ten minutes (500 m and a 60 s sample).
                if let stop = suspendedIn {
                    #expect(t > stop.end && t - stop.end < 600, "woken at \(e["time"]!) for the stop \(stop.name)")
                }
                suspended = false
                locationsSinceWake = 0
            case "location":
                #expect(!suspended, "a location delivered to a suspended app at \(e["time"]!)")
                locationsSinceWake += 1
            default: break
            }
        }
        // Every stop of ten minutes or more saw the app suspended six minutes in.
        for stop in stops where stop.end - stop.start >= 600 {
            let at = stop.start + 360
            let last = suspensions.last { $0 <= at }
            #expect(last != nil, "not suspended during \(stop.name)")
        }
        #expect(suspensions.count == 6)
    }

    /// Without a background mode the app is suspended within seconds, and region events wake it.
    @Test func regionEventsWakeASuspendedApp() throws {
        let r = try keeptrack([
            "replay", "--background", "--background-modes", "none", "--regions",
            "fixtures/walk-15min.regions.geojson", "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0)
        let events = try jsonLines(r.stdout)
        let kinds = events.compactMap { $0["event"] as? String }
        let firstSuspension = try #require(kinds.firstIndex(of: "suspended"))
        let first = events[firstSuspension]
        #expect(
            first["reason"] as? String
                == "no background task and no keep-alive (suspended 5 s after running out of work)")
        let wakes = events.filter { $0["event"] as? String == "resumed" }
        #expect(!wakes.isEmpty)
        for wake in wakes {
            #expect((wake["reason"] as? String)?.hasPrefix("woken by a region event (") == true)
            #expect(wake["backgroundTimeRemaining"] as? Double == 10)
        }
        // Each wake is followed by the region event that caused it.
        for (i, kind) in kinds.enumerated() where kind == "resumed" {
            #expect(["enter", "exit"].contains(kinds[i + 1]))
        }
    }

    @Test func badLifecycleOptionsAreNamed() throws {
        let r = try keeptrack(["replay", "--background-modes", "gps", "fixtures/walk-15min.nmea"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--background-modes takes location, audio, fetch, processing"))
        let p = try keeptrack(["replay", "--policy", "ios13", "--grace=-1", "fixtures/walk-15min.nmea"])
        #expect(p.status == 64)
        #expect(p.stderr.contains("The value '-1' is invalid for '--grace <duration>': '-1' is not a duration"))
        let z = try keeptrack(["replay", "--policy", "ios13", "--budget=0s", "fixtures/walk-15min.nmea"])
        #expect(z.status == 64)
        #expect(z.stderr.contains("Custom policy: the budget must be a positive number of seconds."), "\(z.stderr)")
    }

    /// systemd's notify protocol, on a real datagram socket: READY first, the state in STATUS,
    /// watchdog pings while fixes arrive.
    @Test func notifiesSystemdThroughNotifySocket() throws {
        let dir = try TemporaryDirectory("keeptrack-notify").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/notify"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0)

        let tool = try Tool(
            executable: productsDirectory.appendingPathComponent("keeptrack"),
            ["replay", "--background", "--background-modes", "none", "fixtures/walk-15min.nmea"],
            environment: ["NOTIFY_SOCKET": path])
        tool.guardAgainstHang(seconds: 60)
        tool.drain()
        var messages: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { break }
            messages.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        #expect(messages.first == "READY=1")
        #expect(messages.contains("STATUS=background, 180 s of background time left"))
        #expect(messages.contains { $0.hasPrefix("WATCHDOG=1\n") })
        #expect(messages.contains("STATUS=suspended: GPS watch released, sampling every 60 s"))
    }
}

@Suite("keeptrack track: suspension on a real gpsd, ctl and signals", .offThePool)
struct LifecycleTrackTests {
    @Test func suspensionReleasesTheGPSDWatchAndCtlBringsItBack() async throws {
        let gpsd = try GPSFake.start("walk-15min.nmea")
        defer { try? gpsd.stop() }
        let dir = try TemporaryDirectory("keeptrack-ctl").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let control = dir + "/control.sock"
        let track = try Tool(
            executable: productsDirectory.appendingPathComponent("keeptrack"),
            [
                "track", "--gpsd", "127.0.0.1:\(gpsd.port)", "--background", "--background-modes", "none",
                "--grace", "1", "--sample-interval", "2", "--control", control, "--data-dir", dir,
            ])
        track.guardAgainstHang(seconds: 90)
        defer { track.terminate() }
        var seen: [String] = []

        // In the background with nothing to keep it running: suspended, and the watch released.
        #expect(track.readLine(containing: "\"event\":\"suspended\"", seen: &seen) != nil)
        #expect(track.readLine(containing: "\"kind\":\"released\"", seen: &seen) != nil)
        let status = try keeptrack(["ctl", "status", "--json", "--control", control])
        #expect(status.status == 0)
        #expect(status.stdout.contains("\"state\":\"suspended\""))
        #expect(status.stdout.contains("\"backgroundTimeRemaining\":0.000"))
        // A region the tracker does not monitor: said in words, as for the stored set.
        let nowhere = try keeptrack(["regions", "state", "nowhere", "--control", control])
        #expect(nowhere.status == 64)
        #expect(nowhere.stderr.hasPrefix("Error: no monitored region with id nowhere\n"), "\(nowhere.stderr)")

        // Low-rate sampling: the watch is taken for one fix, then released again, sample after
        // sample (it was taken once and never again: the timer slept past the next sample's time).
        for _ in 0..<3 {
            #expect(track.readLine(containing: "\"kind\":\"acquired\"", seen: &seen) != nil)
            #expect(track.readLine(containing: "\"kind\":\"released\"", seen: &seen) != nil)
        }

        // Foreground: the watch comes back and stays.
        let fg = try keeptrack(["ctl", "foreground", "--control", control])
        #expect(fg.status == 0)
        #expect(fg.stdout.contains("state: active"))
        #expect(fg.stdout.contains("background time left: unbounded"))
        #expect(track.readLine(containing: "\"event\":\"active\"", seen: &seen) != nil)

        // SIGUSR1: background again, suspended again after the grace period.
        kill(track.process.processIdentifier, SIGUSR1)
        #expect(track.readLine(containing: "\"event\":\"background\"", seen: &seen) != nil)
        #expect(track.readLine(containing: "\"event\":\"suspended\"", seen: &seen) != nil)
        // SIGUSR2: foreground.
        kill(track.process.processIdentifier, SIGUSR2)
        #expect(track.readLine(containing: "\"event\":\"active\"", seen: &seen) != nil)
        #expect(!seen.contains { $0.contains("\"event\":\"terminated\"") })
    }

    /// Without location options `track` writes fixes on standard output, which may be a file: a
    /// gpsd it cannot reach is said on standard error too (it was said only in the output).
    @Test func fixModeSaysTheInputsProblemOnStandardError() throws {
        let closed = try ReservedPort()
        defer { closed.release() }
        let track = try Tool(
            executable: productsDirectory.appendingPathComponent("keeptrack"),
            ["track", "--gpsd", "127.0.0.1:\(closed.number)"])
        track.guardAgainstHang(seconds: 60)
        defer { track.terminate() }
        var seen: [String] = []
        #expect(track.readLine(containing: "\"kind\":\"error\"", seen: &seen) != nil)
        #expect(
            track.errors().hasPrefix("warning: cannot connect to gpsd at 127.0.0.1:\(closed.number)"),
            "\(track.errors())")
    }

    @Test func ctlWithoutATrackerSaysSo() throws {
        let r = try keeptrack(["ctl", "status", "--control", "/tmp/keeptrack-nobody/control.sock"])
        // A failure, not a usage error: status 1, without the usage text.
        #expect(r.status == 1)
        #expect(r.stderr.contains("no tracker answers at /tmp/keeptrack-nobody/control.sock"))
        #expect(!r.stderr.contains("Usage:"), "\(r.stderr)")
        let bad = try keeptrack(["ctl", "sleep"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("Unknown command 'sleep': use status, foreground or background."))
    }
}
