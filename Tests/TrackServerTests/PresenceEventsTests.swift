import EndpointEvents
import Foundation
import Formats
import Geo
import KeepTrackTesting
import Logging
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 37's last gaps, on both stores: `offline` and `online` stored as events (once per
/// silence, whichever instance, across restarts), a device's own overspeed limit, and the events'
/// retention.
@Suite("Endpoint: presence events, device overspeed limits, events' retention", .serialized)
struct PresenceEventsTests {
    /// A fresh database of `kind` (a value for `openTrackStore`) and what removes it.
    static func database(_ kind: StoreKind) async throws -> (path: String, drop: @Sendable () async -> Void) {
        switch kind {
        case .sqlite:
            let dir = temporaryDirectory()
            return (dir + "/endpoint.sqlite", { try? FileManager.default.removeItem(atPath: dir) })
        case .postgres:
            let cluster = try await Postgres.shared()
            let name = try await offThePool { try cluster.createDatabase() }
            return (cluster.url(name), { _ = try? await offThePool { try cluster.dropDatabase(name) } })
        }
    }

    static func location(_ device: String, _ seq: Int, time: Double, speed: Double? = nil) -> TrailRecord {
        TrailRecord(
            device: device, sequence: Int64(seq), time: time, latitude: 48.1 + Double(seq) * 1e-4, longitude: 11.5,
            horizontalAccuracy: 5, speed: speed)
    }

    /// A device's own region entry (`home`): a `regionEnter` event for the hooks that want it.
    static func enter(_ device: String, time: Double) -> TrailRecord {
        var r = location(device, 1, time: time)
        r.kind = .enter
        r.region = "home"
        return r
    }

    /// The PostgreSQL store's catch-ups (events are decided there) done; nothing on SQLite.
    static func settled(_ store: any TrackStore) async {
        if let pg = store as? PostgresTrackStore { await pg.storedStopsSettled() }
    }

    static func summary(_ events: [DeviceEvent]) -> [String] {
        events.map { "\($0.kind) \($0.device) \(Int($0.time))" }
    }

