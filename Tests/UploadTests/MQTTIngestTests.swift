import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
@testable import Upload

/// An endpoint subscribed to `owntracks/+/+` on `broker`, once its subscription is in place.
func subscribedEndpoint(_ broker: Broker, store: StoreKind = .sqlite) async throws -> Endpoint {
    let endpoint = try await Endpoint.start(store: store, token: nil) {
        $0.mqtt = .init(url: "mqtt://127.0.0.1:\(broker.port)")
    }
    try await withTimeout(30, "the MQTT subscription") { await endpoint.server.mqttSubscription() }
    return endpoint
}

/// Waits (guarded) until the endpoint stores `n` records.
func waitUntilStored(_ n: Int, _ endpoint: Endpoint) async throws {
    try await withTimeout(60, "\(n) records stored from MQTT") {
        while (try? await endpoint.server.store.count()) ?? 0 < n { await endpoint.server.mqttActivity() }
    }
}

@Suite("keeptrack serve --mqtt against a real mosquitto", .serialized, .offThePool)
struct MQTTIngestTests {
    /// The uploader publishes to the broker, the endpoint takes from it: every record once, in
    /// order, filed under the topic's user/device.
    @Test(arguments: StoreKind.allCases) func uploaderToBrokerToEndpointStoresEveryRecordOnce(kind: StoreKind)
        async throws
    {
        let broker = try Broker()
        let endpoint = try await subscribedEndpoint(broker, store: kind)
        let (outbox, dir) = try filledOutbox(150)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)", batch: 40)
        try await drain(u)
        try await waitUntilStored(150, endpoint)
        let trail = try await endpoint.server.store.trail(device: "keeptrack/van-1")
        #expect(trail.map(\.time) == (0..<150).map { (i: Int) -> Double in 1_715_679_000 + Double(i) })
        #expect(trail.first?.latitude == 48.1)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    /// QoS 1 is at least once: records whose PUBACK never came (the broker stopped answering) are
    /// published again, and the broker may deliver both copies; the endpoint stores each once.
    @Test(arguments: StoreKind.allCases) func aRecordSentTwiceIsStoredOnce(kind: StoreKind) async throws {
        let broker = try Broker()
        let endpoint = try await subscribedEndpoint(broker, store: kind)
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)", attempts: 1, timeout: 1)
        try await drain(u)
        broker.pause()
        try outbox.append(walk(10, from: 1_715_680_000))
        try await drain(u)
        broker.resume()
        #expect(try outbox.stats().pending == 10)
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        try await waitUntilStored(20, endpoint)
        #expect(try await endpoint.server.store.count() == 20)
        await u.shutdown()
        await endpoint.stop()
    }

    /// A phone's message as the OwnTracks booklet describes it (`json.md`: the `_type=location`
    /// elements), published with mosquitto_pub to `owntracks/jane/phone`, lands in the store under
    /// device `jane/phone`.
    @Test func mosquittoPubOfTheBookletsLocationLandsInTheStore() async throws {
        let broker = try Broker()
        let endpoint = try await subscribedEndpoint(broker)
        let payload = """
            {"_type":"location","acc":75,"alt":13,"batt":88,"cog":270,"lat":48.85833,"lon":2.29513,\
            "t":"u","tid":"JA","tst":1376715317,"vac":10,"vel":54,"conn":"w"}
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_pub")
        p.arguments = [
            "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "owntracks/jane/phone", "-m", payload,
        ]
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        try await waitUntilStored(1, endpoint)
        let r = try #require(try await endpoint.server.store.trail(device: "jane/phone").first)
        #expect(r.time == 1_376_715_317)
        #expect(r.latitude == 48.85833)
        #expect(r.longitude == 2.29513)
        #expect(r.horizontalAccuracy == 75)
        #expect(r.altitude == 13)
        #expect(r.course == 270)
        #expect(abs((r.speed ?? 0) - 15) < 1e-9)
        await endpoint.stop()
    }

    /// A message on a topic without user and device is refused and counted, one with an impossible
    /// latitude acknowledged, not stored and counted apart; the next good one is stored.
    @Test func malformedMessagesAreRefusedAndCounted() async throws {
        let broker = try Broker()
        let endpoint = try await Endpoint.start(token: nil) {
            $0.mqtt = .init(url: "mqtt://127.0.0.1:\(broker.port)")
            $0.mqtt?.topicFilter = "owntracks/#"
        }
        try await withTimeout(30, "the MQTT subscription") { await endpoint.server.mqttSubscription() }
        for (topic, message) in [
            ("owntracks/jane", #"{"_type":"location","lat":1,"lon":2,"tst":1500000000}"#),
            ("owntracks/jane/phone", #"{"_type":"location","lat":95,"lon":2,"tst":1500000000}"#),
            ("owntracks/jane/phone", #"{"_type":"location","lat":1,"lon":2,"tst":1500000000}"#),
        ] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_pub")
            p.arguments = ["-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", topic, "-m", message]
            try p.run()
            p.waitUntilExit()
        }
        try await waitUntilStored(1, endpoint)
        #expect(await endpoint.metric("keeptrack_serve_requests_rejected_total") == 1)
        #expect(await endpoint.metric(#"keeptrack_serve_records_refused_total{format="owntracks"}"#) == 1)
        #expect(try await endpoint.server.store.count() == 1)
        await endpoint.stop()
    }

    /// The broker restarts: the endpoint subscribes again and stores what comes next.
    @Test func resubscribesAfterTheBrokerRestarts() async throws {
        let broker = try Broker()
        let endpoint = try await Endpoint.start(token: nil) {
            $0.mqtt = .init(url: "mqtt://127.0.0.1:\(broker.port)")
            $0.mqtt?.initialBackoff = 0.05
        }
        try await withTimeout(30, "the MQTT subscription") { await endpoint.server.mqttSubscription() }
        try broker.restart()
        try await withTimeout(30, "the MQTT subscription again") {
            while endpoint.server.mqttSubscriptions < 2 || !endpoint.server.mqttIsSubscribed {
                await endpoint.server.mqttActivity()
            }
        }
        let (outbox, dir) = try filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)")
        try await drain(u)
        try await waitUntilStored(5, endpoint)
        await u.shutdown()
        await endpoint.stop()
    }
}
