import Formats
import Foundation
import Geo
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// Issue 38, item 3: `GET /v1/devices/{id}/stats`, from the buckets kept at ingest, is the sums of the
/// stored trips and visits (as `/trips` and `/stops` give them) over each period, on both stores,
/// whatever order the points came in, after retention, in any zone.
@Suite("Endpoint: statistics", .serialized)
struct StatisticsTests {
    /// The figures of `[start, end)` from the trips and visits themselves: a trip's metres split by its
    /// seconds in the period, the open visit up to `lastTime`.
    static func expected(_ report: StopsReport, lastTime: Double, start: Double, end: Double) -> [String: Double] {
        var distance = 0.0, moving = 0.0, stopped = 0.0, trips = 0, visits = 0, maxSpeed = -1.0
        var places = Set<String>()
        for t in report.trips {
            let overlap = max(0, min(t.end, end) - max(t.start, start))
            let starts = t.start >= start && t.start < end
            guard overlap > 0 || starts else { continue }
            trips += 1
            moving += overlap
            let d = t.end - t.start
            distance += d > 0 ? t.distance * overlap / d : t.distance
            maxSpeed = max(maxSpeed, t.maximumSpeed)
        }
        // Places: the visits within 50 m of one another, through chains of them, by every pair.
        var place = Array(report.stops.indices)
        var merged = true
        while merged {
            merged = false
            for i in report.stops.indices {
                for j in report.stops.indices where place[j] != place[i] {
                    if Geodesy.distance(report.stops[i].coordinate, report.stops[j].coordinate) <= 50 {
                        let low = min(place[i], place[j])
                        place = place.map { $0 == place[i] || $0 == place[j] ? low : $0 }
                        merged = true
                    }
                }
            }
        }
        for (k, v) in report.stops.enumerated() {
            let until = v.departure ?? max(v.arrival, lastTime)
            let overlap = max(0, min(until, end) - max(v.arrival, start))
            guard (v.arrival < end && until > start) || (v.arrival >= start && v.arrival < end) else { continue }
            visits += 1
            stopped += overlap
            places.insert("\(place[k])")
        }
        return [
            "distance": distance, "movingDuration": moving, "stoppedDuration": stopped, "trips": Double(trips),
            "visits": Double(visits), "maxSpeed": maxSpeed, "places": Double(places.count),
        ]
    }

    /// The time of the last point the detector took.
    static func lastTime(_ points: [TrailRecord]) -> Double {
        var d = VisitDetector()
        for p in points.sorted(by: { $0.time < $1.time }) {
            _ = d.process(
                VisitDetector.Sample(
                    time: p.time, coordinate: Coordinate(latitude: p.latitude, longitude: p.longitude),
                    horizontalAccuracy: p.horizontalAccuracy ?? -1, speed: p.speed ?? -1))
        }
        return d.lastTime ?? 0
    }

