import Formats
import Foundation
import Geo
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 27, item 4: `GET /v1/devices/{id}/stops` and `/trips`, computed from stored points by the
/// device's own detector, on both stores.
@Suite("Endpoint: stops and trips", .serialized)
struct StopsEndpointTests {
    /// Ten minutes at a café (1 Hz, metres of deterministic wander, a 40 m multipath jump), a 1.2 km
    /// ride of four minutes with a 30 s stop at a light, ten minutes at the office, and a last minute
    /// there: two visits and the trip between.
    static let points: [(time: Double, lat: Double, lon: Double, acc: Double)] = {
        var out: [(Double, Double, Double, Double)] = []
        let t0 = 1_715_670_000.0
        let cafe = Coordinate(latitude: 48.137, longitude: 11.575)
        let office = Coordinate(latitude: 48.1478, longitude: 11.575)
        var rng = SeededRandom(seed: 27)
        func wander(_ c: Coordinate, _ metres: Double) -> Coordinate {
            Coordinate(
                latitude: c.latitude + (Double.random(in: 0..<1, using: &rng) - 0.5) * metres / 111_000,
                longitude: c.longitude + (Double.random(in: 0..<1, using: &rng) - 0.5) * metres / 74_000)
        }
        for s in 0..<600 {
            let c =
                (300..<304).contains(s) ? wander(Coordinate(latitude: 48.13736, longitude: 11.575), 4) : wander(cafe, 6)
            out.append((t0 + Double(s), c.latitude, c.longitude, 5))
        }
        for s in 0..<240 {
            // 30 s still at a light halfway.
            let progress = s < 105 ? Double(s) / 210 : s < 135 ? 0.5 : Double(s - 30) / 210
            let lat = cafe.latitude + (office.latitude - cafe.latitude) * min(progress, 1)
            out.append((t0 + 600 + Double(s), lat, cafe.longitude, 5))
        }
        for s in 0..<660 {
            let c = wander(office, 6)
            out.append((t0 + 840 + Double(s), c.latitude, c.longitude, 5))
        }
        return out
    }()

    /// What the detector decides on the points, as the device would.
    static func expected() -> StopsReport {
        var accumulator = StopsAccumulator()
        for p in points {
            accumulator.add(time: p.time, latitude: p.lat, longitude: p.lon, accuracy: p.acc, speed: nil)
        }
        return accumulator.finish(at: points.last!.time)
    }

    static func batch(_ device: String, from: Int = 0, to: Int = points.count) -> String {
        let records = (from..<to).map { i in
            let p = points[i]
            return #"{"seq":\#(i + 1),"kind":"location","time":"\#(ISOTime.string(p.time))","lat":\#(p.lat),"#
                + #""lon":\#(p.lon),"hAcc":\#(p.acc)}"#
        }
        return #"{"device":"\#(device)","records":[\#(records.joined(separator: ","))]}"#
    }

