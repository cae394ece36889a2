import EndpointEvents
import Foundation
import Formats
import Geo
import KeepTrackTesting
import LocationService
import NMEA
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 37 on the endpoint: geofences managed by the admin, events decided at ingest and kept,
/// served by `/v1/events` and delivered to a real webhook receiver, on both stores.
@Suite("Endpoint: geofences, events and hooks", .serialized)
struct EventsEndpointTests {
    /// The day's fixture as the device records it: every fix with a position and an accuracy.
    static let day: [Location] = {
        var decoder = NMEADecoder()
        var out: [Location] = []
        try? decoder.decodeFile(fixturePath("day-24h.nmea.gz")) { fix in
            if let l = Location(fix), l.horizontalAccuracy >= 0 { out.append(l) }
        }
        return out
    }()

    /// What the device's own monitor decides on the day, as `kind region time`.
    static func deviceTransitions(_ regions: [Region]) -> [String] {
        var monitor = RegionMonitor()
        for r in regions { monitor.add(r) }
        var out: [String] = []
        for l in day {
            for e in monitor.process(l) {
                switch e {
                case .enter(let id, let t): out.append("geofenceEnter \(id) \(ISOTime.string(t))")
                case .exit(let id, let t): out.append("geofenceExit \(id) \(ISOTime.string(t))")
                case .dwell(let id, let t): out.append("geofenceDwell \(id) \(ISOTime.string(t))")
                case .state: break
                }
            }
        }
        return out.sorted()
    }

