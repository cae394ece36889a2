import Formats
import Geo
import Testing
import TrackServer
import TrackServerTesting

/// The stops as first written: from each anchor, walk forward point by point (O(n²) on clustered
/// points). The reference the fast version must agree with.
func referenceStops(_ records: [TrailRecord], radius: Double = 50, minimumDuration: Double = 300) -> [TrailSVG.Stop] {
    let points = records.filter { $0.kind == .location }
    var out: [TrailSVG.Stop] = []
    var i = 0
    while i < points.count {
        let anchor = Coordinate(latitude: points[i].latitude, longitude: points[i].longitude)
        var j = i
        while j + 1 < points.count,
            Geodesy.haversineDistance(
                anchor,
                Coordinate(
                    latitude: points[j + 1].latitude,
                    longitude: points[j + 1].longitude)) <= radius
        {
            j += 1
        }
        if points[j].time - points[i].time >= minimumDuration {
            let lat = points[i...j].reduce(0) { $0 + $1.latitude } / Double(j - i + 1)
            let lon = points[i...j].reduce(0) { $0 + $1.longitude } / Double(j - i + 1)
            out.append(
                .init(center: Coordinate(latitude: lat, longitude: lon), start: points[i].time, end: points[j].time))
            i = j + 1
        } else {
            i += 1
        }
    }
    return out
}

/// A walk that stops now and then: moves of a few metres, stays with GPS jitter, a jump now and then.
func wanderingTrail(seed: UInt64, count: Int) -> [TrailRecord] {
    var rng = SeededRandom(seed: seed)
    var lat = 48.1, lon = 11.5, t = 1_715_679_000.0
    var out: [TrailRecord] = []
    var staying = 0
    for _ in 0..<count {
        if staying > 0 {
            staying -= 1
            lat += Double.random(in: -2e-4...2e-4, using: &rng)
            lon += Double.random(in: -2e-4...2e-4, using: &rng)
        } else if Int.random(in: 0..<40, using: &rng) == 0 {
            staying = Int.random(in: 5...200, using: &rng)
        } else {
            lat += Double.random(in: -4e-4...4e-4, using: &rng)
            lon += Double.random(in: -4e-4...4e-4, using: &rng)
        }
        t += Double.random(in: 0.5...30, using: &rng)
        out.append(TrailRecord(device: "d", sequence: 0, time: t, latitude: lat, longitude: lon))
    }
    return out
}

@Suite("TrackServer: /map under many points")
struct MapTests {
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func stopsAgreeWithThePointByPointDefinition(seed: UInt64) {
        let trail = wanderingTrail(seed: seed, count: 1500)
        let fast = TrailSVG.stops(trail)
        let reference = referenceStops(trail)
        #expect(fast.count == reference.count)
        for (a, b) in zip(fast, reference) {
            #expect(a.start == b.start && a.end == b.end)
            #expect(
                abs(a.center.latitude - b.center.latitude) < 1e-9 && abs(a.center.longitude - b.center.longitude) < 1e-9
            )
        }
        #expect(!reference.isEmpty, "the trail has stops to find")
    }

    @Test func thinsOutTheLineAndSaysSo() {
        #expect(TrailSVG.decimatedIndices(count: 10, limit: 20) == Array(0..<10))
        #expect(TrailSVG.decimatedIndices(count: 10, limit: 4) == [0, 3, 6, 9])
        #expect(TrailSVG.decimatedIndices(count: 60_000, limit: 5_000).count == 5_000)
        let svg = TrailSVG.render(title: "d", records: walk(100), maxPoints: 10)
        #expect(svg.contains("10 of 100 points drawn"))
    }

    /// 60,000 points at one place within four minutes: each anchor's run reaches the end, which
    /// took the point-by-point version 85-101 s.
    @Test(arguments: StoreKind.allCases) func mapsSixtyThousandClusteredPoints(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let t0 = 1_715_679_000.0
        var rng = SeededRandom(seed: 42)
        let cluster = (0..<60_000).map { i in
            TrailRecord(
                device: "parked", sequence: Int64(i + 1), time: t0 + Double(i) * 0.004,
                latitude: 48.1 + Double.random(in: -1e-4...1e-4, using: &rng),
                longitude: 11.5 + Double.random(in: -1e-4...1e-4, using: &rng))
        }
        _ = try await endpoint.server.store.insert(cluster, format: "json", received: t0)
        let map = try await get(endpoint, "/map/svg?device=parked&limit=100000", guardSeconds: 240)
        #expect(status(map) == 200)
        #expect(body(map).contains("5000 of 60000 points drawn"))
        #expect(body(map).components(separatedBy: "<rect class=\"stop\"").count == 1, "stayed under 300 s: no stop")
        let paged = try await get(endpoint, "/map/svg?device=parked", guardSeconds: 240)
        #expect(body(paged).contains("5000 of 10000 points drawn"))
        #expect(body(paged).contains("rel=\"next\""))
        await endpoint.stop()
    }
}
