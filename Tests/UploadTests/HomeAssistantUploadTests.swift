import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServerTesting

@testable import Upload

/// Issue 39, item 1, at the broker (Home Assistant itself: Tests/HomeAssistantTests): what a
/// `--format homeassistant` target publishes, in which order, retained or not, and how Home
/// Assistant's status holds it.
@Suite("Uploader to Home Assistant by MQTT discovery, at a real mosquitto", .serialized, .offThePool)
struct HomeAssistantUploadTests {
    func homeAssistantUploader(_ outbox: Outbox, port: Int, timeout: Double = 30, attempts: Int = 5) throws
        -> Uploader
    {
        var c = Uploader.Configuration(url: "mqtt://127.0.0.1:\(port)")
        c.format = HomeAssistantFormat()
        c.maxBatchCount = 100
        (c.initialBackoff, c.maxBackoff, c.maxWait) = (0.01, 0.05, 0)
        c.drainAttempts = attempts
        c.timeout = timeout
        return try Uploader(outbox: outbox, configuration: c)
    }

    func messages(_ subscriber: Subscriber, _ n: Int) async throws -> [(qos: Int, topic: String, payload: String)] {
        try await offThePool { (0..<n).compactMap { _ in subscriber.next() } }
    }

    /// The announcement first (tracker and speed configurations, then `online`), then each location's
    /// attributes in order, at QoS 1; transitions and dwells skipped. All of it retained: a subscriber
    /// that comes later gets the configurations, `online` and the last position.
    @Test func announcesTheDeviceThenPublishesEachLocationRetained() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(30)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.append([
            TrailRecord(
                device: "", sequence: 0, kind: .enter, region: "home", time: 1_715_679_100, latitude: 48.2,
                longitude: 11.6, horizontalAccuracy: 12)
        ])
        let subscriber = try Subscriber(port: broker.port, topic: "#", count: 33)
        let u = try homeAssistantUploader(outbox, port: broker.port)
        try await drain(u)
        let seen = try await messages(subscriber, 33)
        let topics = HomeAssistantDiscovery.Topics(device: "van-1")
        #expect(seen.map(\.topic).prefix(3) == [topics.trackerConfig, topics.speedConfig, topics.availability])
        #expect(seen[2].payload == "online")
        #expect(seen.dropFirst(3).allSatisfy { $0.topic == topics.attributes })
        #expect(seen.allSatisfy { $0.qos == 1 })
        let config = try object(seen[0].payload)
        #expect(config["json_attributes_topic"] as? String == topics.attributes)
        #expect((config["device"] as? [String: Any])?["sw_version"] as? String != nil)
        let times = try seen.dropFirst(3).map { try object($0.payload)["time"] as? String }
        #expect(times == (0..<30).map { (i: Int) -> String in ISOTime.string(1_715_679_000 + Double(i)) })
        #expect(try outbox.stats().pending == 0)
        #expect(u.stats.uploaded == 30)
        #expect(u.stats.skipped == 1)
        await u.shutdown()
        // Retained: what a subscriber that comes now gets at once.
        let later = try Subscriber(port: broker.port, topic: "#", count: 4)
        let retained = try await messages(later, 4)
        #expect(
            Set(retained.map(\.topic))
                == [topics.trackerConfig, topics.speedConfig, topics.availability, topics.attributes])
        let last = try #require(retained.first { $0.topic == topics.attributes })
        #expect(try object(last.payload)["time"] as? String == ISOTime.string(1_715_679_029))
    }

    /// Home Assistant's `offline` on its status topic holds the records in the outbox (the attempt says
    /// why); its `online` is answered by announcing the device again, then the records go.
    @Test func homeAssistantsOfflineHoldsTheRecordsUntilItsOnline() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Retained (as a Home Assistant whose birth and will are set to retain says it): heard at once.
        let status = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-p", "\(broker.port)", "-q", "1", "-r", "-t", "homeassistant/status", "-m", "offline"])
        _ = try await status.remainingLines()
        let held = try homeAssistantUploader(outbox, port: broker.port, timeout: 0.5, attempts: 2)
        try await drain(held)
        #expect(try outbox.stats().pending == 5)
        #expect(held.stats.lastError?.contains("Home Assistant is offline") == true, "\(held.stats)")
        await held.shutdown()
        let online = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-p", "\(broker.port)", "-q", "1", "-r", "-t", "homeassistant/status", "-m", "online"])
        _ = try await online.remainingLines()
        let subscriber = try Subscriber(port: broker.port, topic: "keeptrack/#")
        let u = try homeAssistantUploader(outbox, port: broker.port)
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        // The device said online before its first position, and every position came, in order.
        let seen = try await offThePool {
            var seen: [(qos: Int, topic: String, payload: String)] = []
            while seen.filter({ $0.topic.hasSuffix("/attributes") }).count < 5, let m = subscriber.next() {
                seen.append(m)
            }
            return seen
        }
        subscriber.stop()
        let first = try #require(seen.firstIndex { $0.topic.hasSuffix("/attributes") })
        #expect(seen[..<first].contains { $0.payload == "online" })
        let times = seen[first...].filter { $0.topic.hasSuffix("/attributes") }.map {
            try? object($0.payload)["time"] as? String
        }
        #expect(times == (0..<5).map { (i: Int) -> String in ISOTime.string(1_715_679_000 + Double(i)) })
        await u.shutdown()
    }

    /// A broker restarted without persistence forgets the retained configurations: the reconnection
    /// announces the device again (here Home Assistant's birth, retained, ends the wait at once).
    @Test func aReconnectionAnnouncesTheDeviceAgain() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try homeAssistantUploader(outbox, port: broker.port)
        try await drain(u)
        try await offThePool { try broker.restart() }
        let birth = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-p", "\(broker.port)", "-q", "1", "-r", "-t", "homeassistant/status", "-m", "online"])
        _ = try await birth.remainingLines()
        try outbox.append(walk(2, from: 1_715_679_003))
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        await u.shutdown()
        let topics = HomeAssistantDiscovery.Topics(device: "van-1")
        let later = try Subscriber(port: broker.port, topic: "#", count: 5)
        let retained = try await messages(later, 5)
        #expect(
            Set(retained.map(\.topic))
                == [topics.trackerConfig, topics.speedConfig, topics.availability, topics.attributes, topics.status])
    }

    /// Over HTTP there is nothing to send Home Assistant's discovery to: the uploader refuses it.
    @Test func anHTTPURLIsRefused() throws {
        let (outbox, dir) = try filledOutbox(1)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: "http://127.0.0.1:9/")
        c.format = HomeAssistantFormat()
        #expect(throws: UploadError.self) { try Uploader(outbox: outbox, configuration: c) }
    }
}