    static func get(_ raw: Raw, _ path: String) async throws -> [String: Any] {
        let (status, body) = try await raw.send(.GET, path)
        #expect(status == 200, "\(path): \(body)")
        return try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    /// Compares each period of an answer, and its totals, with the trips and visits.
    static func expectSums(
        _ answer: [String: Any], _ report: StopsReport, lastTime: Double, _ comment: Comment
    ) throws {
        let periods = try #require(answer["periods"] as? [[String: Any]])
        let totals = try #require(answer["totals"] as? [String: Any])
        for row in periods + [totals] {
            let start = try #require(ISOTime.parse(row["start"] as? String ?? ""))
            let end = try #require(ISOTime.parse(row["end"] as? String ?? ""))
            let want = expected(report, lastTime: lastTime, start: start, end: end)
            for (key, value) in want {
                let got: Double = key == "maxSpeed" ? (row[key] as? Double ?? -1) : (row[key] as? Double ?? .nan)
                let tolerance = key == "distance" ? 0.2 : key == "maxSpeed" ? 0.001 : 1
                #expect(abs(got - value) <= tolerance, "\(comment) \(key) \(row["start"] ?? "") \(got) \(value)")
            }
        }
        #expect(!periods.isEmpty, comment)
    }

    /// The property: seeded trails of a few days arriving in any order; every day, week and month, in
    /// UTC and in zones a quarter hour and a half hour off, is the stored trips' and visits' sums.
    @Test(arguments: StoreKind.allCases) func periodsAreTheSumsOfTheStoredTripsAndVisits(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let store = endpoint.server.store
            for seed in UInt64(1)...4 {
                let device = "dev\(seed)"
                let points = StoredStopsTests.trail(seed: seed, device: device, segments: 120)
                for batch in StoredStopsTests.arrivals(points, seed: seed) {
                    _ = try await store.insert(batch, format: "osmand", received: batch[0].time)
                }
                let report = try await store.stops(device: device)
                #expect(report.trips.count > 5, "seed \(seed): trips")
                let last = Self.lastTime(points)
                for (by, tz) in [
                    ("day", "UTC"), ("day", "Asia/Kathmandu"), ("week", "Asia/Kolkata"), ("month", "Europe/Berlin"),
                ] {
                    let answer = try await Self.get(raw, "/v1/devices/\(device)/stats?by=\(by)&tz=\(tz)")
                    #expect(answer["by"] as? String == by && answer["tz"] as? String == tz)
                    try Self.expectSums(answer, report, lastTime: last, "seed \(seed) \(by) \(tz)")
                }
                // A range that cuts into a trip or a visit, hours off the day.
                let from = (points[points.count / 3].time / 900).rounded(.up) * 900
                let to = (points[2 * points.count / 3].time / 900).rounded(.down) * 900
                let cut = try await Self.get(
                    raw, "/v1/devices/\(device)/stats?from=\(Int(from))&to=\(Int(to))&by=day")
                try Self.expectSums(cut, report, lastTime: last, "seed \(seed) cut")
                let totals = try #require(cut["totals"] as? [String: Any])
                #expect(ISOTime.parse(totals["start"] as? String ?? "") == from)
                // Off the quarter hours, the range is the quarter hours inside it: the same answer.
                let inside = try await Self.get(
                    raw, "/v1/devices/\(device)/stats?from=\(Int(from) - 600)&to=\(Int(to) + 600)&by=day")
                #expect(NSDictionary(dictionary: inside).isEqual(to: cut), "seed \(seed) off the quarter hours")
                // Within one quarter hour: no period, and totals of nothing there.
                let within = try await Self.get(
                    raw, "/v1/devices/\(device)/stats?from=\(Int(from) + 60)&to=\(Int(from) + 120)&by=day")
                let none = try #require(within["totals"] as? [String: Any])
                #expect((within["periods"] as? [Any])?.isEmpty == true && none["distance"] as? Double == 0)
                #expect(none["start"] as? String == none["end"] as? String, "\(none)")
            }
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Retention deletes the oldest points and the trips and visits before the first left: the
    /// statistics go with them.
    @Test(arguments: StoreKind.allCases) func retentionTakesTheStatisticsOfWhatItDeletes(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let store = endpoint.server.store
            let points = StoredStopsTests.trail(seed: 9, device: "old", segments: 120)
            _ = try await store.insert(points, format: "osmand", received: points[0].time)
            let before = try await Self.get(raw, "/v1/devices/old/stats")
            try Self.expectSums(before, try await store.stops(device: "old"), lastTime: Self.lastTime(points), "before")
            let cut = points[points.count / 2].time
            while try await store.deleteExpired(before: cut, limit: 500) > 0 {}
            let after = try await Self.get(raw, "/v1/devices/old/stats")
            let report = try await store.stops(device: "old")
            try Self.expectSums(after, report, lastTime: Self.lastTime(points), "after")
            let total = { (a: [String: Any]) in (a["totals"] as? [String: Any])?["trips"] as? Int ?? -1 }
            #expect(total(after) < total(before))
            #expect(total(after) == report.trips.count)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// What a client can get wrong gets a 400 naming it; another device's token 403; no device 404.
    @Test func badQueriesAreRefusedClearly() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        do {
            let points = StoredStopsTests.trail(seed: 3, device: "d", segments: 20)
            _ = try await endpoint.server.store.insert(points, format: "osmand", received: points[0].time)
            let other = try await endpoint.server.store.addCredential(device: "other", now: 0)
            for (query, status, words) in [
                ("by=year", 400, "by: 'year'"), ("tz=Mars/Olympus", 400, "tz: 'Mars/Olympus'"),
                ("from=99999999999999", 400, "from:"), ("from=../../etc", 400, "from:"),
                ("from=0&to=253402300000", 400, "3700 periods"),
                ("from=2000000000&to=1000000000", 400, "from: 2000000000 is after to: 1000000000"),
                ("tz=" + String(repeating: "A", count: 100), 400, "tz:"),
            ] {
                let (s, body) = try await raw.send(.GET, "/v1/devices/d/stats?\(query)")
                #expect(s == status && body.contains(words), "\(query): \(s) \(body)")
            }
            #expect(try await raw.send(.GET, "/v1/devices/none/stats").status == 404)
            #expect(try await raw.send(.GET, "/v1/devices/d/stats", token: other).status == 403)
            #expect(try await raw.send(.HEAD, "/v1/devices/d/stats").status == 200)
            // A date alone is its midnight UTC.
            let (dated, daysBody) = try await raw.send(.GET, "/v1/devices/d/stats?from=2015-01-01&to=2015-01-03")
            #expect(dated == 200 && daysBody.contains(#""start":"2015-01-01T00:00:00.000Z""#), "\(daysBody)")
            // With tz, a date alone is tz's midnight: three of New York's days across its clock change
            // (they were four stubs of UTC's bounds); a time with an offset, its `+` sent bare or encoded.
            for query in [
                "tz=America/New_York&from=2025-03-08&to=2025-03-11",
                "tz=America/New_York&from=2025-03-08T00:00:00-05:00&to=2025-03-11T00:00:00-04:00",
                "tz=America/New_York&from=2025-03-08T06:00:00+01:00&to=2025-03-11T05:00:00%2B01:00",
            ] {
                let answer = try await Self.get(raw, "/v1/devices/d/stats?\(query)")
                let starts = (answer["periods"] as? [[String: Any]])?.compactMap { $0["start"] as? String }
                #expect(
                    starts == ["2025-03-08T05:00:00.000Z", "2025-03-09T05:00:00.000Z", "2025-03-10T04:00:00.000Z"],
                    "\(query): \(starts ?? [])")
            }
            // Ten years of days is the most.
            let (s, body) = try await raw.send(
                .GET, "/v1/devices/d/stats?from=2015-01-01T00:00:00Z&to=2025-01-01T00:00:00Z")
            #expect(s == 200)
            let periods = (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["periods"]
            #expect((periods as? [Any])?.count == 3653)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Two visits 2 m apart on either side of a 0.001° cell's edge are one place (they were two); a
    /// third 200 m away is another; a named visit is its name's place.
    @Test func visitsCloserThanAStaysRadiusAreOnePlace() {
        let edge = 48.1375  // 48137.5 thousandths: the two round to different cells.
        let coordinates = [
            Coordinate(latitude: edge - 0.000009, longitude: 11.575),
            Coordinate(latitude: edge + 0.000009, longitude: 11.575),
            Coordinate(latitude: edge + 0.0018, longitude: 11.575),
            Coordinate(latitude: edge, longitude: 11.575),
        ]
        #expect(PlaceCell(coordinates[0]) != PlaceCell(coordinates[1]))
        let visits = coordinates.enumerated().map { i, c in
            Statistics.VisitSpan(arrival: Double(i) * 3600, end: Double(i) * 3600 + 600, coordinate: c)
        }
        let report = Statistics.report(
            Statistics.Source(visits: visits), periods: [(0, 86_400)], names: [nil, nil, nil, "cafe"])
        #expect(report.totals.visits == 4 && report.totals.places == 3)
    }
}
