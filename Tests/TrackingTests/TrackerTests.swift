import Foundation
import Formats
import GPSInput
import Geo
import KeepTrackTesting
import Lifecycle
import LocationService
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
import Tracking
import Upload

/// Collects a tracker's events.
final class Collected: TrackerEventSink {
    let events = Mutex<[TrackerEvent]>([])
    func receive(_ event: TrackerEvent) throws { events.withLock { $0.append(event) } }
    var all: [TrackerEvent] { events.withLock { $0 } }
    var locations: [LocationEvent] { all.compactMap { if case .location(let e) = $0 { e } else { nil } } }
    var transitions: [AppLifecycle.Transition] {
        all.compactMap { if case .lifecycle(.transition(let t), _) = $0 { t } else { nil } }
    }
}

func runGroup(_ tracker: Tracker) async throws {
    var logger = Logger(label: "test")
    logger.logLevel = .error
    try await ServiceGroup(configuration: .init(services: tracker.services, logger: logger)).run()
}

/// The walk and its regions, launched at the first fix, uploaded to `endpoint` through an outbox in
/// `dir`: what the whole-pipeline tests replay.
func walkWithUploads(to endpoint: Endpoint, outboxIn dir: String) throws -> (NMEALogSource, Tracker.Configuration) {
    let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
    var c = Tracker.Configuration()
    try c.addRegions(geoJSON: fixtureBytes("walk-15min.regions.geojson"))
    c.launchAtFirstFix = true
    c.deadlineTimer = false
    var u = Uploader.Configuration(url: endpoint.url())
    u.token = "secret"
    c.upload = .init(outboxPath: dir + "/outbox.sqlite", uploader: u)
    return (source, c)
}

@Suite("Tracker: the whole pipeline in-process")
struct TrackerTests {
    @Test func aReplayedWalkReachesAnEndpointWithEveryLocationAndTransition() async throws {
        let endpoint = try await Endpoint.start()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (source, c) = try walkWithUploads(to: endpoint, outboxIn: dir)
        let clock = source.logClock
        let sink = Collected()
        let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
        try await runGroup(tracker)

        let delivered = sink.locations.compactMap { if case .location(let l) = $0 { l } else { nil } }
        let transitions = sink.locations.compactMap { e -> (RegionMonitor.Event, Location)? in
            guard case .region(let r, let at) = e else { return nil }
            if case .state = r { return nil }
            return (r, at)
        }
        #expect(delivered.count == 895)
        #expect(
            transitions.map { "\($0.0)" } == [
                #"exit("marienplatz", time: 1715679045.0)"#, #"enter("odeonsplatz", time: 1715679376.0)"#,
                #"exit("odeonsplatz", time: 1715679545.0)"#, #"enter("hofgarten", time: 1715679632.0)"#,
                #"exit("hofgarten", time: 1715679742.0)"#,
            ])
        #expect(tracker.inputFinished)
        #expect(try tracker.outbox!.stats().pending == 0)
        let device = tracker.outbox!.device
        let stored = try await endpoint.server.store.trail(device: device)
        #expect(stored.filter { $0.kind == .location }.count == 895)
        // Each transition is stored once, at its time, where the location that decided it was.
        let storedTransitions = stored.filter { $0.kind != .location }
        #expect(storedTransitions.count == 5)
        for (record, (_, at)) in zip(storedTransitions, transitions) {
            #expect(abs(record.latitude - at.coordinate.latitude) < 1e-9)
            #expect(abs(record.longitude - at.coordinate.longitude) < 1e-9)
            #expect(delivered.contains { $0.timestamp == at.timestamp })
        }
        await endpoint.stop()
    }

    @Test func aTerminatedAppEndsTheInputAndSaysSo() async throws {
        // One task never ended: iOS 13's 30 s budget terminates the app; nothing after is read.
        let profile = MotionProfile.commute(duration: 120)
        let result = try await BudgetSimulation(policy: .ios13, strategy: .unendedTask, profile: profile).run()
        #expect(result.finalState == .terminated)
        #expect(result.firstStop == 30)
    }

    @Test func simulateAndAReplayOfTheSameMotionSuspendAndWakeAlike() async throws {
        // The synthetic commute as an NMEA log: `keeptrack simulate --fixture LOG` and `keeptrack replay
        // --background LOG` read the same fixes.
        let (dir, log) = try commuteLog()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var fixes: [Fix] = []
        for await element in NMEALogSource(options: .init(path: log)) { if let f = element.fix { fixes.append(f) } }
        let profile = MotionProfile(name: log, fixes: fixes)
        let simulated = try await BudgetSimulation(policy: .ios7, strategy: .significantChange, profile: profile).run()

        let sink = Collected()
        try await trackInTheBackground(log, sink: sink)

        func stopsAndWakes(_ ts: [AppLifecycle.Transition]) -> [String] {
            ts.compactMap { t in
                if t.to == .suspended { return "suspended \(Int(t.time))" }
                if case .woken = t.reason { return "woken \(Int(t.time))" }
                return nil
            }
        }
        let replayed = stopsAndWakes(sink.transitions)
        #expect(replayed.count == 15)  // 8 suspensions, 7 wakes: the golden table's "woken 7 times"
        #expect(replayed == stopsAndWakes(simulated.transitions))
        #expect(simulated.wakes == 7)
    }

    @Test(arguments: [
        (AppLifecycle.State.suspended, "significant", AppLifecycle.State.background),
        (.suspended, "enter", .background), (.suspended, "dwell", .background), (.suspended, "state", .suspended),
        (.suspended, "error", .suspended),
    ])
    func keepAliveWakesASuspendedAppOnlyForMovesAndTransitions(
        from: AppLifecycle.State, event: String,
        to: AppLifecycle.State
    ) {
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        let app = Application(policy: .ios7, modes: [], clock: clock)
        app.launch()
        app.enterBackground()
        clock.advance(to: .init(secondsSince1970: 1100))
        app.advance()
        #expect(app.state == from)
        let l = Location(coordinate: Coordinate(latitude: 1, longitude: 1), horizontalAccuracy: 5, timestamp: 1100)
        let e: LocationEvent =
            switch event {
            case "significant": .significantChange(l)
            case "enter": .region(.enter("home", time: 1100), at: l)
            case "dwell": .region(.dwell("home", time: 1100), at: l)
            case "state": .region(.state("home", .inside), at: l)
            default: .error(LocationError(.locationUnknown, "none"))
            }
        KeepAlive.apply(e, to: app)
        #expect(app.state == to)
    }

    @Test func theManualsExampleIsTheExampleProgramAndItRuns() async throws {
        let page = try String(contentsOf: packageRoot.appendingPathComponent("docs/embedding.md"), encoding: .utf8)
        let example = try String(
            contentsOf: packageRoot.appendingPathComponent("Examples/EmbedTracker/main.swift"),
            encoding: .utf8)
        #expect(
            page.contains("```swift\n" + example + "```\n"),
            "docs/embedding.md's example differs from Examples/EmbedTracker")
        #expect(example.split(separator: "\n").count <= 30)

        let endpoint = try await Endpoint.start()
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let exe = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
        ).deletingLastPathComponent().appendingPathComponent("embed-tracker")
        let tool = try Tool(
            executable: exe,
            [
                fixturePath("walk-15min.nmea"), endpoint.url(), "secret",
                dir + "/outbox.sqlite",
            ])
        tool.guardAgainstHang(seconds: 120)
        let lines = try await tool.remainingLines()
        try await offThePool { tool.process.waitUntilExit() }
        #expect(tool.process.terminationStatus == 0)
        let locations = lines.filter { $0.hasPrefix("location ") }.count
        #expect(locations > 50 && locations < 895)  // every 10 m of a ~1.2 km walk
        #expect(lines.last == "uploaded \(locations) records")
        #expect(try await endpoint.server.store.count() == locations)
        await endpoint.stop()
    }
}

