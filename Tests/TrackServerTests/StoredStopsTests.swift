import Formats
import Foundation
import GRDB
import Geo
import KeepTrackTesting
import LocationService
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// Issue 27's cost: stops and trips kept at ingest (``StoredStops``) answer what the read-time
/// detector answers on the same stored points, whatever order and batches the points came in,
/// after retention, and for a store upgraded from before they were kept.
@Suite("Endpoint: stops and trips kept at ingest", .serialized)
struct StoredStopsTests {
    /// A seeded trail: stays of 1-40 minutes (metres of wander, a multipath jump now and then), moves
    /// of 2-15 minutes between them, holes of up to 90 minutes, fixes too inaccurate to count; a
    /// fix every 1-10 seconds, whole seconds.
    ///
    /// With `outliers`, a phone's too (issue 36): about one fix in 100 each a point at 0,0, a fix of
    /// 1,500 m, or a single point 3 km away (a jump, or two in a row: no jump).
    static func trail(seed: UInt64, device: String, segments: Int = 24, outliers: Bool = false) -> [TrailRecord] {
        var rng = SeededRandom(seed: seed)
        var out: [TrailRecord] = []
        var t = 1_715_670_000.0
        var here = Coordinate(latitude: 48.137, longitude: 11.575)
        func add(_ c: Coordinate, accuracy: Double) {
            var c = c
            var accuracy = accuracy
            if outliers {
                switch Int.random(in: 0..<100, using: &rng) {
                case 0: c = Coordinate(latitude: 0, longitude: 0)
                case 1: accuracy = 1500
                case 2, 3: c = Coordinate(latitude: c.latitude + 3000 / 111_000.0, longitude: c.longitude)
                default: break
                }
            }
            out.append(
                TrailRecord(
                    device: device, sequence: Int64(out.count + 1), time: t, latitude: c.latitude,
                    longitude: c.longitude, horizontalAccuracy: accuracy))
            t += Double(Int.random(in: 1...10, using: &rng))
        }
        for _ in 0..<segments {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let end = t + Double(Int.random(in: 60...2400, using: &rng))
                while t < end {
                    let jump = Int.random(in: 0..<200, using: &rng) == 0 ? 40.0 : 6.0
                    let c = Coordinate(
                        latitude: here.latitude + Double.random(in: -0.5...0.5, using: &rng) * jump / 111_000,
                        longitude: here.longitude + Double.random(in: -0.5...0.5, using: &rng) * jump / 74_000)
                    add(c, accuracy: Int.random(in: 0..<50, using: &rng) == 0 ? 150 : 5)
                }
            case 5..<9:
                let end = t + Double(Int.random(in: 120...900, using: &rng))
                let heading = Double.random(in: 0..<(2 * .pi), using: &rng)
                let speed = Double.random(in: 1...15, using: &rng)
                while t < end {
                    let last = t
                    add(here, accuracy: 5)
                    let metres = speed * (t - last)
                    here = Coordinate(
                        latitude: here.latitude + cos(heading) * metres / 111_000,
                        longitude: here.longitude + sin(heading) * metres / 74_000)
                }
            default:
                t += Double(Int.random(in: 60...5400, using: &rng))
            }
        }
        return out
    }

    /// How the points arrive: in order in batches of any size, batches shuffled, a backlog held back
    /// and sent last, everything once more (duplicates), one point at a time out of order.
    static func arrivals(_ points: [TrailRecord], seed: UInt64) -> [[TrailRecord]] {
        var rng = SeededRandom(seed: seed)
        var batches: [[TrailRecord]] = []
        var i = 0
        while i < points.count {
            let n = Int.random(in: 1...400, using: &rng)
            batches.append(Array(points[i..<min(points.count, i + n)]))
            i += n
        }
        switch seed % 4 {
        case 0: break
        case 1: batches.shuffle(using: &rng)
        case 2:
            let held = batches.remove(at: Int.random(in: 0..<batches.count, using: &rng))
            batches.append(held)
            batches.append(Array(points[0..<min(50, points.count)]))
        default:
            var late = batches.removeLast()
            late.shuffle(using: &rng)
            batches.insert(contentsOf: late.map { [$0] }, at: Int.random(in: 0...batches.count, using: &rng))
        }
        return batches
    }

    /// Compares the stored answer with the read-time detector's over the whole trail and over a few
    /// windows (`from` inside a stay or a trip, `to` inside one, both).
    static func expectSameAnswers(
        _ store: any TrackStore, device: String, windows: [(Double, Double)], _ comment: Comment
    ) async throws {
        for (from, to) in [(-Double.infinity, Double.infinity)] + windows {
            let stored = try await store.stops(device: device, from: from, to: to)
            let reference = try await store.readTimeStops(device: device, from: from, to: to)
            #expect(stored.stops == reference.stops, "\(comment) stops \(from)-\(to)")
            #expect(stored.trips == reference.trips, "\(comment) trips \(from)-\(to)")
        }
    }

    static func windows(_ points: [TrailRecord], seed: UInt64) -> [(Double, Double)] {
        var rng = SeededRandom(seed: seed &+ 99)
        let first = points.first!.time
        let last = points.last!.time
        return (0..<4).map { _ in
            let a = Double.random(in: first...last, using: &rng).rounded()
            let b = Double.random(in: a...last, using: &rng).rounded()
            return (a, b)
        } + [(first + 1800, .infinity), (-.infinity, (first + last) / 2)]
    }

    /// The property: on seeded trails and arrival orders, after every few batches and at the end, the
    /// stored stops and trips are the read-time detector's on the same stored points.
    @Test(arguments: StoreKind.allCases) func storedAnswersAreTheReadTimeDetectorsWhateverTheArrivalOrder(
        kind: StoreKind
    ) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            for seed in UInt64(1)...8 {
                let device = "dev\(seed)"
                let points = Self.trail(seed: seed, device: device, outliers: seed % 2 == 0)
                let windows = Self.windows(points, seed: seed)
                let batches = Self.arrivals(points, seed: seed)
                for (i, batch) in batches.enumerated() {
                    _ = try await store.insert(batch, format: "osmand", received: batch[0].time)
                    if i % 7 == 3 {
                        try await Self.expectSameAnswers(store, device: device, windows: [], "seed \(seed) batch \(i)")
                    }
                }
                try await Self.expectSameAnswers(store, device: device, windows: windows, "seed \(seed)")
                let report = try await store.stops(device: device)
                #expect(!report.stops.isEmpty, "seed \(seed): the trail has stops")
                // The stored marks are the outlier filter's over the whole trail in time order, whatever
                // order the points came in.
                var accumulator = StopsAccumulator()
                var verdicts: [String] = []
                for p in points.sorted(by: { $0.time < $1.time }) {
                    let v = accumulator.add(
                        time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.horizontalAccuracy,
                        speed: nil)
                    if let v { verdicts.append("\(ISOTime.string(v.time)) \(v.reason.rawValue)") }
                }
                let marked = try await store.trail(device: device, includeOutliers: true).compactMap { r in
                    r.outlier.map { "\(ISOTime.string(r.time)) \($0)" }
                }
                #expect(marked == verdicts.sorted(), "seed \(seed)")
                #expect(seed % 2 == 1 || verdicts.count > 10, "seed \(seed): \(verdicts.count) outliers")
            }
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// Retention deletes a device's oldest points a batch at a time: the answers stay the read-time
    /// detector's on what is left (the kept stops and trips before the first point left go).
    @Test(arguments: StoreKind.allCases) func retentionKeepsTheAnswersTheDetectorsOnWhatIsLeft(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            let points = Self.trail(seed: 41, device: "old", segments: 30)
            _ = try await store.insert(points, format: "osmand", received: points[0].time)
            let span = points.last!.time - points.first!.time
            for fraction in [0.1, 0.35, 0.6] {
                let cut = points.first!.time + span * fraction
                while try await store.deleteExpired(before: cut, limit: 300) > 0 {}
                try await Self.expectSameAnswers(
                    store, device: "old", windows: Self.windows(points.filter { $0.time >= cut }, seed: 41),
                    "cut at \(fraction)")
                // New points after a retention sweep go on from the kept state.
                let more = Self.trail(seed: 42, device: "old", segments: 3).map {
                    var r = $0
                    r.time += points.last!.time - points.first!.time + 7200 * (fraction + 1)
                    r.sequence += 10_000 * Int64(fraction * 100)
                    return r
                }
                _ = try await store.insert(more, format: "osmand", received: more[0].time)
                try await Self.expectSameAnswers(store, device: "old", windows: [], "after \(fraction)")
            }
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// The stops and trips found at ingest come out of the store's event feed once each, as the
    /// stored answer has them.
    @Test(arguments: StoreKind.allCases) func ingestTellsTheFinishedStopsAndTrips(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            let seen = Mutex<[StopEvent]>([])
            let subscription = store.stopEvents.subscribe { events in seen.withLock { $0 += events } }
            let points = Self.trail(seed: 5, device: "live")
            var i = 0
            while i < points.count {
                let batch = Array(points[i..<min(points.count, i + 37)])
                _ = try await store.insert(batch, format: "osmand", received: batch[0].time)
                i += 37
            }
            await store.storedStopsSettled()
            store.stopEvents.unsubscribe(subscription)
            let report = try await store.stops(device: "live")
            let events = seen.withLock { $0 }
            let stops = events.compactMap { if case .stop(let v) = $0.kind { v } else { nil } }
            let trips = events.compactMap { if case .trip(let t) = $0.kind { t } else { nil } }
            #expect(!stops.isEmpty && !trips.isEmpty)
            #expect(stops == report.stops.filter { $0.departure != nil })
            #expect(trips == report.trips)
            #expect(events.allSatisfy { $0.device == "live" })
            let json = String(decoding: try #require(events.first).json, as: UTF8.self)
            #expect(json.hasPrefix(#"{"kind":"#) && json.contains(#""start":""#) && json.hasSuffix("}"))
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// A store of v7 (points, no stops kept) upgraded: its devices are marked never computed, the first
    /// query computes and stores them (the read-time detector's answer), and ingest goes on from there.
    @Test func aStoreUpgradedFromV7ComputesItsStopsAtTheFirstQuery() async throws {
        let path = try TemporaryDirectory("kt-stored-stops").path + "/v7.sqlite"
        let points = Self.trail(seed: 77, device: "old")
        let half = points.count / 2
        let store = try SQLiteTrackStore(path: path)
        _ = try await store.insert(Array(points[..<half]), format: "osmand", received: points[0].time)
        await store.close()
        // Back to v7: no tables of kept stops, the migration not applied.
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(
                sql: """
                    DROP TABLE stop_detectors; DROP TABLE stop_checkpoints; DROP TABLE stops; DROP TABLE trips;
                    DELETE FROM grdb_migrations WHERE identifier = 'v8-stored-stops';
                    """)
        }
        try queue.close()
        let upgrades = Mutex(0)
        let upgraded = try SQLiteTrackStore(path: path) { u in if u != nil { upgrades.withLock { $0 += 1 } } }
        #expect(upgrades.withLock { $0 } >= 1)
        try await Self.expectSameAnswers(upgraded, device: "old", windows: [], "upgraded")
        _ = try await upgraded.insert(Array(points[half...]), format: "osmand", received: points[half].time)
        try await Self.expectSameAnswers(
            upgraded, device: "old", windows: Self.windows(points, seed: 77), "upgraded, then more")
        await upgraded.close()
    }

    /// Two `serve` instances on one PostgreSQL database storing a device's batches at once (each takes
    /// every other batch, out of order too): the device's detector runs one batch after the other, and
    /// both answer the read-time detector's stops and trips.
    @Test func twoInstancesStoringAtOnceKeepTheSameStops() async throws {
        let a = try await Endpoint.start(store: .postgres)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        do {
            for seed in UInt64(11)...13 {
                let device = "both\(seed)"
                let points = Self.trail(seed: seed, device: device)
                let batches = Self.arrivals(points, seed: seed)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (instance, store) in [a.server.store, b.server.store].enumerated() {
                        group.addTask {
                            for batch in batches.enumerated().filter({ $0.offset % 2 == instance }).map(\.element) {
                                _ = try await store.insert(batch, format: "osmand", received: batch[0].time)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                try await Self.expectSameAnswers(
                    a.server.store, device: device, windows: Self.windows(points, seed: seed), "seed \(seed), a")
                let fromA = try await a.server.store.stops(device: device)
                let fromB = try await b.server.store.stops(device: device)
                #expect(fromA.stops == fromB.stops && fromA.trips == fromB.trips)
            }
        } catch {
            Issue.record(error)
        }
        await b.stop()
        await a.stop()
    }
}
