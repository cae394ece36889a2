import EndpointEvents
import Formats
import Foundation
import Geo
import KeepTrackTesting
import LocationService
import Logging
import NIOHTTP1
import Synchronization
import Testing
import TrackServerTesting
import TrackStore

@testable import TrackServer

/// Issue 38, item 5: visits named by a reverse geocoder speaking Nominatim's `/reverse?format=jsonv2`,
/// here a fake on 127.0.0.1 answering Nominatim's JSON: one request a second at most (a manual
/// clock), a `User-Agent`, answers kept by cell, failures leaving the name empty, no geocoder no calls.
@Suite("Endpoint: place names", .serialized)
struct PlaceNamesTests {
    /// Nominatim's jsonv2 answers, by the cell asked (its shape as nominatim.openstreetmap.org answers;
    /// the café's and the office's places of ``StopsEndpointTests``).
    static let answers: [String: String] = [
        "48137:11575": #"""
        {"place_id":142339476,"licence":"Data © OpenStreetMap contributors, ODbL 1.0. http://osm.org/copyright","osm_type":"way","osm_id":4061823,"lat":"48.1373932","lon":"11.5754485","category":"highway","type":"pedestrian","place_rank":26,"importance":0.10001,"addresstype":"road","name":"Marienplatz","display_name":"Marienplatz, Altstadt, Altstadt-Lehel, München, Bayern, 80331, Deutschland","address":{"road":"Marienplatz","quarter":"Altstadt","suburb":"Altstadt-Lehel","city":"München","state":"Bayern","postcode":"80331","country":"Deutschland","country_code":"de"},"boundingbox":["48.1370","48.1377","11.5748","11.5762"]}
        """#,
        "48148:11575": #"""
        {"place_id":140727040,"licence":"Data © OpenStreetMap contributors, ODbL 1.0. http://osm.org/copyright","osm_type":"node","osm_id":2469352513,"lat":"48.1478","lon":"11.5750","category":"building","type":"yes","place_rank":30,"importance":9.99999999995449e-06,"addresstype":"building","name":"","display_name":"12, Türkenstraße, Maxvorstadt, München, Bayern, 80333, Deutschland","address":{"house_number":"12","road":"Türkenstraße","suburb":"Maxvorstadt","city":"München","state":"Bayern","postcode":"80333","country":"Deutschland","country_code":"de"},"boundingbox":["48.1477","48.1479","11.5749","11.5751"]}
        """#,
        "0:0": #"{"error":"Unable to geocode"}"#,
    ]

    @Test func theGeocoderAsksOnceASecondWithAUserAgentAndKeepsItsAnswersByCell() async throws {
        let fake = try await FakeNominatim(answers: Self.answers)
        let dir = temporaryDirectory()
        let store = try SQLiteTrackStore(path: dir + "/places.sqlite")
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_800_000_000))
        let geocoder = ReverseGeocoder(base: fake.url + "/", store: store, clock: clock, logger: Logger(label: "test"))
        let running = Task { try await geocoder.run() }
        defer { running.cancel() }
        let marienplatz = Coordinate(latitude: 48.13739, longitude: 11.57545)
        let office = Coordinate(latitude: 48.1478, longitude: 11.5750)
        geocoder.ask(device: "d", marienplatz)
        geocoder.ask(device: "d", office)
        geocoder.ask(device: "d", Coordinate(latitude: 0.0001, longitude: 0.0001))
        geocoder.ask(device: "d", Coordinate(latitude: 10, longitude: 10))
        await geocoder.requestsMade(1)
        // The second waits for the clock: one request a second.
        await clock.sleepers(atLeast: 1)
        #expect(clock.nextDeadline == EpochInstant(secondsSince1970: 1_800_000_001))
        #expect(fake.count == 1)
        for n in 2...4 {
            clock.advance(by: .seconds(1))
            await geocoder.requestsMade(n)
        }
        #expect(fake.count == 4)
        let seen = fake.seen.requests.withLock { $0 }
        #expect(seen.allSatisfy { $0.agent.hasPrefix("keeptrack/") && $0.query.contains("format=jsonv2") })
        let names = try await store.placeNames([
            PlaceCell(marienplatz), PlaceCell(office), PlaceCell(Coordinate(latitude: 0, longitude: 0)),
            PlaceCell(Coordinate(latitude: 10, longitude: 10)),
        ])
        #expect(names[PlaceCell(marienplatz)] == .some("Marienplatz"))
        #expect(names[PlaceCell(office)] == .some("Türkenstraße 12"))
        // "Unable to geocode": answered, no name. A failure (500): not kept, asked again later.
        #expect(names[PlaceCell(Coordinate(latitude: 0, longitude: 0))] == .some(nil))
        #expect(names[PlaceCell(Coordinate(latitude: 10, longitude: 10))] == nil)
        // A cell answered is never asked again.
        geocoder.ask(device: "d", marienplatz)
        geocoder.ask(device: "d", Coordinate(latitude: 10, longitude: 10))  // failed lately: not queued
        #expect(geocoder.waiting <= 1)
        running.cancel()
        _ = try? await running.value
        await store.close()
        await fake.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// The endpoint with `--geocoder`: the stops found at ingest are named in the background, and
    /// `/stops`, `/trips` and `/stats` give the names; the open visit is asked for when read.
    @Test(arguments: StoreKind.allCases) func theEndpointNamesItsVisitsInTheBackground(kind: StoreKind) async throws {
        let fake = try await FakeNominatim(answers: Self.answers)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_800_000_000))
        let endpoint = try await Endpoint.start(store: kind, clock: clock) { $0.geocoder = fake.url }
        let raw = Raw(endpoint: endpoint)
        do {
            let geocoder = try #require(endpoint.server.geocoder)
            let (status, _) = try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("p"))
            #expect(status == 200)
            await endpoint.server.store.storedStopsSettled()
            await geocoder.requestsMade(1)
            var stops = try await raw.send(.GET, "/v1/devices/p/stops").body
            #expect(stops.contains("\"place\":\"Marienplatz\""), "\(stops)")
            #expect(stops.contains("\"place\":null"))
            clock.advance(by: .seconds(1))
            await geocoder.requestsMade(2)
            stops = try await raw.send(.GET, "/v1/devices/p/stops").body
            #expect(stops.contains("\"place\":\"Türkenstraße 12\""), "\(stops)")
            let trips = try await raw.send(.GET, "/v1/devices/p/trips").body
            #expect(trips.contains("\"startPlace\":\"Marienplatz\",\"endPlace\":\"Türkenstraße 12\""), "\(trips)")
            let stats = try await raw.send(.GET, "/v1/devices/p/stats").body
            #expect(stats.contains("\"visits\":2,\"maxSpeed\":") && stats.contains("\"places\":2}"), "\(stats)")
            #expect(fake.count == 2)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
        await fake.stop()
    }

    /// A circle geofence as `PUT /v1/geofences/{name}` takes it, for `devices` (nil: every device).
    static func circle(_ name: String, _ c: Coordinate, radius: Double, devices: [String]? = nil) -> String {
        let only = devices.map { #","devices":["\#($0.joined(separator: #"",""#))"]"# } ?? ""
        return #"{"type":"Feature","id":"\#(name)","geometry":{"type":"Point","coordinates":"#
            + #"[\#(c.longitude),\#(c.latitude)]},"properties":{"radius":\#(radius)\#(only)}}"#
    }

    static let cafe = Coordinate(latitude: 48.137, longitude: 11.575)
    static let office = Coordinate(latitude: 48.1478, longitude: 11.575)

    /// The places of `/stops` in order (`nil`: unnamed).
    static func places(_ body: String) throws -> [String?] {
        let stops = try StopsEndpointTests.json(body)["stops"] as? [[String: Any]] ?? []
        return stops.map { $0["place"] as? String }
    }

    /// Issue 38, item 5 (a): the endpoint's own geofences (`PUT /v1/geofences/{name}`, the events'
    /// store) name the visits inside them, the smallest first, without any geocoder; another device's
    /// geofence names nothing; a geofence removed names no visit read after (names are read-time:
    /// old visits and new ones alike).
    @Test(arguments: StoreKind.allCases) func theEndpointsGeofencesNameTheVisitsInsideThem(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            #expect(endpoint.server.geocoder == nil)
            #expect(endpoint.server.store is any PlaceAreaSource)
            for (name, body) in [
                ("cafe", Self.circle("cafe", Self.cafe, radius: 100)),
                ("city", Self.circle("city", Self.cafe, radius: 3000)),
                ("desk", Self.circle("desk", Self.office, radius: 100, devices: ["q"])),
            ] {
                let put = try await raw.send(.PUT, "/v1/geofences/\(name)", body: body)
                #expect(put.status == 201, "\(put.body)")
            }
            #expect(try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("p")).status == 200)
            await endpoint.server.store.storedStopsSettled()
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/p/stops").body) == ["cafe", "city"])
            let trips = try await raw.send(.GET, "/v1/devices/p/trips").body
            #expect(trips.contains(#""startPlace":"cafe","endPlace":"city""#), "\(trips)")
            let stats = try await raw.send(.GET, "/v1/devices/p/stats").body
            #expect(stats.contains("\"places\":2}"), "\(stats)")
            // The geofence for device q only names q's visit there.
            #expect(try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("q")).status == 200)
            await endpoint.server.store.storedStopsSettled()
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/q/stops").body) == ["cafe", "desk"])
            // Removed: no visit is named by it any more, a new device's included.
            #expect(try await raw.send(.DELETE, "/v1/geofences/cafe").status == 204)
            #expect(try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("r")).status == 200)
            await endpoint.server.store.storedStopsSettled()
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/r/stops").body) == ["city", "city"])
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/p/stops").body) == ["city", "city"])
            #expect(try await raw.send(.DELETE, "/v1/geofences/city").status == 204)
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/r/stops").body) == [nil, nil])
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// A trip's ends are named as the visits it leaves and reaches, not by its own first and last
    /// points (which lie off the visits' centres): a geofence that holds a visit's centre and not the
    /// trip's end names both alike.
    @Test(arguments: StoreKind.allCases) func aTripsEndsAreNamedAsItsVisits(kind: StoreKind) async throws {
        let points = StoredStopsTests.trail(seed: 5, device: "p", segments: 40)
        var accumulator = StopsAccumulator()
        for p in points where p.kind == .location {
            accumulator.add(
                time: p.time, latitude: p.latitude, longitude: p.longitude, accuracy: p.horizontalAccuracy,
                speed: p.speed)
        }
        let expected = accumulator.finish(at: points.last!.time)
        // The trip that starts farthest from its visit's centre.
        var farthest: (trip: Trip, visit: Visit, apart: Double)?
        for trip in expected.trips {
            guard let visit = expected.stops.first(where: { $0.departure == trip.start }) else { continue }
            let apart = Geodesy.distance(visit.coordinate, trip.startCoordinate)
            if apart > farthest?.apart ?? -1 { farthest = (trip, visit, apart) }
        }
        let (trip, visit, apart) = try #require(farthest)
        // The test means something only when the trip's start is off the visit's centre.
        try #require(apart > 4, "the trip starts \(apart) m from its visit's centre")
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        do {
            let put = try await raw.send(
                .PUT, "/v1/geofences/door", body: Self.circle("door", visit.coordinate, radius: apart / 2))
            #expect(put.status == 201, "\(put.body)")
            _ = try await endpoint.server.store.insert(points, format: "osmand", received: points[0].time)
            await endpoint.server.store.storedStopsSettled()
            let stops = try StopsEndpointTests.json(try await raw.send(.GET, "/v1/devices/p/stops").body)
            let start = ISOTime.string(trip.start)
            let stopList: [[String: Any]] = stops["stops"] as? [[String: Any]] ?? []
            let named: [String: Any]? = stopList.first { ($0["end"] as? String) == start }
            #expect(named?["place"] as? String == "door", "\(stops)")
            let trips = try StopsEndpointTests.json(try await raw.send(.GET, "/v1/devices/p/trips").body)
            let tripList: [[String: Any]] = trips["trips"] as? [[String: Any]] ?? []
            let answered: [String: Any]? = tripList.first { ($0["start"] as? String) == start }
            #expect(answered?["startPlace"] as? String == "door", "\(String(describing: answered))")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Areas before the geocoder: with `--geocoder`, a visit inside a geofence gets its name and its
    /// cell is never asked; the visit outside every geofence is the geocoder's.
    @Test(arguments: StoreKind.allCases) func aGeofenceNamesItsVisitBeforeTheGeocoderIsAsked(kind: StoreKind)
        async throws
    {
        let fake = try await FakeNominatim(answers: Self.answers)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_800_000_000))
        let endpoint = try await Endpoint.start(store: kind, clock: clock) { $0.geocoder = fake.url }
        let raw = Raw(endpoint: endpoint)
        do {
            let geocoder = try #require(endpoint.server.geocoder)
            let put = try await raw.send(.PUT, "/v1/geofences/cafe", body: Self.circle("cafe", Self.cafe, radius: 100))
            #expect(put.status == 201, "\(put.body)")
            #expect(try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("p")).status == 200)
            await endpoint.server.store.storedStopsSettled()
            // The café's visit, finished at ingest, was handed to the geocoder first; the open visit
            // at the office is handed to it when read. Only the office's is asked.
            #expect(try Self.places(try await raw.send(.GET, "/v1/devices/p/stops").body) == ["cafe", nil])
            await geocoder.requestsMade(1)
            #expect(
                try Self.places(try await raw.send(.GET, "/v1/devices/p/stops").body) == ["cafe", "Türkenstraße 12"])
            #expect(fake.count == 1 && geocoder.waiting == 0)
            let asked = fake.seen.requests.withLock { $0.map(\.query) }
            #expect(asked.count == 1 && asked[0].contains("lat=48.14"), "\(asked)")
            #expect(try await endpoint.server.store.placeNames([PlaceCell(Self.cafe)]).isEmpty)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
        await fake.stop()
    }

    /// The set's own answer: nested areas smallest first (a polygon's area against a circle's),
    /// boundaries inside, another device's geofence left out.
    @Test func aGeofenceSetNamesThePlacesInsideItsGeofencesSmallestFirst() throws {
        let c = Self.cafe
        let square = try Region(
            id: "block",
            ring: [
                Coordinate(latitude: c.latitude - 0.002, longitude: c.longitude - 0.003),
                Coordinate(latitude: c.latitude - 0.002, longitude: c.longitude + 0.003),
                Coordinate(latitude: c.latitude + 0.002, longitude: c.longitude + 0.003),
                Coordinate(latitude: c.latitude + 0.002, longitude: c.longitude - 0.003),
            ])
        let set = GeofenceSet([
            Geofence(region: try Region(id: "city", center: c, radius: 3000)),
            Geofence(region: square),  // about 445 m × 446 m: between the two circles
            Geofence(region: try Region(id: "cafe", center: c, radius: 100)),
            Geofence(region: try Region(id: "mine", center: c, radius: 50), devices: ["q"]),
        ])
        #expect(set.names(containing: c, device: "p") == ["cafe", "block", "city"])
        #expect(set.names(containing: c, device: "q") == ["mine", "cafe", "block", "city"])
        #expect(set.names(containing: Self.office, device: "p") == ["city"])
        #expect(set.names(containing: Coordinate(latitude: 0, longitude: 0), device: "p").isEmpty)
        #expect(GeofenceSet().names(containing: c, device: "p").isEmpty)
    }

    @Test func withoutAGeocoderThereAreNoNamesAndNoCalls() async throws {
        let fake = try await FakeNominatim(answers: Self.answers)
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        do {
            #expect(endpoint.server.geocoder == nil)
            _ = try await raw.send(.POST, "/v1/locations", body: StopsEndpointTests.batch("p"))
            let stops = try await raw.send(.GET, "/v1/devices/p/stops").body
            #expect(stops.contains("\"place\":null") && !stops.contains("Marienplatz"))
            #expect(fake.count == 0)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
        await fake.stop()
    }
}
