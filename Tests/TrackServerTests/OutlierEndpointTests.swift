import Formats
import Foundation
import GPSInput
import Geo
import KeepTrackTesting
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// Issue 36 on the endpoint, both stores: a phone's trail with outliers (points at 0,0, cell-tower
/// fixes of 1,500 m, single points 300 km/h away) sent as Overland batches gives the stops, trips and
/// distances of the same trail without them; every injected point is stored, marked for what it is,
/// and shown only on request; smoothed trails on request.
@Suite("Endpoint: outliers marked, never dropped", .serialized)
struct OutlierEndpointTests {
    struct Truth: Decodable {
        struct TruthTrip: Decodable {
            var distance_m: Double
        }
        var trips: [TruthTrip]
    }

    /// The night fixture's fixes (a drive, two walks, four stays with drift and multipath), as a phone
    /// would send them.
    static func records(device: String) async -> [TrailRecord] {
        var out: [TrailRecord] = []
        for await element in NMEALogSource(options: .init(path: fixturePath("visits-night.nmea.gz"))) {
            guard let fix = element.fix, let location = Location(fix) else { continue }
            out.append(
                TrailRecord(
                    device: device, sequence: Int64(out.count + 1), time: location.timestamp,
                    latitude: location.coordinate.latitude, longitude: location.coordinate.longitude,
                    horizontalAccuracy: location.horizontalAccuracy >= 0 ? location.horizontalAccuracy : nil,
                    speed: location.speed >= 0 ? location.speed : nil))
        }
        return out
    }

    /// `records` with a phone's outliers injected (about one fix in 250 each), the trail without them,
    /// and the injected points' times and reasons. A spike replaces a genuine fix (the phone sent the
    /// spike instead of it).
    static func phoneLike(_ records: [TrailRecord], seed: UInt64) -> (
        trail: [TrailRecord], clean: [TrailRecord], injected: [(time: Double, reason: String)]
    ) {
        var random = SeededRandom(seed: seed)
        var trail: [TrailRecord] = []
        var clean: [TrailRecord] = []
        var injected: [(time: Double, reason: String)] = []
        for (i, r) in records.enumerated() {
            let next = i + 1 < records.count ? records[i + 1].time : r.time + 1
            switch random.next() % 250 {
            case 0 where next - r.time > 0.5:
                var zero = r
                (zero.time, zero.latitude, zero.longitude, zero.horizontalAccuracy) = (r.time + 0.4, 0, 0, 10)
                trail += [r, zero]
                clean.append(r)
                injected.append((zero.time, "no-position"))
            case 1 where next - r.time > 0.5:
                let away = Geodesy.destination(
                    from: Coordinate(latitude: r.latitude, longitude: r.longitude),
                    bearing: Double(random.next() % 360), distance: 1000 + Double(random.next() % 2000))
                var cell = r
                (cell.time, cell.latitude, cell.longitude, cell.horizontalAccuracy, cell.speed) =
                    (r.time + 0.6, away.latitude, away.longitude, 1500, nil)
                trail += [r, cell]
                clean.append(r)
                injected.append((cell.time, "inaccurate"))
            case 2
            where i > 0 && i + 1 < records.count && next - records[i - 1].time <= 2.5
                && injected.last?.time != records[i - 1].time:
                // 300 km/h (83.3 m/s) away from the fix before, both accuracies granted.
                let before = records[i - 1]
                let metres =
                    83.3 * (r.time - before.time) + (r.horizontalAccuracy ?? 20) + (before.horizontalAccuracy ?? 20)
                let to = Geodesy.destination(
                    from: Coordinate(latitude: before.latitude, longitude: before.longitude),
                    bearing: Double(random.next() % 360), distance: metres)
                var spike = r
                (spike.latitude, spike.longitude) = (to.latitude, to.longitude)
                trail.append(spike)
                injected.append((r.time, "jump"))
            default:
                trail.append(r)
                clean.append(r)
            }
        }
        return (trail, clean, injected)
    }