    /// Two instances on one database reconciling at the same deadline store one `offline`, at the
    /// time the silence crossed the delay; an instance started after a silence crossed it while none
    /// ran declares it then, once; the device's next record is one `online` at its time, paired
    /// with the offline (the same cause); a new silence is a new episode. Each is served and queued
    /// for the hook once.
    @Test(arguments: StoreKind.allCases)
    func aSilenceIsOneOfflineAndOneOnlineWhoeverReconcilesAndHowOften(kind: StoreKind) async throws {
        let db = try await Self.database(kind)
        let a = try await openTrackStore(db.path)
        let b = try await openTrackStore(db.path)
        var restarted: (any TrackStore)?
        do {
            _ = try await a.putHook(StoredHook(name: "h", kinds: [.offline, .online], devices: nil, settings: "{}"))
            _ = try await a.insert([Self.location("van1", 1, time: 990)], format: "json", received: 1000)
            _ = try await b.insert([Self.location("van2", 1, time: 1190)], format: "json", received: 1200)
            #expect(try await a.reconcilePresence(now: 1599, offlineAfter: 600).isEmpty)
            let first = try await a.reconcilePresence(now: 1700, offlineAfter: 600)
            #expect(Self.summary(first) == ["offline van1 1600"])
            #expect(first.first?.details == .offline(lastSeen: 1000))
            #expect(first.first?.id == DeviceEvent.offline(device: "van1", time: 0, lastSeen: 1000).id)
            #expect(try await b.reconcilePresence(now: 1700.5, offlineAfter: 600).isEmpty)
            #expect(try await a.reconcilePresence(now: 1701, offlineAfter: 600).isEmpty)
            // van2 crossed at 1800 while no instance reconciled: the next start declares it, once.
            let c = try await openTrackStore(db.path)
            restarted = c
            #expect(Self.summary(try await c.reconcilePresence(now: 5000, offlineAfter: 600)) == ["offline van2 1800"])
            #expect(try await a.reconcilePresence(now: 5000, offlineAfter: 600).isEmpty)
            // van1 sends again: one online, at its record's time, whoever reconciles.
            _ = try await a.insert([Self.location("van1", 2, time: 5990)], format: "json", received: 6000)
            let back = try await b.reconcilePresence(now: 6000, offlineAfter: 600)
            #expect(Self.summary(back) == ["online van1 5990"])
            #expect(back.first?.id == DeviceEvent.online(device: "van1", time: 0, lastSeen: 1000).id)
            #expect(try await c.reconcilePresence(now: 6001, offlineAfter: 600).isEmpty)
            // Silent again: a new episode.
            let again = try await c.reconcilePresence(now: 6600, offlineAfter: 600)
            #expect(Self.summary(again) == ["offline van1 6600"])
            #expect(again.first?.id != first.first?.id)
            let page = try await a.events(EventQuery(kinds: [.offline, .online]), after: nil, limit: 100)
            #expect(
                page.events.map { "\($0.kind) \($0.device) \(Int($0.time))" }
                    == ["offline van1 1600", "offline van2 1800", "online van1 5990", "offline van1 6600"])
            #expect(Set(page.events.map(\.id)).count == 4)
            #expect(try await a.deliveryCounts()["h"]?.pending == 4)
        } catch {
            Issue.record(error)
        }
        await restarted?.close()
        await a.close()
        await b.close()
        await db.drop()
    }

    /// The presence events `store` tells from now on, one at a time.
    final class PresenceFeed: Sendable {
        let store: any TrackStore
        let events: AsyncStream<DeviceEvent>
        let subscription: DeviceEventFeed.Subscription

        init(_ store: any TrackStore) {
            let (events, continuation) = AsyncStream.makeStream(of: DeviceEvent.self)
            self.store = store
            self.events = events
            subscription = store.deviceEvents.subscribe { events in
                for e in events where e.kind == .offline || e.kind == .online { continuation.yield(e) }
            }
        }

        func next(_ what: String) async throws -> DeviceEvent? {
            try await withTimeout(120, what) { [events] in
                var it = events.makeAsyncIterator()
                return await it.next()
            }
        }

        func stop() { store.deviceEvents.unsubscribe(subscription) }
    }

    static func batch(_ seq: Int, _ time: String) -> String {
        #"{"device":"van1","records":[{"seq":\#(seq),"kind":"location","time":"\#(time)","lat":48.1,"lon":11.5}]}"#
    }

    /// Through a real endpoint on a manual clock: the offline watch stores the `offline` when the
    /// silence crosses `--offline-after` and the `online` when the device sends again; a hook gets
    /// each once; an endpoint restarted on the same database during the silence adds no second
    /// `offline`.
    @Test(arguments: StoreKind.allCases)
    func theWatchStoresPresenceAndARestartDoesNotRepeatIt(kind: StoreKind) async throws {
        let start = EpochInstant(secondsSince1970: 1_715_679_000)  // 2024-05-14T09:30:00Z
        let clock = ManualClock(now: start)
        let receiver = try await WebhookReceiver()
        let db = try await Self.database(kind)
        func configure(_ c: inout TrackServer.Configuration) {
            c.stream.offlineAfter = .seconds(300)
            c.events.allowPrivateHooks = true
            c.events.delivery.policy = .init(backoff: Backoff(initial: 0.05, maximum: 0.2), maximumAttempts: 50)
        }
        var endpoint = try await Endpoint.start(database: db.path, clock: clock, configure: configure)
        var raw = Raw(endpoint: endpoint)
        do {
            let hook =
                #"{"type":"webhook","url":"\#(receiver.url("ok"))","secret":"\#(WebhookReceiver.secret)","#
                + #""kinds":["offline","online"]}"#
            #expect(try await raw.send(.PUT, "/v1/hooks/receiver", body: hook).status == 201)
            let feed = PresenceFeed(endpoint.server.store)
            let sent = try await raw.send(.POST, "/v1/locations", body: Self.batch(1, "2024-05-14T09:30:00Z"))
            try #require(sent.status == 200, "\(sent.body)")
            clock.advance(by: .seconds(300))
            let offline = try #require(try await feed.next("the offline event"))
            feed.stop()
            #expect(offline.kind == .offline)
            #expect(offline.time == start.secondsSince1970 + 300)
            let first = try await receiver.untilProcessed(1)
            #expect(first.last?.kind == "offline" && first.last?.id == offline.id)
            // Restarted during the silence, then the device sends: its online, and no second offline.
            await raw.close()
            await endpoint.stop(keepingFiles: true)
            clock.advance(by: .seconds(60))
            endpoint = try await Endpoint.start(database: db.path, clock: clock, configure: configure)
            raw = Raw(endpoint: endpoint)
            let again = PresenceFeed(endpoint.server.store)
            let later = try await raw.send(.POST, "/v1/locations", body: Self.batch(2, "2024-05-14T09:36:00Z"))
            try #require(later.status == 200, "\(later.body)")
            let online = try #require(try await again.next("the online event"))
            again.stop()
            #expect(online.kind == .online)
            #expect(online.time == 1_715_679_360)
            let posts = try await receiver.untilProcessed(1)
            #expect(posts.last?.kind == "online" && posts.last?.id == online.id)
            let listed = try await raw.send(.GET, "/v1/events?kind=offline,online")
            #expect(listed.status == 200)
            let body = try JSONSerialization.jsonObject(with: Data(listed.body.utf8)) as? [String: Any]
            let events = body?["events"] as? [[String: Any]] ?? []
            #expect(events.compactMap { $0["kind"] as? String } == ["offline", "online"])
            #expect(events.compactMap { $0["id"] as? String } == [offline.id, online.id])
        } catch {
            Issue.record(error)
        }
        receiver.stop()
        await raw.close()
        await endpoint.stop(keepingFiles: true)
        await db.drop()
    }

    /// A device's own limit overrides the global one, on every instance from its next batch: van1
    /// (its own 50 km/h) is over at 72 km/h where van2 (the global 100 km/h) is not; one event per
    /// episode; removed, van1 follows the global limit again.
    @Test(arguments: StoreKind.allCases)
    func aDevicesOwnOverspeedLimitOverridesTheGlobalOne(kind: StoreKind) async throws {
        let db = try await Self.database(kind)
        let a = try await openTrackStore(db.path)
        let b = try await openTrackStore(db.path)
        do {
            var rules = EventRules()
            rules.overspeed = OverspeedRule(limit: 100 / 3.6)
            a.setEventRules(rules)
            b.setEventRules(rules)
            // a has read the limits (none) before b sets van1's.
            _ = try await a.insert([Self.location("van0", 1, time: 10, speed: 20)], format: "json", received: 10)
            await Self.settled(a)
            #expect(try await b.setOverspeedLimit(device: "van1", limit: 50 / 3.6))
            #expect(try await a.overspeedLimits() == ["van1": 50 / 3.6])
            for (i, speed) in [20.0, 21, 20, 10, 20].enumerated() {
                let t = Double(100 + i * 10)
                _ = try await a.insert(
                    [
                        Self.location("van1", i + 1, time: t, speed: speed),
                        Self.location("van2", i + 1, time: t, speed: speed),
                    ],
                    format: "json", received: t)
                await Self.settled(a)
            }
            var page = try await a.events(EventQuery(kinds: [.overspeed]), after: nil, limit: 100)
            // Two episodes: 20 m/s at 100 (the first), back under 45 km/h at 130, over again at 140.
            #expect(page.events.map { "\($0.device) \(Int($0.time))" } == ["van1 100", "van1 140"])
            #expect(!(try await b.setOverspeedLimit(device: "van2", limit: nil)))
            #expect(try await b.setOverspeedLimit(device: "van1", limit: nil))
            _ = try await a.insert([Self.location("van1", 9, time: 200, speed: 5)], format: "json", received: 200)
            await Self.settled(a)
            _ = try await a.insert([Self.location("van1", 10, time: 210, speed: 25)], format: "json", received: 210)
            await Self.settled(a)
            _ = try await a.insert([Self.location("van1", 11, time: 220, speed: 28)], format: "json", received: 220)
            await Self.settled(a)
            page = try await a.events(EventQuery(kinds: [.overspeed]), after: nil, limit: 100)
            // 25 m/s is 90 km/h: under the global 100; 28 m/s (100.8 km/h) is over it.
            #expect(page.events.map { "\($0.device) \(Int($0.time))" } == ["van1 100", "van1 140", "van1 220"])
        } catch {
            Issue.record(error)
        }
        await a.close()
        await b.close()
        await db.drop()
    }

    /// `hooks list` and `GET /v1/hooks` say why a hook's deliveries fail: the last error of its
    /// waiting entry tried the most times, else of a dead letter; nothing before any failed.
    @Test(arguments: StoreKind.allCases)
    func aHooksCountsSayWhyItsDeliveriesFail(kind: StoreKind) async throws {
        let db = try await Self.database(kind)
        let store = try await openTrackStore(db.path)
        do {
            _ = try await store.putHook(StoredHook(name: "h", kinds: [.regionEnter], devices: nil, settings: "{}"))
            for (device, time) in [("d1", 100.0), ("d2", 200)] {
                _ = try await store.insert([Self.enter(device, time: time)], format: "json", received: time)
                await Self.settled(store)
            }
            #expect(try await store.deliveryCounts()["h"] == DeliveryCounts(pending: 2, dead: 0, lastError: nil))
            // Queued at the store's clock (PostgreSQL's: the wall clock): claimed at a time after it.
            let t = 4e9
            func attempt(_ now: Double, _ outcomes: [String: DeliverySettlement]) async throws {
                let claimed = try await store.claimDeliveries(
                    hook: "h", limit: 10, now: now, leaseUntil: now + 60, token: "t\(now)")
                for c in claimed {
                    guard let outcome = outcomes[c.event.device] else { continue }
                    #expect(
                        try await store.settleDelivery(
                            hook: "h", event: c.event.id, token: "t\(now)", outcome: outcome, now: now))
                }
            }
            try await attempt(t, ["d1": .retry(at: t + 100, reason: "one"), "d2": .retry(at: t + 100, reason: "two")])
            try await attempt(t + 100, ["d2": .retry(at: t + 200, reason: "two again")])
            #expect(try await store.deliveryCounts()["h"]?.lastError == "two again")
            // A waiting entry's error before a dead letter's.
            try await attempt(t + 200, ["d1": .dead(reason: "gone"), "d2": .retry(at: t + 300, reason: "two, 3")])
            #expect(try await store.deliveryCounts()["h"] == DeliveryCounts(pending: 1, dead: 1, lastError: "two, 3"))
            try await attempt(t + 300, ["d2": .delivered])
            #expect(try await store.deliveryCounts()["h"] == DeliveryCounts(pending: 0, dead: 1, lastError: "gone"))
        } catch {
            Issue.record(error)
        }
        await store.close()
        await db.drop()
    }

    /// Retention takes the events older than its cutoff with their points, except those a hook
    /// still has to get: delivered or dead-lettered first, then deleted (dead letters with them).
    @Test(arguments: StoreKind.allCases)
    func retentionDeletesOldEventsOnceNoHookWaitsForThem(kind: StoreKind) async throws {
        let db = try await Self.database(kind)
        let store = try await openTrackStore(db.path)
        do {
            _ = try await store.putHook(StoredHook(name: "h", kinds: [.regionEnter], devices: nil, settings: "{}"))
            for (device, time) in [("d1", 100.0), ("d2", 200), ("d3", 10_000)] {
                _ = try await store.insert([Self.enter(device, time: time)], format: "json", received: time)
                await Self.settled(store)
            }
            // Queued at the store's clock (PostgreSQL's: the wall clock): claimed at a time after it.
            let t = 4e9
            let claimed = try await store.claimDeliveries(hook: "h", limit: 10, now: t, leaseUntil: t + 60, token: "t")
            #expect(claimed.map(\.event.device).sorted() == ["d1", "d2", "d3"])
            let id = { (device: String) in claimed.first { $0.event.device == device }?.event.id ?? "" }
            #expect(try await store.settleDelivery(hook: "h", event: id("d1"), token: "t", outcome: .delivered, now: t))
            #expect(
                try await store.settleDelivery(
                    hook: "h", event: id("d2"), token: "t", outcome: .retry(at: t + 100, reason: "500"), now: t))
            let clock = ManualClock(now: EpochInstant(secondsSince1970: 15_000))
            let retention = RetentionService(
                store: store, retention: 10_000, clock: clock, logger: Logger(label: "test"))
            // The cutoff is 5,000: d1's event goes with its point, d2's waits for its delivery.
            #expect(try await retention.sweepAll().events == 1)
            var left = try await store.events(EventQuery(), after: nil, limit: 100).events.map(\.device)
            #expect(left == ["d2", "d3"])
            let again = try await store.claimDeliveries(
                hook: "h", limit: 10, now: t + 100, leaseUntil: t + 160, token: "u")
            #expect(
                try await store.settleDelivery(
                    hook: "h", event: id("d2"), token: "u", outcome: .dead(reason: "gone"), now: t + 100))
            #expect(again.contains { $0.event.device == "d2" })
            #expect(try await retention.sweepAll().events == 1)
            left = try await store.events(EventQuery(), after: nil, limit: 100).events.map(\.device)
            #expect(left == ["d3"])
            let counts = try await store.deliveryCounts()["h"]
            #expect(counts?.pending == 1 && counts?.dead == 0)
        } catch {
            Issue.record(error)
        }
        await store.close()
        await db.drop()
    }
}
