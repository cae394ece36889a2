import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// Stops and trips the store finds at ingest reach live clients as `{"type":"event"}` frames.
@Suite("The live stream: stops and trips found at ingest, as events")
struct StreamStopEventsTests {
    /// A trail stored in batches: the stream carries one `stop` event per finished stop and one
    /// `trip` event per trip of the store's own answer, with the route's members, among the records.
    @Test(arguments: StoreKind.allCases)
    func stopsAndTripsFoundAtIngestReachTheStreamAsEvents(_ kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let reader = StreamReader("ws://127.0.0.1:\(endpoint.port)/v1/stream?token=secret")
        do {
            #expect(try await reader.next()["type"] as? String == "snapshot")
            let store = endpoint.server.store
            let points = StoredStopsTests.trail(seed: 5, device: "live", segments: 12)
            for start in stride(from: 0, to: points.count, by: 50) {
                let batch = Array(points[start..<min(points.count, start + 50)])
                _ = try await store.insert(batch, format: "osmand", received: batch[0].time)
            }
            await store.storedStopsSettled()
            let report = try await store.stops(device: "live")
            let finished = report.stops.filter { $0.departure != nil }
            #expect(!finished.isEmpty && !report.trips.isEmpty)
            var stops: [[String: Any]] = [], trips: [[String: Any]] = []
            while stops.count + trips.count < finished.count + report.trips.count {
                // Each read is guarded (30 s): a missing event fails here, naming the wait.
                let raw = try #require(try await reader.next()["raw"] as? String)
                let object = try #require(try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any])
                guard object["type"] as? String == "event", let event = object["event"] as? [String: Any] else {
                    continue
                }
                #expect(object["device"] as? String == "live")
                switch event["kind"] as? String {
                case "stop": stops.append(event)
                case "trip": trips.append(event)
                // The arrival a trip ended in, as the stored events have it (docs/events.md).
                case "stopStart": #expect(event["start"] is String && event["end"] is NSNull)
                default: Issue.record("an unexpected event: \(raw)")
                }
            }
            #expect(stops.count == finished.count)
            #expect(trips.count == report.trips.count)
            #expect(stops.map { $0["start"] as? String } == finished.map { Self.iso($0.arrival) })
            #expect(trips.map { $0["end"] as? String } == report.trips.map { Self.iso($0.end) })
            #expect(stops.allSatisfy { $0["time"] is String && $0["radius"] is Double || $0["radius"] is Int })
        } catch {
            reader.stop()
            await endpoint.stop()
            throw error
        }
        reader.stop()
        await endpoint.stop()
    }

    static func iso(_ seconds: Double) -> String {
        var out: [UInt8] = []
        ISOTime.append(seconds, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