    static func json(_ body: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] ?? [:]
    }

    @Test(arguments: StoreKind.allCases)
    func aPhonesOutliersChangeNoStopTripOrDistanceAndAreAllStoredMarked(kind: StoreKind) async throws {
        let records = await Self.records(device: "phone")
        let (trail, clean, injected) = Self.phoneLike(records, seed: 36)
        #expect(injected.filter { $0.reason == "no-position" }.count >= 20)
        #expect(injected.filter { $0.reason == "inaccurate" }.count >= 20)
        #expect(injected.filter { $0.reason == "jump" }.count >= 20)
        let truth = try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("visits-night.truth.json"))))
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            // As Overland sends them: batches of 500, each device its own.
            for (device, points) in [("phone", trail), ("clean", clean)] {
                var moved = points
                for i in moved.indices { moved[i].device = device }
                for start in stride(from: 0, to: moved.count, by: 500) {
                    let body = Overland.encode(
                        device: device, records: Array(moved[start..<min(start + 500, moved.count)]))
                    let answer = try await raw.send(
                        .POST, "/api/v1/overland/batches", body: String(decoding: body, as: UTF8.self))
                    try #require(answer.status == 200, "\(answer.body)")
                }
            }
            await endpoint.server.store.storedStopsSettled()
            // The same stops and trips, to the digit, as the trail without the outliers.
            for what in ["stops", "trips"] {
                let phone = try await raw.send(.GET, "/v1/devices/phone/\(what)").body
                let without = try await raw.send(.GET, "/v1/devices/clean/\(what)").body
                #expect(phone.replacingOccurrences(of: #""device":"phone""#, with: #""device":"clean""#) == without)
            }
            let trips =
                try Self.json(try await raw.send(.GET, "/v1/devices/phone/trips").body)["trips"]
                as? [[String: Any]] ?? []
            try #require(trips.count == truth.trips.count)
            for (got, want) in zip(trips, truth.trips) {
                let distance = got["distance"] as? Double ?? 0
                #expect(abs(distance - want.distance_m) / want.distance_m < 0.05, "\(distance) of \(want.distance_m)")
                #expect((got["avgSpeed"] as? Double ?? 1) <= (got["maxSpeed"] as? Double ?? 0))
            }
            let total = trips.reduce(0) { $0 + ($1["distance"] as? Double ?? 0) }
            let trueTotal = truth.trips.reduce(0) { $0 + $1.distance_m }
            #expect(abs(total - trueTotal) / trueTotal < 0.03, "\(total) of \(trueTotal)")

            // Every point stored; the injected ones marked for what they are, the genuine ones not.
            let store = endpoint.server.store
            let all = try await store.trail(device: "phone", includeOutliers: true)
            #expect(all.count == trail.count)
            let marked = all.filter { $0.outlier != nil }.map { (ISOTime.string($0.time), $0.outlier!) }
            let expected = injected.map { (ISOTime.string($0.time), $0.reason) }
            #expect(marked.map(\.0) == expected.map(\.0))
            #expect(marked.map(\.1) == expected.map(\.1))
            #expect(try await store.trail(device: "phone").count == trail.count - injected.count)
            #expect(try await store.trail(device: "clean", includeOutliers: true).allSatisfy { $0.outlier == nil })

            // On the wire: left out by default, shown marked on request, out of GeoJSON's line.
            let from = ISOTime.string(injected[0].time)
            let hidden = try await raw.send(.GET, "/v1/devices/phone/trail?format=json&from=\(from)&limit=1")
            #expect(!hidden.body.contains(#""outlier""#))
            let shown = try await raw.send(
                .GET, "/v1/devices/phone/trail?format=json&from=\(from)&limit=1&outliers=show")
            #expect(shown.body.contains(#""outlier":"\#(injected[0].reason)""#), "\(shown.body)")
            let geo = try await raw.send(
                .GET, "/v1/devices/phone/trail?format=geojson&from=\(from)&limit=3&outliers=show")
            #expect(geo.body.contains(#""event":"outlier","reason":"\#(injected[0].reason)""#), "\(geo.body)")
            for bad in ["outliers=all", "smooth=gauss"] {
                #expect(try await raw.send(.GET, "/v1/devices/phone/trail?\(bad)").status == 400)
            }
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// `?smooth=kalman`: the same points at the same times, each moved to its smoothed position: a
    /// walk's noisy zigzag is shorter along them. Raw stays the default. `export --smooth` writes the
    /// same positions.
    @Test(arguments: StoreKind.allCases) func smoothedTrailsOnRequest(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            // A walk north at 1.4 m/s, 1 Hz, with 5 m of zigzag across it.
            let t0 = 1_715_670_000.0
            let records = (0..<300).map { (i: Int) -> TrailRecord in
                let north: Double = 1.4 * Double(i) / 111_195
                let across: Double = (i % 2 == 0 ? 5.0 : -5.0) / 74_000
                return TrailRecord(
                    device: "walker", sequence: Int64(i + 1), time: t0 + Double(i), latitude: 48.137 + north,
                    longitude: 11.575 + across, horizontalAccuracy: 8)
            }
            _ = try await endpoint.server.store.insert(records, format: "json", received: t0 + 300)
            func path(_ query: String) async throws -> (times: [String], length: Double, coordinates: [[Double]]) {
                let body = try await raw.send(.GET, "/v1/devices/walker/trail?format=geojson&limit=1000\(query)").body
                let feature = (try Self.json(body)["features"] as? [[String: Any]])?.first
                let coordinates = (feature?["geometry"] as? [String: Any])?["coordinates"] as? [[Double]] ?? []
                var length = 0.0
                for (a, b) in zip(coordinates, coordinates.dropFirst()) {
                    length += Geodesy.haversineDistance(
                        Coordinate(latitude: a[1], longitude: a[0]), Coordinate(latitude: b[1], longitude: b[0]))
                }
                let times = (feature?["properties"] as? [String: Any])?["times"] as? [String] ?? []
                return (times, length, coordinates)
            }
            let rawPath = try await path("")
            let smooth = try await path("&smooth=kalman")
            #expect(rawPath.coordinates.count == 300 && smooth.coordinates.count == 300)
            #expect(smooth.times == rawPath.times)
            // Raw: 300 zigzags of 10 m; smoothed: close to the 418.6 m walked.
            #expect(rawPath.length > 2500)
            #expect(smooth.length < 0.5 * rawPath.length, "\(smooth.length) of \(rawPath.length)")
            let exported = try await endpoint.server.store.export(device: "walker", format: "geojson", smooth: true)
            let feature =
                (try Self.json(String(decoding: exported.bytes, as: UTF8.self))["features"]
                as? [[String: Any]])?.first
            #expect((feature?["geometry"] as? [String: Any])?["coordinates"] as? [[Double]] == smooth.coordinates)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }
}
