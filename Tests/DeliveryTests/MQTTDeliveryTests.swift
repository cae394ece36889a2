import Delivery
import EndpointEvents
import Geo
import KeepTrackTesting
import MQTT
import Synchronization
import Testing

/// MQTT hooks against a real mosquitto: QoS 1 publishes on the topic template, a broker that is
/// gone a retry, a broker on a private address refused unless allowed.
@Suite("MQTT delivery against a real broker", .serialized, .offThePool)
struct MQTTDeliveryTests {
    /// What a subscriber received.
    final class Inbox: Sendable {
        let messages = Mutex<[(topic: String, payload: [UInt8])]>([])
        let signal = Signal()

        func next(_ count: Int) async -> [(topic: String, payload: [UInt8])] {
            while messages.withLock({ $0.count }) < count { await signal.wait() }
            return messages.withLock { Array($0.prefix(count)) }
        }
    }

    static func subscriber(_ broker: Broker, _ inbox: Inbox) async throws -> MQTTConnection {
        let endpoint = try MQTTEndpoint(parsing: "mqtt://127.0.0.1:\(broker.port)")
        var options = MQTTConnection.Options(clientID: "subscriber")
        options.connectTimeout = 120
        let c = try MQTTConnection(endpoint: endpoint, options: options) { topic, payload in
            inbox.messages.withLock { $0.append((topic, payload)) }
            inbox.signal.fire()
        }
        try await c.connect()
        try await c.subscribe("keeptrack/#", qos: 1, timeout: 120)
        return c
    }

    @Test func eachEventIsPublishedAtQoS1OnItsDevicesTopic() async throws {
        let broker = try await offThePool { try Broker() }
        defer { broker.stop() }
        let inbox = Inbox()
        let subscriber = try await Self.subscriber(broker, inbox)
        let hook = Hook(name: "fleet", type: .mqtt, url: "mqtt://127.0.0.1:\(broker.port)", secret: "")
        // The timeout bounds a hang; a loaded machine (CI's full run) can take seconds per PUBACK.
        let kind = MQTTDelivery(hook: hook, allowPrivate: true, timeout: 120, instance: "test")
        let events = [event("van-1", 1), event("van-2", 1, kind: .geofenceExit)]
        for e in events { #expect(await kind.deliver(QueuedEvent(e)) == .delivered) }
        let got = try await withTimeout(120, "the messages") { await inbox.next(2) }
        #expect(got.map(\.topic) == ["keeptrack/van-1/event", "keeptrack/van-2/event"])
        #expect(got.map(\.payload) == events.map(\.json))
        await kind.close()
        await subscriber.close()
    }

    /// A topic template with `{kind}`: each event under its kind, and a test event (`hooks test`)
    /// under `test`, never under a kind a subscriber acts on.
    @Test func aTopicsKindIsTheEventsAndATestsIsTest() async throws {
        let broker = try await offThePool { try Broker() }
        defer { broker.stop() }
        let inbox = Inbox()
        let subscriber = try await Self.subscriber(broker, inbox)
        let hook = Hook(
            name: "fleet", type: .mqtt, url: "mqtt://127.0.0.1:\(broker.port)", secret: "",
            topic: "keeptrack/{device}/{kind}")
        let kind = MQTTDelivery(hook: hook, allowPrivate: true, timeout: 120, instance: "test")
        let real = event("van-1", 1, kind: .geofenceExit)
        let test = QueuedEvent.test(id: "test-1", device: "keeptrack-test", body: Array(#"{"kind":"test"}"#.utf8))
        #expect(await kind.deliver(QueuedEvent(real)) == .delivered)
        #expect(await kind.deliver(test) == .delivered)
        let got = try await withTimeout(120, "the messages") { await inbox.next(2) }
        #expect(got.map(\.topic) == ["keeptrack/van-1/geofenceExit", "keeptrack/keeptrack-test/test"])
        #expect(got.map(\.payload) == [real.json, test.body])
        await kind.close()
        await subscriber.close()
    }

    @Test func aBrokerThatIsGoneIsARetry() async throws {
        let broker = try await offThePool { try Broker() }
        let port = broker.port
        try await offThePool { broker.stop() }
        let hook = Hook(name: "fleet", type: .mqtt, url: "mqtt://127.0.0.1:\(port)", secret: "")
        let kind = MQTTDelivery(hook: hook, allowPrivate: true, timeout: 5, instance: "test")
        guard case .retry(nil, let failure) = await kind.deliver(QueuedEvent(event("van-1", 1))) else {
            Issue.record("a publish to no broker was delivered")
            return
        }
        #expect(failure.code == .broker)
        await kind.close()
    }

    @Test func aBrokerOnAPrivateAddressIsRefusedUnlessAllowed() async throws {
        let hook = Hook(name: "fleet", type: .mqtt, url: "mqtt://127.0.0.1:1883", secret: "")
        let kind = MQTTDelivery(hook: hook, allowPrivate: false, timeout: 5, instance: "test")
        guard case .retry(nil, let failure) = await kind.deliver(QueuedEvent(event("van-1", 1))) else {
            Issue.record("a private broker was reached")
            return
        }
        #expect(failure.code == .addressRefused)
        await kind.close()
    }
}
