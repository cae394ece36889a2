import Foundation
import Formats
import GPSInput
import Geo
import KeepTrackTesting
import Testing

@testable import LocationService

/// The fixtures' truth sidecars against what the location service reports from their logs.
@Suite("Location service against fixture truth")
struct TruthTests {
    struct Truth: Decodable {
        struct TruthRegion: Decodable {
            struct Event: Decodable {
                var kind: String
                var time: String
            }
            var id: String
            var events: [Event]
        }
        var regions: [TruthRegion]
        var path: [[JSONScalar]]
    }

    enum JSONScalar: Decodable {
        case string(String), number(Double)
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let n = try? c.decode(Double.self) {
                self = .number(n)
            } else {
                self = .string(try c.decode(String.self))
            }
        }
        var number: Double? { if case .number(let n) = self { n } else { nil } }
        var string: String? { if case .string(let s) = self { s } else { nil } }
    }

    static func seconds(_ iso: String) -> Double {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: iso)!.timeIntervalSince1970
    }

    static func truth(_ name: String) throws -> Truth {
        try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("\(name).truth.json"))))
    }

    static func monitor(_ name: String) throws -> RegionMonitor {
        var m = RegionMonitor()
        for d in try RegionDefinition.parseGeoJSON(try fixtureBytes("\(name).regions.geojson")) {
            guard case .circle(let c, let r) = d.shape else { continue }
            m.add(try Region(id: d.id, center: c, radius: r))
        }
        return m
    }

    /// Replays a fixture through the manager on log time and returns every event.
    static func replay(
        _ file: String, regions: RegionMonitor = RegionMonitor(),
        configure: (inout LocationManagerConfiguration) -> Void = { _ in },
        speed: Double? = nil, clock: ManualClock? = nil
    ) async -> [LocationEvent] {
        let pacing: any EpochClock = clock ?? WallClock()
        let source = NMEALogSource(options: .init(path: fixturePath(file), speed: speed), clock: pacing)
        var configuration = LocationManagerConfiguration()
        configure(&configuration)
        let logClock = source.logClock
        let manager = LocationManager(
            source: source, configuration: configuration, regions: regions,
            clock: logClock)
        var events: [LocationEvent] = []
        for await e in manager.events { events.append(e) }
        return events
    }

    /// Enter/exit events per region as (kind, time).
    static func transitions(_ events: [LocationEvent]) -> [String: [(String, Double)]] {
        var out: [String: [(String, Double)]] = [:]
        for case .region(let e, _) in events {
            switch e {
            case .enter(let id, let t): out[id, default: []].append(("enter", t))
            case .exit(let id, let t): out[id, default: []].append(("exit", t))
            default: break
            }
        }
        return out
    }

    @Test(arguments: ["walk-15min", "day-24h"])
    func regionCrossingsMatchTheTruthWithinTheHysteresisBound(_ name: String) async throws {
        let truth = try Self.truth(name)
        let file = name == "day-24h" ? "day-24h.nmea.gz" : "\(name).nmea"
        let events = await Self.replay(file, regions: try Self.monitor(name))
        let got = Self.transitions(events)
        for region in truth.regions {
            let mine = got[region.id] ?? []
            #expect(mine.map(\.0) == region.events.map(\.kind), "region \(region.id): \(mine)")
            for (event, expected) in zip(mine, region.events) {
                // Reported when the evidence began: after the true crossing by the margin (the
                // fix's accuracy, about 5 m) at walking or driving speed, never more than 20 s late.
                let delay = event.1 - Self.seconds(expected.time)
                #expect(delay > -5 && delay < 20, "region \(region.id) \(event.0): \(delay) s from the truth")
            }
        }
    }

    @Test func theDayGivesTheSignificantChangesTheTruePathGives() async throws {
        // Expected: the 500 m / 5 min rule applied to the noise-free path, sampled each second.
        let truth = try Self.truth("day-24h")
        let points = truth.path.map { p in
            (t: Self.seconds(p[0].string!), c: Coordinate(latitude: p[1].number!, longitude: p[2].number!))
        }
        var expected = SignificantChangeMonitor()
        var count = 0
        var k = 0
        var t = points.first!.t
        while t <= points.last!.t {
            while k + 1 < points.count && points[k + 1].t <= t { k += 1 }
            let a = points[k], b = points[min(k + 1, points.count - 1)]
            let f = b.t > a.t ? (t - a.t) / (b.t - a.t) : 0
            let c = Coordinate(
                latitude: a.c.latitude + (b.c.latitude - a.c.latitude) * f,
                longitude: a.c.longitude + (b.c.longitude - a.c.longitude) * f)
            if expected.process(Location(coordinate: c, horizontalAccuracy: 1, timestamp: t)) != nil { count += 1 }
            t += 1
        }
        let events = await Self.replay("day-24h.nmea.gz") { c in
            c.standardUpdates = nil
            c.significantChanges = SignificantChangeMonitor()
        }
        let significant = events.filter { if case .significantChange = $0 { true } else { false } }.count
        #expect(count >= 8)
        #expect(abs(significant - count) <= 1, "\(significant) significant changes, the true path gives \(count)")
    }

    @Test func replayAtAnySpeedYieldsIdenticalEvents() async throws {
        let fast = await Self.replay("walk-15min.nmea", regions: try Self.monitor("walk-15min")) {
            $0.standardUpdates?.distanceFilter = 20
        }
        let clock = ManualClock()
        let ticker = Task {
            // The replay's clock moves to each deadline it waits for, once it waits.
            while !Task.isCancelled {
                await clock.sleepers(atLeast: 1)
                if let deadline = clock.nextDeadline { clock.advance(to: deadline) }
            }
        }
        let paced = await Self.replay(
            "walk-15min.nmea", regions: try Self.monitor("walk-15min"),
            configure: {
                $0.standardUpdates?.distanceFilter = 20
            }, speed: 4, clock: clock)
        ticker.cancel()
        #expect(fast.count > 20)
        #expect(paced == fast)
    }

    @Test func reportsLocationUnknownThroughATunnel() async throws {
        // drive-1h has a 90 s tunnel: no usable fix for more than 30 s.
        let events = await Self.replay("drive-1h.nmea") { $0.standardUpdates?.distanceFilter = 1000 }
        let unknown = events.filter { if case .error(let e) = $0 { e.code == .locationUnknown } else { false } }
        #expect(unknown.count == 1)
    }
}