    static func json(_ body: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] ?? [:]
    }

    @Test func theFixtureTrailHasTwoVisitsAndATrip() {
        let e = Self.expected()
        #expect(e.stops.count == 2)
        #expect(e.stops.first?.departure != nil && e.stops.last?.departure == nil)
        #expect(e.trips.count == 1)
        #expect(abs((e.trips.first?.distance ?? 0) - 1200) < 60)
    }

    /// Stops and trips as the detector finds them on the same points, for a device that sent our
    /// batch and for one whose points came as OsmAnd; `from`/`to` limit the points used.
    /// A phone's day: home, work, lunch, work, home, a fix every 2 minutes at rest and every 10 to
    /// 15 s on the way (as a phone paces itself).
    static let phoneDay: [(time: Double, lat: Double, lon: Double)] = {
        var out: [(Double, Double, Double)] = []
        var rng = SeededRandom(seed: 7)
        let day = 1_796_083_200.0  // 2026-12-01T00:00:00Z
        let home = (48.1372, 11.5755), work = (48.1372, 11.6425), lunch = (48.1444, 11.6425)
        func at(_ h: Int, _ m: Int) -> Double { day + Double(h * 3600 + m * 60) }
        func stay(_ p: (Double, Double), _ a: Double, _ b: Double, step: Double = 120) {
            var t = a
            while t < b {
                let dlat = (Double.random(in: 0..<1, using: &rng) - 0.5) * 6e-5
                let dlon = (Double.random(in: 0..<1, using: &rng) - 0.5) * 8e-5
                out.append((t, p.0 + dlat, p.1 + dlon))
                t += step
            }
        }
        func move(_ p: (Double, Double), _ q: (Double, Double), _ a: Double, _ b: Double, step: Double = 10) {
            let n = Int((b - a) / step)
            for i in 0..<n {
                let f = Double(i) / Double(n)
                out.append((a + Double(i) * step, p.0 + (q.0 - p.0) * f, p.1 + (q.1 - p.1) * f))
            }
        }
        stay(home, at(6, 0), at(7, 30))
        move(home, work, at(7, 30), at(7, 50))
        stay(work, at(7, 50), at(11, 0))
        move(work, lunch, at(11, 0), at(11, 12), step: 15)
        stay(lunch, at(11, 12), at(11, 45), step: 60)
        move(lunch, work, at(11, 45), at(11, 57), step: 15)
        stay(work, at(11, 57), at(16, 0))
        move(work, home, at(16, 0), at(16, 20))
        stay(home, at(16, 20), at(22, 0))
        return out
    }()

    /// Points that arrive out of order a few at a time (OsmAnd's queue of eight sent newest first,
    /// one request each, over HTTP as Traccar Client sends them) move a stop's arrival as the
    /// detector runs again over them: its events are still told once each, as for the same points
    /// in order.
    @Test(arguments: StoreKind.allCases) func stopEventsAreToldOnceWhenPointsArriveOutOfOrder(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let store = endpoint.server.store
            func record(_ device: String, _ i: Int) -> TrailRecord {
                let p = Self.phoneDay[i]
                return TrailRecord(
                    device: device, sequence: Int64(i + 1), time: p.time, latitude: p.lat, longitude: p.lon,
                    horizontalAccuracy: 8)
            }
            _ = try await store.insert(
                Self.phoneDay.indices.map { record("in-order", $0) }, format: "osmand",
                received: Self.phoneDay.last!.time)
            for start in stride(from: 0, to: Self.phoneDay.count, by: 8) {
                for i in (start..<min(start + 8, Self.phoneDay.count)).reversed() {
                    // As Traccar Client sends it: one OsmAnd request a fix.
                    let p = Self.phoneDay[i]
                    let osmand = "/?id=newest-first&timestamp=\(Int(p.time))&lat=\(p.lat)&lon=\(p.lon)&accuracy=8"
                    let answer = try await raw.send(.GET, osmand)
                    try #require(answer.status == 200, "\(answer.body)")
                    if let pg = store as? PostgresTrackStore { await pg.storedStopsSettled() }
                }
            }
            if let pg = store as? PostgresTrackStore { await pg.storedStopsSettled() }
            func kinds(_ device: String) async throws -> [String] {
                let answer = try await raw.send(
                    .GET, "/v1/events?device=\(device)&kind=stopStart,stopEnd,tripEnd&limit=1000")
                let events = try Self.json(answer.body)["events"] as? [[String: Any]] ?? []
                return events.compactMap { $0["kind"] as? String }
            }
            let inOrder = try await kinds("in-order")
            #expect(inOrder.filter { $0 == "stopStart" }.count == 4, "\(inOrder)")
            // The same events (a trip's end and the next stop's start share a time: their order is
            // their ids').
            let newestFirst = try await kinds("newest-first")
            #expect(newestFirst.sorted() == inOrder.sorted(), "\(inOrder) against \(newestFirst)")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    @Test(arguments: StoreKind.allCases) func stopsAndTripsAreTheDetectorsOnTheStoredPoints(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            #expect(try await raw.send(.POST, "/v1/locations", body: Self.batch("van1")).status == 200)
            let osmand = Self.points.enumerated().map { i, p in
                TrailRecord(
                    device: "phone", sequence: Int64(i + 1), time: p.time, latitude: p.lat, longitude: p.lon,
                    horizontalAccuracy: p.acc)
            }
            _ = try await endpoint.server.store.insert(osmand, format: "osmand", received: Self.points.last!.time)
            let e = Self.expected()
            for device in ["van1", "phone"] {
                let stops = try Self.json(try await raw.send(.GET, "/v1/devices/\(device)/stops").body)
                #expect(stops["device"] as? String == device)
                let list = stops["stops"] as? [[String: Any]] ?? []
                try #require(list.count == e.stops.count)
                for (got, want) in zip(list, e.stops) {
                    #expect(got["start"] as? String == ISOTime.string(want.arrival))
                    #expect((got["end"] as? String) == want.departure.map(ISOTime.string))
                    #expect(abs((got["lat"] as? Double ?? 0) - want.coordinate.latitude) < 1e-6)
                    #expect(abs((got["lon"] as? Double ?? 0) - want.coordinate.longitude) < 1e-6)
                    #expect(abs((got["radius"] as? Double ?? -1) - want.horizontalAccuracy) < 0.1)
                }
                #expect(list.last?["end"] is NSNull && list.last?["duration"] is NSNull)
                let trips = try Self.json(try await raw.send(.GET, "/v1/devices/\(device)/trips").body)
                let tripList = trips["trips"] as? [[String: Any]] ?? []
                try #require(tripList.count == 1)
                let t = e.trips[0]
                #expect(tripList[0]["start"] as? String == ISOTime.string(t.start))
                #expect(tripList[0]["end"] as? String == ISOTime.string(t.end))
                #expect(abs((tripList[0]["distance"] as? Double ?? 0) - t.distance) < 0.1)
                #expect(abs((tripList[0]["duration"] as? Double ?? 0) - t.duration) < 0.001)
                for key in ["avgSpeed", "maxSpeed", "startLat", "startLon", "endLat", "endLon"] {
                    #expect(tripList[0][key] is Double, "\(key)")
                }
            }
            // Only the office's points: one visit, no trip (its start is unknown).
            let from = ISOTime.string(Self.points[900].time)
            let later = try Self.json(try await raw.send(.GET, "/v1/devices/van1/stops?from=\(from)").body)
            #expect((later["stops"] as? [[String: Any]])?.map { $0["start"] as? String } == [from])
            let none = try Self.json(try await raw.send(.GET, "/v1/devices/van1/trips?from=\(from)").body)
            #expect((none["trips"] as? [Any])?.isEmpty == true)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// `format=gpx` on trips: one `<trk>` per trip with the trip's stored points; device tokens see
    /// their own device only; an unknown device is 404 and a bad query 400.
    @Test(arguments: StoreKind.allCases) func tripsAsGPXAndWhoMayAsk(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let van = try await endpoint.server.store.addCredential(device: "van1", now: Self.points[0].time)
            #expect(try await raw.send(.POST, "/v1/locations", body: Self.batch("van1"), token: van).status == 200)
            #expect(try await raw.send(.POST, "/v1/locations", body: Self.batch("van2")).status == 200)
            let gpx = try await raw.send(.GET, "/v1/devices/van1/trips?format=gpx", token: van)
            #expect(gpx.status == 200)
            #expect(gpx.body.components(separatedBy: "<trk>").count - 1 == 1)
            let t = Self.expected().trips[0]
            let inTrip = Self.points.filter { $0.time >= t.start && $0.time <= t.end }.count
            #expect(gpx.body.components(separatedBy: "<trkpt ").count - 1 == inTrip)
            #expect(gpx.body.contains("<type>trip</type>"))
            for path in ["stops", "trips"] {
                #expect(try await raw.send(.GET, "/v1/devices/van1/\(path)", token: van).status == 200)
                #expect(try await raw.send(.GET, "/v1/devices/van2/\(path)", token: van).status == 403)
                #expect(try await raw.send(.GET, "/v1/devices/van2/\(path)").status == 200)
                #expect(try await raw.send(.GET, "/v1/devices/van3/\(path)").status == 404)
                #expect(try await raw.send(.GET, "/v1/devices/van1/\(path)", token: "guess").status == 401)
                let bad = try await raw.send(.GET, "/v1/devices/van1/\(path)?from=yesterday")
                #expect(bad.status == 400 && bad.body.contains("from: 'yesterday'"))
                #expect(try await raw.send(.GET, "/v1/devices/van1/\(path)?to=1e400").status == 400)
            }
            #expect(try await raw.send(.GET, "/v1/devices/van1/stops?format=gpx").status == 400)
            #expect(try await raw.send(.GET, "/v1/devices/van1/trips?format=kml").status == 400)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Two `serve` instances on one PostgreSQL database answer the same stops and trips, whichever
    /// received the points (half each).
    @Test func twoInstancesOnOnePostgresAgree() async throws {
        let a = try await Endpoint.start(store: .postgres)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        let rawA = Raw(endpoint: a), rawB = Raw(endpoint: b)
        do {
            let half = Self.points.count / 2
            #expect(try await rawA.send(.POST, "/v1/locations", body: Self.batch("van1", to: half)).status == 200)
            #expect(try await rawB.send(.POST, "/v1/locations", body: Self.batch("van1", from: half)).status == 200)
            for path in ["stops", "trips", "trips?format=gpx"] {
                let fromA = try await rawA.send(.GET, "/v1/devices/van1/\(path)")
                let fromB = try await rawB.send(.GET, "/v1/devices/van1/\(path)")
                #expect(fromA.status == 200 && fromA.body == fromB.body)
            }
            let stops = try Self.json(try await rawB.send(.GET, "/v1/devices/van1/stops").body)
            #expect((stops["stops"] as? [Any])?.count == 2)
        } catch {
            Issue.record(error)
        }
        await rawA.close()
        await rawB.close()
        await b.stop()
        await a.stop()
    }

    /// Visit and trip records a device sent are stored with their span and come back in its trail;
    /// they are not points for the stops query.
    @Test(arguments: StoreKind.allCases) func visitAndTripRecordsComeBackInTheTrail(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let body =
                #"{"device":"van1","records":["#
                + #"{"seq":1,"kind":"visit","time":"2024-05-14T09:00:00.000Z","departure":null,"lat":48.1,"lon":11.5,"hAcc":4.5},"#
                + #"{"seq":2,"kind":"visit","time":"2024-05-14T09:00:00.000Z","departure":"2024-05-14T09:40:00.000Z","lat":48.1,"lon":11.5,"hAcc":5},"#
                + #"{"seq":3,"kind":"trip","time":"2024-05-14T09:40:00.000Z","end":"2024-05-14T09:50:00.000Z","lat":48.1,"lon":11.5,"#
                + #""endLat":48.2,"endLon":11.6,"distance":13400.5,"maxSpeed":19.5}]}"#
            let sent = try await raw.send(.POST, "/v1/locations", body: body)
            #expect(sent.status == 200 && sent.body.contains("\"accepted\":3"))
            let trail = try await raw.send(.GET, "/v1/devices/van1/trail?format=json").body
            #expect(
                trail.contains(
                    #""kind":"visit","time":"2024-05-14T09:00:00.000Z","lat":48.100000000,"lon":11.500000000,"alt":null,"hAcc":4.50,"vAcc":null,"speed":null,"course":null,"departure":null}"#
                ))
            #expect(trail.contains(#""departure":"2024-05-14T09:40:00.000Z"}"#))
            #expect(
                trail.contains(
                    #""end":"2024-05-14T09:50:00.000Z","endLat":48.200000000,"endLon":11.600000000,"distance":13400.5,"duration":600.000,"avgSpeed":22.334,"maxSpeed":19.500}"#
                ))
            let records = try await endpoint.server.store.trail(device: "van1")
            #expect(records.map(\.kind) == [.visit, .visit, .trip])
            #expect(
                records[2].span
                    == TrailRecord.Span(
                        end: 1_715_680_200, endLatitude: 48.2, endLongitude: 11.6,
                        distance: 13400.5, maximumSpeed: 19.5))
            let stops = try Self.json(try await raw.send(.GET, "/v1/devices/van1/stops").body)
            #expect((stops["stops"] as? [Any])?.isEmpty == true)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }
}
