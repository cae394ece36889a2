import Delivery
import Formats
import Foundation
import Geo
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// The delivery queue's wake-up across instances (docs/events.md): an event that one instance's
/// ingest stores on PostgreSQL reaches a webhook through another instance's delivery worker at
/// once, by the notification its commit sends, not by that worker's poll.
@Suite("Delivery: woken across instances on PostgreSQL", .serialized, .offThePool)
struct DeliveryWakeTests {
    /// A circle of 100 m at Munich's centre and a walk through it, 1 record a second from 300 m west
    /// to 300 m east at 2 m/s: an entry (decided about 123 s in) and an exit (about 223 s in).
    static let centre = Coordinate(latitude: 48.137, longitude: 11.575)

    static func walk(from t0: Double) -> [TrailRecord] {
        (0...300).map { i in
            let east = -300 + Double(i) * 2
            return TrailRecord(
                device: "van-1", sequence: Int64(i + 1), time: t0 + Double(i), latitude: centre.latitude,
                longitude: centre.longitude + east / (111_320 * cos(centre.latitude * .pi / 180)),
                horizontalAccuracy: 5, speed: 2, course: 90)
        }
    }

    /// Instance B delivers, on a manual clock that never moves (its poll of an hour can't come);
    /// instance A only stores (no delivery worker). The entry A stores reaches the receiver through
    /// B; then, once B's lane has looked at the queue again and found nothing, the exit A stores
    /// reaches it too: B's lane could only have been woken by A's notification.
    @Test func anEventStoredByOneInstanceIsDeliveredByAnotherWithoutItsPoll() async throws {
        let receiver = try await WebhookReceiver()
        let start = EpochInstant(secondsSince1970: WallClock().now.secondsSince1970 + 3600)
        let clock = ManualClock(now: start)
        // B's store on the same clock: its sweep for devices left marked runs once, at its start.
        let b = try await Endpoint.start(store: .postgres, clock: clock, storeClock: clock) { c in
            c.events.allowPrivateHooks = true
            c.events.delivery.pollInterval = 3600
        }
        let raw = Raw(endpoint: b)
        let a = try await openTrackStore(b.database)
        do {
            let fence =
                #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"centre","#
                + #""geometry":{"type":"Point","coordinates":[11.575,48.137]},"properties":{"radius":100}}]}"#
            let put = try await raw.send(.PUT, "/v1/geofences", body: fence)
            #expect(put.status == 200, "\(put.body)")
            let hook =
                #"{"type":"webhook","url":"\#(receiver.url("ok"))","secret":"\#(WebhookReceiver.secret)","#
                + #""kinds":["geofenceEnter","geofenceExit"]}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/receiver", body: hook).status == 201)
            let walk = Self.walk(from: WallClock().now.secondsSince1970 - 400)
            let worker = b.server.deliveryWorker

            _ = try await a.insert(Array(walk[0..<160]), format: "json", received: walk[159].time)
            let entry = try await receiver.next()
            #expect(entry.kind == "geofenceEnter" && entry.valid && entry.first)
            // B's lane settled the entry, then looked at the queue again with nothing in flight
            // (nothing left): it waits now for a wake or its poll. Idle is set by a claim made after
            // the settlement only: one made while the entry was in flight is not idle.
            while !(worker.stats["receiver"].map { $0.delivered == 1 && $0.inFlight == 0 && $0.idle } ?? false) {
                await worker.activity.wait()
            }

            _ = try await a.insert(Array(walk[160...]), format: "json", received: walk[300].time)
            let exit = try await receiver.next()
            #expect(exit.kind == "geofenceExit" && exit.valid && exit.first && exit.device == "van-1")
            // Settled by B (the receiver answers before B counts it).
            while worker.stats["receiver"]?.delivered != 2 { await worker.activity.wait() }
            #expect(clock.now == start, "the manual clock moved: a poll could have found the event")
        } catch {
            Issue.record(error)
        }
        await a.close()
        receiver.stop()
        await raw.close()
        await b.stop()
    }
}