/// Records delegate calls.
final class RecordingDelegate: LocationManagerDelegate, @unchecked Sendable {
    var calls: [String] = []
    func didUpdateLocation(_ location: Location) { calls.append("location") }
    func didEnterRegion(_ id: String, at time: Double) { calls.append("enter \(id)") }
    func didExitRegion(_ id: String, at time: Double) { calls.append("exit \(id)") }
    func didDetermineState(_ state: RegionState, forRegion id: String) { calls.append("state \(id) \(state.rawValue)") }
}

@Suite("Location manager delegate")
struct DelegateTests {
    @Test func callsTheDelegateForEachEvent() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        let clock = source.logClock
        var configuration = LocationManagerConfiguration()
        configuration.standardUpdates?.distanceFilter = 200
        let manager = LocationManager(
            source: source, configuration: configuration,
            regions: try TruthTests.monitor("walk-15min"), clock: clock)
        let delegate = RecordingDelegate()
        await manager.run(delegate: delegate)
        #expect(
            delegate.calls.filter { !$0.hasPrefix("location") } == [
                "state marienplatz inside", "state odeonsplatz outside", "state hofgarten outside", "exit marienplatz",
                "enter odeonsplatz", "exit odeonsplatz", "enter hofgarten", "exit hofgarten",
            ])
        #expect(delegate.calls.filter { $0 == "location" }.count > 3)
    }
}