/// RMC and GGA sentences for a fix (the GGA without altitude: a 2D fix, hAcc = HDOP 1.0 × 5 m).
func nmeaSentences(_ fix: Fix) -> String {
    let t = fix.time!.secondsSince1970!
    let (y, mo, d) = GNSSTime.civilFromDays(Int((t / 86_400).rounded(.down)))
    let s = Int(t.truncatingRemainder(dividingBy: 86_400))
    let time = String(format: "%02d%02d%02d.00", s / 3600, s / 60 % 60, s % 60)
    let date = String(format: "%02d%02d%02d", d, mo, y % 100)
    func angle(_ v: Double, _ width: Int) -> String {
        let deg = Int(abs(v))
        return String(format: "%0\(width)d%08.5f", deg, (abs(v) - Double(deg)) * 60)
    }
    let c = fix.coordinate!
    let lat = angle(c.latitude, 2) + (c.latitude >= 0 ? ",N" : ",S")
    let lon = angle(c.longitude, 3) + (c.longitude >= 0 ? ",E" : ",W")
    func sentence(_ body: String) -> String {
        let x = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        return "$" + body + "*" + String(format: "%02X", x) + "\r\n"
    }
    let knots = (fix.speed ?? 0) * 3600 / 1852
    return sentence(
        "GPRMC,\(time),A,\(lat),\(lon),\(String(format: "%.2f", knots)),\(String(format: "%.1f", fix.course ?? 0)),\(date),,,A"
    )
        + sentence("GPGGA,\(time),\(lat),\(lon),1,08,1.0,,M,,M,,")
}

/// An hour's synthetic commute as an NMEA log in a new temporary directory.
func commuteLog() throws -> (dir: String, log: String) {
    let dir = temporaryDirectory()
    let log = dir + "/commute.nmea"
    try MotionProfile.commute(duration: 3600).fixes.map(nmeaSentences).joined()
        .write(toFile: log, atomically: true, encoding: .utf8)
    return (dir, log)
}

/// `log` replayed on its own clock by an app launched in the background that monitors
/// significant changes only, with no background mode: it is suspended and woken.
func trackInTheBackground(_ log: String, sink: some TrackerEventSink) async throws {
    let source = NMEALogSource(options: .init(path: log))
    var c = Tracker.Configuration()
    c.standardUpdates = nil
    c.significantChanges = SignificantChangeMonitor()
    c.modes = []
    c.startInBackground = true
    c.launchAtFirstFix = true
    c.deadlineTimer = false
    c.sampleInterval = 1
    let clock = source.logClock
    let tracker = try Tracker(source: source, configuration: c, sink: sink, clock: clock)
    try await tracker.run()
}
