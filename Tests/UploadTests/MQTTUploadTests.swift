import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServerTesting
@testable import Upload

/// An uploader to a broker (`mqtt://127.0.0.1:PORT` and `path`), quick to retry.
func mqttUploader(
    _ outbox: Outbox, url: String, batch: Int = 100, attempts: Int = 5, timeout: Double = 30,
    caFile: String? = nil
) throws -> Uploader {
    var c = Uploader.Configuration(url: url)
    c.maxBatchCount = batch
    c.initialBackoff = 0.01
    c.maxBackoff = 0.05
    c.maxWait = 0
    c.drainAttempts = attempts
    c.timeout = timeout
    c.caFile = caFile
    return try Uploader(outbox: outbox, configuration: c)
}

/// The JSON object of a payload.
func object(_ payload: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
}

@Suite("Uploader over MQTT against a real mosquitto", .serialized, .offThePool)
struct MQTTUploadTests {
    /// What `mosquitto_sub` sees: OwnTracks JSON at QoS 1 on `owntracks/USER/DEVICE`, every location
    /// and transition once and in order, no dwell; the outbox is empty after the PUBACKs.
    @Test func publishesOwnTracksJSONAtQoS1OnTheDevicesTopic() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(120)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let t = 1_715_679_000.0 + 120
        try outbox.append([
            TrailRecord(
                device: "", sequence: 0, kind: .enter, region: "home", time: t, latitude: 48.2, longitude: 11.6,
                horizontalAccuracy: 12),
            TrailRecord(
                device: "", sequence: 0, kind: .dwell, region: "home", time: t + 1, latitude: 48.2, longitude: 11.6),
        ])
        let subscriber = try Subscriber(port: broker.port, topic: "owntracks/#", count: 121)
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)", batch: 50)
        try await drain(u)
        var messages: [(qos: Int, topic: String, payload: String)] = []
        while let m = subscriber.next() { messages.append(m) }
        #expect(messages.count == 121)
        #expect(messages.allSatisfy { $0.qos == 1 && $0.topic == "owntracks/keeptrack/van-1" })
        // Region transitions jump ahead of a location backlog (the outbox's order), then the walk in order.
        let transition = try object(messages[0].payload)
        #expect(transition["_type"] as? String == "transition")
        #expect(transition["event"] as? String == "enter")
        #expect(transition["desc"] as? String == "home")
        let first = try object(messages[1].payload)
        #expect(first["_type"] as? String == "location")
        #expect(first["tst"] as? Int == 1_715_679_000)
        #expect(first["lat"] as? Double == 48.1)
        #expect(first["lon"] as? Double == 11.5)
        #expect(first["acc"] as? Int == 5)
        let times = try messages.dropFirst().map { try object($0.payload)["tst"] as? Int }
        #expect(times == (0..<120).map { 1_715_679_000 + $0 })
        #expect(try outbox.stats().pending == 0)
        #expect(u.stats.uploaded == 121)
        #expect(u.stats.skipped == 1)
        await u.shutdown()
    }

    /// The URL's topic replaces the default, and the URL's user names the default topic's user.
    @Test func theURLNamesTheTopicOrItsUser() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let subscriber = try Subscriber(port: broker.port, topic: "#", count: 3)
        let u = try mqttUploader(outbox, url: "mqtt://anna@127.0.0.1:\(broker.port)")
        try await drain(u)
        await u.shutdown()
        #expect(subscriber.next()?.topic == "owntracks/anna/van-1")
        try outbox.append(walk(2, from: 1_715_680_000))
        let other = try Subscriber(port: broker.port, topic: "fleet/#", count: 2)
        let v = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)/fleet/vans/1")
        try await drain(v)
        await v.shutdown()
        #expect(other.next()?.topic == "fleet/vans/1")
    }

    @Test(arguments: [
        ("mqtt://", "has no host"),
        ("mqtt://host:99999/t", "the port '99999' of the mqtt:// URL is not a number from 1 to 65535"),
        ("mqtt://host/owntracks/+/x", "must not contain + or #"),
        ("mqtt://:secret@host", "the user name in the mqtt:// URL is empty"),
    ])
    func aBadURLIsNamed(url: String, problem: String) throws {
        let (outbox, dir) = try filledOutbox(1)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            _ = try mqttUploader(outbox, url: url)
            Issue.record("\(url) was accepted")
        } catch let error as UploadError {
            #expect(error.description.contains(problem), "\(error)")
            #expect(!error.description.contains("secret"))
        }
    }

    /// Nobody listens: the records stay, and the error names the broker and the refusal.
    @Test func aRefusedConnectionIsNamedAndTheRecordsStay() async throws {
        let port = try ReservedPort()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(port)", attempts: 1)
        try await drain(u)
        #expect(try outbox.stats().pending == 10)
        let error = try #require(u.stats.lastError)
        #expect(error.contains("cannot connect to the MQTT broker 127.0.0.1:\(port): Connection refused"), "\(error)")
        await u.shutdown()
    }

    /// A broker with a password file: a wrong password is a settings problem said as such (a drain
    /// stops at the first attempt, as on a 401; a run tries again at the longest backoff); the right
    /// one delivers.
    @Test func badCredentialsAreNamedAndTheRightOnesDeliver() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_passwd")
        p.arguments = ["-b", "-c", dir + "/passwords", "anna", "s3cret"]
        try p.run()
        p.waitUntilExit()
        let broker = try Broker(configuration: ["allow_anonymous false", "password_file \(dir)/passwords"])
        let (outbox, outboxDir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: outboxDir) }
        let wrong = try mqttUploader(outbox, url: "mqtt://anna:wrong@127.0.0.1:\(broker.port)", attempts: 5)
        try await drain(wrong)
        #expect(try outbox.stats().pending == 10)
        #expect(wrong.stats.retries == 1)
        let error = try #require(wrong.stats.lastError)
        #expect(error.contains("the MQTT broker 127.0.0.1:\(broker.port) refuses our credentials"), "\(error)")
        #expect(!error.contains("wrong"))
        await wrong.shutdown()
        let right = try mqttUploader(outbox, url: "mqtt://anna:s3cret@127.0.0.1:\(broker.port)")
        try await drain(right)
        #expect(try outbox.stats().pending == 0)
        await right.shutdown()
    }

    /// A broker that stops answering (SIGSTOP) cannot acknowledge: every record published to it stays
    /// in the outbox, and goes out again once it answers.
    @Test func aRecordLeavesTheOutboxOnlyWithItsPUBACK() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)", attempts: 1, timeout: 1)
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        broker.pause()
        try outbox.append(walk(10, from: 1_715_680_000))
        try await drain(u)
        broker.resume()
        #expect(try outbox.stats().pending == 10)
        let error = try #require(u.stats.lastError)
        #expect(error.contains("no PUBACK") || error.contains("no answer from the MQTT broker"), "\(error)")
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        await u.shutdown()
    }

    /// The broker restarts between two batches: the uploader finds the connection gone, opens
    /// another after its backoff and delivers.
    @Test func reconnectsAfterTheBrokerRestarts() async throws {
        let broker = try Broker()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try mqttUploader(outbox, url: "mqtt://127.0.0.1:\(broker.port)")
        try await drain(u)
        try broker.restart()
        let subscriber = try Subscriber(port: broker.port, topic: "owntracks/#", count: 10)
        try outbox.append(walk(10, from: 1_715_680_000))
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        var n = 0
        while subscriber.next() != nil { n += 1 }
        #expect(n == 10)
        await u.shutdown()
    }

    /// `mqtts://` with `--ca-file` trusts a self-signed broker; without it the system's trust store
    /// refuses it and the records stay.
    @Test func mqttsTrustsTheCAFile() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/key.pem", "-out",
            dir + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        let broker = try Broker(configuration: ["certfile \(dir)/cert.pem", "keyfile \(dir)/key.pem"])
        let (outbox, outboxDir) = try filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: outboxDir) }
        let untrusted = try mqttUploader(outbox, url: "mqtts://127.0.0.1:\(broker.port)", attempts: 1, timeout: 5)
        try await drain(untrusted)
        await untrusted.shutdown()
        #expect(try outbox.stats().pending == 5)
        #expect(
            untrusted.stats.lastError?.contains("MQTT broker 127.0.0.1:\(broker.port)") == true,
            "\(untrusted.stats.lastError ?? "")")
        let trusted = try mqttUploader(outbox, url: "mqtts://127.0.0.1:\(broker.port)", caFile: dir + "/cert.pem")
        try await drain(trusted)
        #expect(try outbox.stats().pending == 0)
        await trusted.shutdown()
    }
}