    static func json(_ body: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]) ?? [:]
    }

    /// Every event of `query`, page by page.
    static func events(_ raw: Raw, _ query: String, token: String? = "secret") async throws -> [[String: Any]] {
        var all: [[String: Any]] = []
        var cursor: String?
        repeat {
            let path = "/v1/events?\(query)&limit=7" + (cursor.map { "&cursor=\($0)" } ?? "")
            let answer = try await raw.send(.GET, path, token: token)
            try #require(answer.status == 200, "\(answer.body)")
            let page = json(answer.body)
            all += page["events"] as? [[String: Any]] ?? []
            cursor = page["next"] as? String
        } while cursor != nil
        return all
    }

    /// A day of the project's own making, uploaded in batches, with geofences around its places:
    /// every crossing is one enter and one exit event at the time the device's own monitor gives;
    /// a hook that wants them gets each once (by id, signed) at a receiver that answers 500 to every
    /// third post.
    @Test(arguments: StoreKind.allCases) func aDayWithGeofencesGivesTheDevicesCrossingsOnceEach(kind: StoreKind)
        async throws
    {
        let receiver = try await WebhookReceiver()
        let endpoint = try await Endpoint.start(store: kind) { c in
            c.events.allowPrivateHooks = true
            c.events.delivery.policy = .init(backoff: Backoff(initial: 0.05, maximum: 0.2), maximumAttempts: 50)
        }
        let raw = Raw(endpoint: endpoint)
        do {
            let document = try fixtureBytes("day-24h.regions.geojson")
            let regions = try RegionDefinition.parseGeoJSON(document).map { try Region($0) }
            let put = try await raw.send(.PUT, "/v1/geofences", body: String(decoding: document, as: UTF8.self))
            #expect(put.status == 200, "\(put.body)")
            let hook =
                #"{"type":"webhook","url":"\#(receiver.url("third"))","secret":"\#(WebhookReceiver.secret)","#
                + #""kinds":["geofenceEnter","geofenceExit"]}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/receiver", body: hook).status == 201)
            let records = Self.day.enumerated().map { i, l in
                TrailRecord(device: "van-1", sequence: Int64(i + 1), location: l)
            }
            for start in stride(from: 0, to: records.count, by: 600) {
                let batch = Array(records[start..<min(start + 600, records.count)])
                _ = try await endpoint.server.store.insert(
                    batch, format: "json", received: WallClock().now.secondsSince1970)
            }
            if let pg = endpoint.server.store as? PostgresTrackStore { await pg.storedStopsSettled() }
            let expected = Self.deviceTransitions(regions).filter { !$0.hasPrefix("geofenceDwell") }
            #expect(expected.count >= 8, "only \(expected.count) crossings: the day proves little")
            let stored = try await Self.events(raw, "device=van-1&kind=geofenceEnter,geofenceExit")
            let got = stored.map {
                "\($0["kind"] as? String ?? "") \($0["geofence"] as? String ?? "") \($0["time"] as? String ?? "")"
            }
            #expect(got.sorted() == expected)
            #expect(Set(stored.compactMap { $0["id"] as? String }).count == stored.count)
            // Each at the receiver once, signed, whatever the 500s.
            let posts = try await receiver.untilProcessed(expected.count)
            #expect(posts.allSatisfy { $0.valid })
            #expect(posts.contains { $0.status == 500 }, "the receiver never failed: the retries are untested")
            let processed = Set(posts.filter(\.first).map(\.id))
            #expect(processed == Set(stored.compactMap { $0["id"] as? String }))
            // Stops and trips are events too.
            let stops = try await Self.events(raw, "kind=stopStart,stopEnd,tripEnd")
            #expect(!stops.isEmpty)
            // A `from` after `to` is a 400, as on the trail's and the stops' routes.
            let backwards = try await raw.send(.GET, "/v1/events?from=2024-05-15&to=2024-05-14")
            #expect(backwards.status == 400)
            #expect(backwards.body.contains("from: 2024-05-15 is after to: 2024-05-14"), "\(backwards.body)")
            // A device token sees its own device's events only; geofences and hooks are the admin's.
            let token = try await endpoint.server.store.addCredential(device: "van-2", now: 0)
            #expect(try await Self.events(raw, "kind=geofenceEnter", token: token).isEmpty)
            #expect(try await raw.send(.GET, "/v1/events?device=van-1", token: token).status == 403)
            #expect(try await raw.send(.GET, "/v1/geofences", token: token).status == 403)
            #expect(try await raw.send(.PUT, "/v1/hooks/x", body: hook, token: token).status == 403)
            #expect(try await raw.send(.DELETE, "/v1/geofences/x", token: token).status == 403)
        } catch {
            Issue.record(error)
        }
        receiver.stop()
        await raw.close()
        await endpoint.stop()
    }

    /// `serve geofences add`'s store call: many geofences added and replaced in one transaction
    /// (PostgreSQL: several statements of 1,000), counting those that were new.
    @Test(arguments: StoreKind.allCases) func manyGeofencesArePutAtOnce(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            func circles(_ range: Range<Int>) throws -> [Geofence] {
                try range.map { i in
                    Geofence(
                        region: try Region(
                            id: "g\(i)", center: Coordinate(latitude: 48 + Double(i) * 1e-4, longitude: 11.5),
                            radius: 50 + Double(i % 7)))
                }
            }
            #expect(try await store.putGeofences(circles(0..<2_500)) == 2_500)
            #expect(try await store.putGeofences(circles(1_500..<4_000)) == 1_500)
            #expect(try await store.putGeofences([]) == 0)
            let stored = try await store.geofences()
            #expect(stored.count == 4_000)
            #expect(Set(stored.map(\.name)) == Set((0..<4_000).map { "g\($0)" }))
            #expect(stored.first { $0.name == "g1999" }?.region == (try circles(1_999..<2_000))[0].region)
            #expect(try await store.putGeofence(circles(3_999..<4_000)[0]) == false)
            #expect(try await store.putGeofence(circles(4_000..<4_001)[0]) == true)
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// The store never holds more geofences than a document may (100,000): a put past it is refused
    /// whole, over HTTP a 413, and ingest goes on (reading the set back would refuse it).
    @Test(arguments: StoreKind.allCases) func theStoreHoldsAtMostAHundredThousandGeofences(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        do {
            let store = endpoint.server.store
            let limit = GeofenceDocument.Limits().geofences
            func circle(_ i: Int) throws -> Geofence {
                Geofence(
                    region: try Region(
                        id: "g\(i)",
                        center: Coordinate(latitude: 40 + Double(i % 1000) * 1e-2, longitude: Double(i / 1000) * 1e-2),
                        radius: 50))
            }
            #expect(try await store.putGeofences((0..<limit).map(circle)) == limit)
            await #expect(throws: EventsError.self) { _ = try await store.putGeofences([try circle(limit)]) }
            #expect(try await store.putGeofence(try circle(7)) == false)  // a replacement is no more
            let raw = Raw(endpoint: endpoint)
            let put = try await raw.send(
                .PUT, "/v1/geofences/g\(limit)",
                body: String(decoding: GeofenceDocument.feature(try circle(limit)), as: UTF8.self))
            #expect(put.status == 413, "\(put.body)")
            #expect(put.body.contains("would hold 100001 geofences, more than 100000"), "\(put.body)")
            #expect(try await store.geofences().count == limit)
            let location =
                #"{"device":"a","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"lon":11.5}]}"#
            #expect(try await raw.send(.POST, "/v1/locations", body: location).status == 200)
            await raw.close()
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// Replacing a hook keeps its queue, and the answer says so, as GET does (it said none).
    @Test func aReplacedHooksAnswerHasItsQueue() async throws {
        let endpoint = try await Endpoint.start(store: .sqlite) { c in c.events.allowPrivateHooks = true }
        let raw = Raw(endpoint: endpoint)
        do {
            // A receiver that is not there: the entry waits.
            let hook = #"{"type":"webhook","url":"http://127.0.0.1:9/h","secret":"\#(WebhookReceiver.secret)"}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/h", body: hook).status == 201)
            var enter = TrailRecord(device: "van", sequence: 1, time: 1_715_679_000, latitude: 48.1, longitude: 11.5)
            (enter.kind, enter.region) = (.enter, "home")
            _ = try await endpoint.server.store.insert([enter], format: "json", received: 1_715_679_000)
            let replaced = try await raw.send(.PUT, "/v1/hooks/h", body: hook)
            #expect(replaced.status == 200)
            let got = try await raw.send(.GET, "/v1/hooks/h")
            #expect(Self.json(replaced.body)["pending"] as? Int == 1, "\(replaced.body)")
            #expect(
                Self.json(replaced.body)["pending"] as? Int == Self.json(got.body)["pending"] as? Int, "\(got.body)")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Bad geofence documents and hooks: a clear 4xx naming what is wrong, nothing stored half.
    @Test(arguments: StoreKind.allCases) func badGeofencesAndHooksAreRefusedWhole(kind: StoreKind) async throws {
        let receiver = try await WebhookReceiver()
        let endpoint = try await Endpoint.start(store: kind) { c in c.maxBodyBytes = 64 << 20 }
        let raw = Raw(endpoint: endpoint)
        do {
            let good =
                #"{"type":"Feature","id":"depot","geometry":{"type":"Point","coordinates":[11.5,48.1]},"#
                + #""properties":{"radius":100}}"#
            let bow =
                #"{"type":"Feature","id":"bow","geometry":{"type":"Polygon","coordinates":"#
                + #"[[[11.0,48.0],[11.1,48.1],[11.1,48.0],[11.0,48.1],[11.0,48.0]]]}}"#
            let nan =
                #"{"type":"Feature","id":"nan","geometry":{"type":"Point","coordinates":[NaN,48.1]},"#
                + #""properties":{"radius":100}}"#
            func document(_ features: String...) -> String {
                #"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#
            }
            let crossed = try await raw.send(.PUT, "/v1/geofences", body: document(good, bow))
            #expect(crossed.status == 400)
            #expect(crossed.body.contains("bow"), "\(crossed.body)")
            #expect(crossed.body.contains("\"error\""), "\(crossed.body)")
            #expect(try await raw.send(.PUT, "/v1/geofences", body: document(good, nan)).status == 400)
            // A property of the wrong type is refused, not taken as unset ("5m" is no dwell).
            for (property, said) in [
                (#""dwell":"5m""#, "properties.dwell must be a number of seconds"),
                (#""notifyOnEntry":"no""#, "properties.notifyOnEntry must be true or false"),
            ] {
                let typed =
                    #"{"type":"Feature","id":"typed","geometry":{"type":"Point","coordinates":[11.5,48.1]},"#
                    + #""properties":{"radius":100,\#(property)}}"#
                let answer = try await raw.send(.PUT, "/v1/geofences", body: document(good, typed))
                #expect(answer.status == 400 && answer.body.contains(said), "\(answer.body)")
            }
            // A polygon's document up to its first vertex, and the vertices after it.
            let opening =
                #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"huge","#
                + #""geometry":{"type":"Polygon","coordinates":[[[11,48]"#
            func vertices(_ n: Int) -> String { String(repeating: ",[11,48]", count: n) }
            // Ten million vertices (80 MB, over the 64 MiB this server takes): 413 from the head, the
            // body unread and the connection closed. Only its start is sent: a client sending all of
            // it may be reset when the server stops reading, the answer lost with the connection.
            let socket = try RawSocket(port: endpoint.port)
            socket.send(
                "PUT /v1/geofences HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                    + "Content-Type: application/geo+json\r\nContent-Length: \(opening.utf8.count + 80_000_000)\r\n\r\n"
                    + opening + vertices(1_000))
            let (answer, eof) = await socket.readToEnd()
            socket.close()
            #expect(answer.hasPrefix("HTTP/1.1 413"), "\(answer.prefix(200))")
            #expect(answer.contains("larger than 67108864 bytes"), "\(answer.prefix(400))")
            #expect(eof)
            // A polygon past the vertex bound, under the body limit: refused at the bound, not read
            // to the end.
            let huge = opening + vertices(49_999) + "]]}}]}"
            let tooLarge = try await raw.send(.PUT, "/v1/geofences", body: huge)
            #expect(tooLarge.status == 413, "\(tooLarge.body.prefix(200))")
            #expect(tooLarge.body.contains("10000 vertices"), "\(tooLarge.body.prefix(200))")
            #expect(try await endpoint.server.store.geofences().isEmpty)
            // A bare Feature to the collection would have replaced every geofence by it.
            let bare = try await raw.send(.PUT, "/v1/geofences", body: good)
            #expect(bare.status == 400 && bare.body.contains("PUT /v1/geofences/depot"), "\(bare.body)")
            #expect(try await raw.send(.PUT, "/v1/geofences", body: document(good)).status == 200)
            #expect(try await raw.send(.PUT, "/v1/geofences", body: document()).status == 200)
            // One at a time: the feature's id is the path's name.
            #expect(try await raw.send(.PUT, "/v1/geofences/depot", body: good).status == 201)
            #expect(try await raw.send(.PUT, "/v1/geofences/depot", body: good).status == 200)
            #expect(try await raw.send(.PUT, "/v1/geofences/other", body: good).status == 400)
            #expect(try await raw.send(.PUT, "/v1/geofences/bow", body: bow).status == 400)
            #expect(try await endpoint.server.store.geofences().map(\.name) == ["depot"])
            #expect(try await raw.send(.DELETE, "/v1/geofences/depot").status == 204)
            #expect(try await raw.send(.DELETE, "/v1/geofences/depot").status == 404)
            // Hooks: loopback refused unless private hooks are allowed; a bad secret named.
            let local = #"{"type":"webhook","url":"\#(receiver.url("ok"))","secret":"\#(WebhookReceiver.secret)"}"#
            let refused = try await raw.send(.PUT, "/v1/hooks/local", body: local)
            #expect(refused.status == 400 && refused.body.contains("url"), "\(refused.body)")
            let metadata =
                #"{"type":"webhook","url":"http://169.254.169.254/latest","secret":"\#(WebhookReceiver.secret)"}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/meta", body: metadata).status == 400)
            let short = #"{"type":"webhook","url":"https://example.com/h","secret":"short"}"#
            let weak = try await raw.send(.PUT, "/v1/hooks/weak", body: short)
            #expect(weak.status == 400 && weak.body.contains("secret"), "\(weak.body)")
            // A misspelt key would have left the hook taking every kind.
            let misspelt =
                #"{"type":"webhook","url":"https://example.com/h","secret":"\#(WebhookReceiver.secret)","kind":["tripEnd"]}"#
            let typo = try await raw.send(.PUT, "/v1/hooks/typo", body: misspelt)
            #expect(
                typo.status == 400 && typo.body.contains("unknown key 'kind' (did you mean 'kinds'?)"), "\(typo.body)")
            // A topic for a webhook, and a placeholder that is none: each would be ignored or literal.
            for (body, said) in [
                (
                    #"{"type":"webhook","url":"https://example.com/h","secret":"\#(WebhookReceiver.secret)","topic":"t"}"#,
                    "only an mqtt hook publishes to a topic"
                ),
                (
                    #"{"type":"mqtt","url":"mqtt://example.com","topic":"kt/{devices}/event"}"#,
                    "'{devices}' is not a placeholder: {device} and {kind} are replaced"
                ),
            ] {
                let r = try await raw.send(.PUT, "/v1/hooks/topic", body: body)
                #expect(r.status == 400 && r.body.contains(said), "\(r.body)")
            }
            #expect(try await endpoint.server.store.storedHooks().isEmpty)
        } catch {
            Issue.record(error)
        }
        receiver.stop()
        await raw.close()
        await endpoint.stop()
    }

    /// A hook whose receiver redirects to a private address: the test delivery says so (the redirect
    /// is not followed), and so does every delivery.
    @Test func aHookThatRedirectsIsNotFollowed() async throws {
        let receiver = try await WebhookReceiver()
        let endpoint = try await Endpoint.start { c in c.events.allowPrivateHooks = true }
        let raw = Raw(endpoint: endpoint)
        do {
            let url = receiver.url("redirect?to=http://10.0.0.1/admin")
            let hook = #"{"type":"webhook","url":"\#(url)","secret":"\#(WebhookReceiver.secret)"}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/r", body: hook).status == 201)
            let test = try await raw.send(.POST, "/v1/hooks/r/test")
            #expect(test.status == 502, "\(test.body)")
            #expect(test.body.contains("10.0.0.1"), "\(test.body)")
            let post = try await receiver.next()
            #expect(post.status == 302 && post.valid)
            let list = Self.json(try await raw.send(.GET, "/v1/hooks").body)
            let hooks = list["hooks"] as? [[String: Any]] ?? []
            #expect(hooks.first?["name"] as? String == "r")
            #expect(hooks.first?["secret"] == nil)
        } catch {
            Issue.record(error)
        }
        receiver.stop()
        await raw.close()
        await endpoint.stop()
    }
}
