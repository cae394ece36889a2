import Formats
import GRDB
import Geo
import KeepTrackTesting
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 36's last gaps on the endpoint, both stores: serve's `--max-accuracy` (a typed setting from
/// the server's configuration into the stores' ingest; a new threshold holds from the next point, the
/// marks already stored stay), and a jump at the very end of a trail, `pending` until the next point
/// says what it was.
@Suite("Endpoint: the outlier threshold and the pending last point", .serialized)
struct OutlierThresholdTests {
    static let home = Coordinate(latitude: 48.1372, longitude: 11.5756)

    /// A device still at `home` from `start`, a fix every 5 s for `minutes`, accuracy 10 m but 300 m
    /// at the times in `coarse`.
    static func stay(
        device: String, start: Double, minutes: Int, coarse: Set<Double> = [], sequence: Int64 = 1
    ) -> [TrailRecord] {
        (0..<(minutes * 12)).map { i in
            let t = start + Double(i * 5)
            // A receiver's few metres of wander.
            let p = Geodesy.destination(from: home, bearing: Double(i * 37 % 360), distance: Double(i % 4))
            return TrailRecord(
                device: device, sequence: sequence + Int64(i), time: t, latitude: p.latitude, longitude: p.longitude,
                horizontalAccuracy: coarse.contains(t) ? 300 : 10)
        }
    }

    static func marks(_ store: any TrackStore, _ device: String) async throws -> [Double: String] {
        var out: [Double: String] = [:]
        for r in try await store.trail(device: device, includeOutliers: true) where r.outlier != nil {
            out[r.time] = r.outlier
        }
        return out
    }

    static let t0 = 1_780_000_000.0

    /// A 300 m fix is an outlier at the default threshold and not at `--max-accuracy 500` (the
    /// server's configuration, onto the store): marked `inaccurate`, out of the stop's fixes, or not.
    @Test(arguments: StoreKind.allCases)
    func aFixOf300MetresIsAnOutlierAtTheDefaultAndNotAt500(kind: StoreKind) async throws {
        let coarse = Self.t0 + 300
        for maxAccuracy in [nil, 500.0] {
            let endpoint = try await Endpoint.start(store: kind) { c in
                if let maxAccuracy { c.maxAccuracy = maxAccuracy }
            }
            do {
                let store = endpoint.server.store
                #expect(store.stopsConfiguration.maximumAccuracy == maxAccuracy ?? 200)
                let points = Self.stay(device: "phone", start: Self.t0, minutes: 10, coarse: [coarse])
                _ = try await store.insert(points, format: "osmand", received: Self.t0 + 600)
                await store.storedStopsSettled()
                let marks = try await Self.marks(store, "phone")
                let stops = try await store.stops(device: "phone").stops
                try #require(stops.count == 1)
                if maxAccuracy == nil {
                    #expect(marks == [coarse: "inaccurate"])
                    #expect(stops[0].fixCount == points.count - 1)
                    #expect(try await store.trail(device: "phone").count == points.count - 1)
                } else {
                    #expect(marks.isEmpty)
                    #expect(stops[0].fixCount == points.count)
                }
                // The stored answer is the read-time detector's with the store's threshold.
                let reference = try await store.readTimeStops(device: "phone")
                #expect(reference.stops == stops)
            } catch {
                Issue.record(error)
            }
            await endpoint.stop()
        }
    }

    /// A new threshold (a restart with another `--max-accuracy`) holds from the next point stored:
    /// the marks already stored stay, the device's stored state and checkpoints keep the threshold
    /// they judged with, and a query from the start still meets them. A late point runs the detector
    /// again from the checkpoint before it, judging the points after it with the new threshold.
    @Test(arguments: StoreKind.allCases)
    func aNewThresholdHoldsFromTheNextPointAndKeepsTheMarksStored(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            let first = Self.t0 + 300
            let second = Self.t0 + 900
            let all = Self.stay(device: "phone", start: Self.t0, minutes: 20, coarse: [first, second])
            let late = all.first { $0.time == Self.t0 + 150 }!
            let before = all.filter { $0.time < Self.t0 + 600 && $0.time != late.time }
            let after = all.filter { $0.time >= Self.t0 + 600 }
            _ = try await store.insert(before, format: "osmand", received: Self.t0 + 600)
            await store.storedStopsSettled()
            #expect(try await Self.marks(store, "phone") == [first: "inaccurate"])

            store.setMaximumAccuracy(500)
            _ = try await store.insert(after, format: "osmand", received: Self.t0 + 1200)
            await store.storedStopsSettled()
            // The earlier mark stays; the later 300 m fix is no outlier.
            #expect(try await Self.marks(store, "phone") == [first: "inaccurate"])
            let stops = try await store.stops(device: "phone").stops
            try #require(stops.count == 1)
            #expect(stops[0].fixCount == before.count + after.count - 1)
            // A query from the start begins with the first checkpoint's threshold and meets it.
            let fromStart = try await store.stops(device: "phone", from: Self.t0)
            #expect(fromStart.stops == stops)
            #expect(fromStart.points <= 1)

            // A late point: the points after the checkpoint before it are judged again, with 500.
            _ = try await store.insert([late], format: "osmand", received: Self.t0 + 1300)
            await store.storedStopsSettled()
            #expect(try await Self.marks(store, "phone").isEmpty)
            let again = try await store.stops(device: "phone").stops
            #expect(again.first?.fixCount == all.count)
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// A device still at `home` for 10 minutes, then driven 3 km east at 10 m/s, then still there for
    /// 10 minutes: a fix every 5 s, every one of accuracy 300 m (an outlier at the default threshold,
    /// none at `--max-accuracy 500`).
    static func drive(device: String) -> [TrailRecord] {
        (0..<300).map { i in
            let t = Self.t0 + Double(i * 5)
            let wander = Double(i % 4)
            let p: Coordinate =
                switch i {
                case ..<120: Geodesy.destination(from: home, bearing: Double(i * 37 % 360), distance: wander)
                case ..<180: Geodesy.destination(from: home, bearing: 90, distance: Double((i - 119) * 50))
                default:
                    Geodesy.destination(
                        from: Geodesy.destination(from: home, bearing: 90, distance: 3050),
                        bearing: Double(i * 37 % 360), distance: wander)
                }
            return TrailRecord(
                device: device, sequence: Int64(i + 1), time: t, latitude: p.latitude, longitude: p.longitude,
                horizontalAccuracy: 300)
        }
    }

    /// `keeptrack export` (its own store on the endpoint's database, at the default threshold) draws
    /// the visits and trips the endpoint kept with its `--max-accuracy`, and `--trips` writes what
    /// `GET /v1/devices/ID/trips?format=gpx` answers, over the whole trail and over a range: the
    /// same stored stops and trips, not the default threshold's (none: every fix is 300 m).
    @Test(arguments: StoreKind.allCases)
    func exportDrawsAndWritesTheVisitsAndTripsTheEndpointKept(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind) { $0.maxAccuracy = 500 }
        let raw = Raw(endpoint: endpoint)
        do {
            let store = endpoint.server.store
            _ = try await store.insert(Self.drive(device: "car"), format: "osmand", received: Self.t0 + 1500)
            await store.storedStopsSettled()
            let kept = try await store.stops(device: "car")
            try #require(kept.stops.count == 2 && kept.trips.count == 1, "\(kept)")
            // The default threshold finds nothing in these fixes: what export found before.
            let byDefault = try await store.readTimeStops(device: "car", configuration: VisitDetector.Configuration())
            #expect(byDefault.stops.isEmpty && byDefault.trips.isEmpty)

            let database = TrackDatabase(endpoint.database)
            for (from, to) in [(-Double.infinity, Double.infinity), (Self.t0 + 300, Self.t0 + 1200)] {
                let range = from.isFinite ? "&from=\(ISOTime.string(from))&to=\(ISOTime.string(to))" : ""
                let route = try await raw.send(.GET, "/v1/devices/car/trips?format=gpx" + range)
                try #require(route.status == 200, "\(route.body)")
                let trips = try await database.exportTrail(device: "car", from: from, to: to, format: "trips")
                #expect(String(decoding: trips.bytes, as: UTF8.self) == route.body, "\(range)")
                #expect(route.body.contains("<trk>"), "\(range)")

                let report = try await store.stops(device: "car", from: from, to: to)
                #expect(!report.stops.isEmpty, "\(range)")
                let svg = try await database.exportTrail(device: "car", from: from, to: to, format: "svg")
                let drawn = TrailSVG.render(
                    title: "car", records: try await store.trail(device: "car", from: from, to: to),
                    marks: report.marks)
                #expect(String(decoding: svg.bytes, as: UTF8.self) == drawn, "\(range)")
            }
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// A device whose stops were never kept (a database upgraded: the migration's state, every
    /// device's stops to compute at its first query): `keeptrack export --max-accuracy 500` computes
    /// and keeps them with serve's threshold, the trips serve's route answered before, its 300 m fixes
    /// unmarked.
    @Test(arguments: StoreKind.allCases)
    func exportKeepsTheStopsNeverKeptWithTheThresholdItIsGiven(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind) { $0.maxAccuracy = 500 }
        let database = endpoint.database
        var stopped = false
        do {
            let store = endpoint.server.store
            _ = try await store.insert(Self.drive(device: "car"), format: "osmand", received: Self.t0 + 1500)
            await store.storedStopsSettled()
            let kept = try await store.stops(device: "car")
            try #require(kept.trips.count == 1)
            let served = try await store.export(device: "car", format: "trips").bytes
            await endpoint.stop(keepingFiles: true)
            stopped = true
            // What the migration of a new detector state leaves: nothing kept, every device to compute.
            let forget = "DELETE FROM stop_checkpoints; DELETE FROM stops; DELETE FROM trips;"
            let neverComputed = "UPDATE stop_detectors SET state = NULL, checkpointed = NULL, dirty_from = "
            switch kind {
            case .sqlite:
                let queue = try DatabaseQueue(path: database)
                try await queue.write { db in
                    try db.execute(sql: forget)
                    try db.execute(sql: neverComputed + "?", arguments: [StoredStops.neverComputed])
                }
                try queue.close()
            case .postgres:
                let cluster = try await Postgres.shared()
                let name = try #require(endpoint.createdDatabase)
                _ = try await offThePool {
                    try cluster.psql(
                        forget + "DELETE FROM stop_marks;" + neverComputed + "\(StoredStops.neverComputed)",
                        database: name)
                }
            }

            let trips = try await TrackDatabase(database).exportTrail(
                device: "car", from: -.infinity, to: .infinity, format: "trips", maximumAccuracy: 500)
            #expect(trips.bytes == served)
            let reopened = try await openTrackStore(database, clock: WallClock())
            #expect(try await reopened.storedStops(device: "car", from: -.infinity, to: .infinity) == kept)
            #expect(try await Self.marks(reopened, "car").isEmpty)
            await reopened.close()
        } catch {
            Issue.record(error)
        }
        if stopped { await endpoint.removeFiles() } else { await endpoint.stop() }
    }

    /// A jump at the very end of a trail: stored, marked `pending` (out of the trail and the map's
    /// line, out of stops and trips: the same answers as without it) until the next point says what
    /// it was: a jump (it comes back) or a real move (the device is there).
    @Test(arguments: StoreKind.allCases)
    func aJumpAtTheEndIsPendingUntilTheNextPoint(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let store = endpoint.server.store
            let far = Geodesy.destination(from: Self.home, bearing: 90, distance: 5000)
            func away(_ device: String, _ time: Double, sequence: Int64) -> TrailRecord {
                TrailRecord(
                    device: device, sequence: sequence, time: time, latitude: far.latitude, longitude: far.longitude,
                    horizontalAccuracy: 10)
            }
            // "back" jumps and comes back; "moved" goes there (its next point, an hour later, is there
            // too); "clean" never sent the far point.
            for device in ["back", "moved", "clean"] {
                var points = Self.stay(device: device, start: Self.t0, minutes: 10)
                if device != "clean" { points.append(away(device, Self.t0 + 602, sequence: 1000)) }
                let body = Overland.encode(device: device, records: points)
                let answer = try await raw.send(
                    .POST, "/api/v1/overland/batches", body: String(decoding: body, as: UTF8.self))
                try #require(answer.status == 200, "\(answer.body)")
            }
            await store.storedStopsSettled()
            let end = Self.t0 + 602
            for device in ["back", "moved"] {
                #expect(try await Self.marks(store, device) == [end: "pending"], "\(device)")
                #expect(try await store.trail(device: device).last?.time == Self.t0 + 595)
                let report = try await store.stops(device: device)
                let clean = try await store.stops(device: "clean")
                #expect(report.stops == clean.stops && report.trips == clean.trips)
                #expect(try await store.readTimeStops(device: device).stops == clean.stops)
                // On the wire: left out by default, shown marked on request.
                let shown = try await raw.send(
                    .GET, "/v1/devices/\(device)/trail?format=json&from=\(ISOTime.string(end))&outliers=show")
                #expect(shown.body.contains(#""outlier":"pending""#), "\(shown.body)")
                let hidden = try await raw.send(
                    .GET, "/v1/devices/\(device)/trail?format=json&from=\(ISOTime.string(end))")
                #expect(hidden.status == 200 && !hidden.body.contains(#""outlier""#), "\(hidden.body)")
            }

            // The next points say what it was.
            let back = Self.stay(device: "back", start: Self.t0 + 605, minutes: 1, sequence: 2000)
            _ = try await store.insert(back, format: "osmand", received: Self.t0 + 700)
            _ = try await store.insert(
                [away("moved", Self.t0 + 4200, sequence: 2000)], format: "osmand", received: Self.t0 + 4200)
            await store.storedStopsSettled()
            #expect(try await Self.marks(store, "back") == [end: "jump"])
            #expect(try await Self.marks(store, "moved").isEmpty)
            #expect(try await store.trail(device: "moved").contains { $0.time == end })
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }
}
