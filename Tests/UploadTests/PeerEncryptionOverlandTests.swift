import Formats
import Foundation
import KeepTrackTesting
import OwnTracksCrypto
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
@testable import Upload

/// OwnTracks' encryption and Overland's batch (issue 29, items 2 and 3): the uploader against a
/// real endpoint, the endpoint against the peers' exact wire forms.
@Suite("Peers: OwnTracks encryption and Overland", .serialized, .offThePool)
struct PeerEncryptionOverlandTests {
    static let secret = try! OwnTracksSecret(passphrase: "correct horse battery staple")
    static let other = try! OwnTracksSecret(passphrase: "s3cr1t")

    /// Gives `device` (user/device) a secret in the endpoint's store.
    func setSecret(_ endpoint: Endpoint, _ device: String, _ secret: OwnTracksSecret = Self.secret) async throws {
        let store = endpoint.server.store
        try await store.setSecret(device: device, secret: secret, now: 1_715_679_000)
    }

    func encryptedUploader(_ outbox: Outbox, _ endpoint: Endpoint, secret: OwnTracksSecret = Self.secret) throws
        -> Uploader
    {
        var c = Uploader.Configuration(url: endpoint.url("/owntracks"))
        c.format = EncryptedOwnTracksFormat(secret: secret)
        c.token = "secret"
        (c.initialBackoff, c.maxBackoff, c.maxWait, c.drainAttempts) = (0.01, 0.05, 0, 2)
        return try Uploader(outbox: outbox, configuration: c)
    }

    /// Every record goes encrypted, is decrypted with the device's secret and stored once; the
    /// answer is `[]` encrypted under the same secret.
    @Test(arguments: StoreKind.allCases) func encryptedUploadsAreDecryptedStoredAndAnsweredEncrypted(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        try await setSecret(endpoint, "keeptrack/van-1")
        let (outbox, dir) = try filledOutbox(12)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try encryptedUploader(outbox, endpoint)
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        let trail = try await endpoint.server.store.trail(device: "keeptrack/van-1")
        #expect(trail.map(\.time) == (0..<12).map { (i: Int) -> Double in 1_715_679_000 + Double(i) })
        #expect(await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"decrypted\"}") == 12)
        // What went over the wire, by hand: an envelope; and what came back.
        let raw = Raw(endpoint: endpoint)
        let body = OwnTracksCrypto.encrypt(
            Array(#"{"_type":"location","tst":1715680000,"lat":48.2,"lon":11.6}"#.utf8),
            with: Self.secret)
        let r = try await raw.send(
            .POST, "/owntracks", body: String(decoding: body, as: UTF8.self),
            headers: [("X-Limit-U", "keeptrack"), ("X-Limit-D", "van-1")])
        #expect(r.status == 200)
        #expect(r.body.hasPrefix(#"{"_type":"encrypted","data":""#))
        #expect(try OwnTracksCrypto.decrypt(Array(r.body.utf8), with: Self.secret) == Array("[]".utf8))
        // A plain message from the same device is still taken, and answered in the clear.
        let plain = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"location","tst":1715680001,"lat":48.2,"lon":11.6}"#,
            headers: [("X-Limit-U", "keeptrack"), ("X-Limit-D", "van-1")])
        #expect(plain.status == 200 && plain.body == "[]")
        #expect(try await endpoint.server.store.device("keeptrack/van-1")?.points == 14)
        await raw.close()
        await u.shutdown()
        await endpoint.stop()
    }

    /// What does not authenticate is refused with a 4xx, nothing stored, each counted by outcome;
    /// an uploader with the wrong secret keeps its records (a settings problem, not the records').
    @Test(arguments: StoreKind.allCases) func whatDoesNotAuthenticateIsRefusedAndCounted(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        try await setSecret(endpoint, "anna/phone")
        let raw = Raw(endpoint: endpoint)
        let headers = [("X-Limit-U", "Anna"), ("X-Limit-D", "Phone")]
        let message = Array(#"{"_type":"location","tst":1715680000,"lat":48.2,"lon":11.6}"#.utf8)
        let wrong = String(decoding: OwnTracksCrypto.encrypt(message, with: Self.other), as: UTF8.self)
        let refused = try await raw.send(.POST, "/owntracks", body: wrong, headers: headers)
        #expect(refused.status == 403)
        #expect(refused.body.contains("does not authenticate"))
        let short = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"encrypted","data":"bm90IGEga2V5"}"#,
            headers: headers)
        #expect(short.status == 400)
        let notBase64 = try await raw.send(
            .POST, "/owntracks", body: #"{"_type":"encrypted","data":"!!"}"#, headers: headers)
        #expect(notBase64.status == 400)
        let noSecret = try await raw.send(
            .POST, "/owntracks", body: wrong, headers: [("X-Limit-U", "bob"), ("X-Limit-D", "tab")])
        #expect(noSecret.status == 415)
        #expect(try await endpoint.server.store.count() == 0)
        #expect(await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"not_authentic\"}") == 1)
        #expect(await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"malformed\"}") == 2)
        #expect(await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"no_secret\"}") == 1)
        #expect(await endpoint.metric("keeptrack_serve_requests_rejected_total") == 4)
        // The uploader with another secret: refused alike, the records stay.
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await setSecret(endpoint, "keeptrack/van-1")
        let u = try encryptedUploader(outbox, endpoint, secret: Self.other)
        try await drain(u)
        #expect(try outbox.stats().pending == 3)
        #expect(try outbox.deadLetters().isEmpty)
        #expect(u.stats.lastError?.contains("403") == true)
        #expect(try await endpoint.server.store.count() == 0)
        await raw.close()
        await u.shutdown()
        await endpoint.stop()
    }

    /// A Recorder that holds the key answers encrypted: an answer that opens is the answer; one
    /// sealed under another key means the server could not read ours either: not acknowledged.
    @Test func anEncryptedAnswerMustOpenWithOurSecret() {
        let format = EncryptedOwnTracksFormat(secret: Self.secret)
        #expect(format.problemWithAcknowledgement(OwnTracksCrypto.encrypt(Array("[]".utf8), with: Self.secret)) == nil)
        #expect(format.problemWithAcknowledgement(OwnTracksCrypto.encrypt(Array("[]".utf8), with: Self.other)) != nil)
        #expect(format.problemWithAcknowledgement(Array("[]".utf8)) == nil)
        #expect(format.problemWithAcknowledgement([]) == nil)
        let record = walk(1, device: "van-1")[0]
        let request = format.request(for: [record], device: "van-1", settings: UploadFormatSettings())
        let body = try? OwnTracksCrypto.decrypt(request?.body ?? [], with: Self.secret)
        #expect(body.flatMap { $0 } == OwnTracks.encode(record))
        #expect(request?.headers.contains { $0 == ("X-Limit-D", "van-1") } == true)
    }

    /// Over MQTT: the uploader publishes encrypted payloads, the endpoint decrypts them with the
    /// device's secret; a device without one stores nothing.
    @Test(arguments: StoreKind.allCases) func encryptedMQTTIsDecryptedByTheSubscriber(kind: StoreKind) async throws {
        let broker = try Broker()
        let endpoint = try await subscribedEndpoint(broker, store: kind)
        try await setSecret(endpoint, "keeptrack/van-1")
        let (outbox, dir) = try filledOutbox(20)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: "mqtt://127.0.0.1:\(broker.port)")
        c.format = EncryptedOwnTracksFormat(secret: Self.secret)
        (c.initialBackoff, c.maxBackoff, c.maxWait) = (0.01, 0.05, 0)
        let u = try Uploader(outbox: outbox, configuration: c)
        try await drain(u)
        try await waitUntilStored(20, endpoint)
        #expect(try await endpoint.server.store.trail(device: "keeptrack/van-1").count == 20)
        // Another device, encrypted, no secret: refused and counted, nothing stored.
        let (other, otherDir) = try filledOutbox(2, device: "van-2")
        defer { try? FileManager.default.removeItem(atPath: otherDir) }
        let v = try Uploader(outbox: other, configuration: c)
        try await drain(v)
        try await withTimeout(60, "the refusals counted") {
            while await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"no_secret\"}") < 2 {
                await endpoint.server.mqttActivity()
            }
        }
        #expect(try await endpoint.server.store.device("keeptrack/van-2") == nil)
        await u.shutdown()
        await v.shutdown()
        await endpoint.stop()
    }

    /// `--format overland` into `serve`'s Dawarich path: every location once, acknowledged by
    /// `{"result":"ok"}`; the same locations sent again are not stored twice.
    @Test(arguments: StoreKind.allCases) func overlandBatchesRoundTripAndAResentBatchIsStoredOnce(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let (outbox, dir) = try filledOutbox(250)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint, path: "/api/v1/overland/batches", format: "overland", batch: 100)
        try await drain(u)
        #expect(try outbox.stats().pending == 0)
        #expect(u.stats.requests == 3)
        let trail = try await endpoint.server.store.trail(device: "van-1")
        #expect(trail.map(\.time) == (0..<250).map { (i: Int) -> Double in 1_715_679_000 + Double(i) })
        #expect(trail[0].altitude == 520 && trail[0].speed == 1.2 && trail[0].horizontalAccuracy == 5)
        #expect(trail[0].verticalAccuracy == 8 && trail[0].course == 0)
        // The same locations again (a batch whose answer was lost): stored once.
        try outbox.append(walk(250))
        try await drain(u)
        #expect(try await endpoint.server.store.count() == 250)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 250)
        #expect(await endpoint.metric("keeptrack_serve_records_accepted_total{format=\"overland\"}") == 250)
        await u.shutdown()
        await endpoint.stop()
    }

    /// A 200 that is not `{"result":"ok"}` (a captive portal's page) acknowledges nothing.
    @Test func overlandKeepsABatchAnsweredWithAnythingButResultOk() async throws {
        var faults = Faults()
        faults.garbageNext = 100
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(5)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: endpoint.url("/api/v1/overland/batches"))
        c.format = OverlandFormat()
        c.token = "secret"
        (c.initialBackoff, c.maxBackoff, c.maxWait, c.drainAttempts) = (0.01, 0.05, 0, 2)
        let u = try Uploader(outbox: outbox, configuration: c)
        try await drain(u)
        #expect(try outbox.stats().pending == 5)
        #expect(u.stats.lastError?.contains("result") == true)
        await u.shutdown()
        await endpoint.stop()
    }

    /// The body Overland iOS sends (its README, "API"), with its bearer token or Dawarich's
    /// `?api_key=`: answered `{"result":"ok"}`, stored as CoreLocation meant it.
    @Test(arguments: StoreKind.allCases) func takesTheBodyOverlandIOSSends(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let body = String(decoding: try fixtureBytes("fuzz/overland/readme.json"), as: UTF8.self)
        let r = try await raw.send(
            .POST, "/api/v1/overland/batches", body: body, headers: [("Content-Type", "application/json")])
        #expect(r.status == 200)
        #expect(r.body == #"{"result":"ok"}"#)
        let trail = try await endpoint.server.store.trail(device: "overland")
        #expect(trail.count == 1)
        let p = try #require(trail.first)
        #expect(p.time == 1_443_711_600)  // 2015-10-01T08:00:00-0700
        #expect(p.latitude == 37.3318 && p.longitude == -122.030581)
        #expect(p.altitude == nil)  // vertical_accuracy -1: no altitude
        #expect(p.speed == 4 && p.horizontalAccuracy == 30 && p.verticalAccuracy == nil)
        #expect(p.attributes["battery_state"] == "charging" && p.attributes["battery_level"] == "0.89")
        #expect(p.attributes["motion"] == nil)
        // Dawarich's key in the query, no Authorization header; sent again: stored once.
        let again = try await raw.send(.POST, "/api/v1/overland/batches?api_key=secret", body: body, token: nil)
        #expect(again.status == 200 && again.body == #"{"result":"ok"}"#)
        #expect(try await endpoint.server.store.count() == 1)
        let wrong = try await raw.send(.POST, "/api/v1/overland/batches?api_key=guess", body: body, token: nil)
        #expect(wrong.status == 401)
        let bad = try await raw.send(.POST, "/api/v1/overland/batches", body: #"{"locations":[{"type":"Feature"}]}"#)
        #expect(bad.status == 400 && bad.body.contains("locations[0].geometry: missing"))
        await raw.close()
        await endpoint.stop()
    }

    /// Huge bodies within the request limit: an envelope whose data is over 1 MiB, an Overland batch
    /// of more locations than the limit: 413, nothing stored, counted.
    @Test func hugeEnvelopesAndBatchesAreRefusedAsTooLarge() async throws {
        let endpoint = try await Endpoint.start()
        try await setSecret(endpoint, "anna/phone")
        let raw = Raw(endpoint: endpoint)
        let data = String(repeating: "A", count: 2 << 20)
        let huge = #"{"_type":"encrypted","data":""# + data + #""}"#
        let headers = [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
        let envelope = try await raw.send(.POST, "/owntracks", body: huge, headers: headers)
        #expect(envelope.status == 413)
        let small =
            #"{"geometry":{"type":"Point","coordinates":[1,2]},"#
            + #""properties":{"timestamp":"2024-05-14T09:30:00Z"}}"#
        let many = Array(repeating: small, count: Overland.maxLocations + 1)
        let batch = #"{"locations":["# + many.joined(separator: ",") + "]}"
        let overland = try await raw.send(.POST, "/api/v1/overland/batches", body: batch)
        #expect(overland.status == 413)
        #expect(try await endpoint.server.store.count() == 0)
        #expect(await endpoint.metric("keeptrack_serve_encrypted_total{outcome=\"malformed\"}") == 1)
        #expect(await endpoint.metric("keeptrack_serve_requests_rejected_total") == 2)
        await raw.close()
        await endpoint.stop()
    }

    /// Both stores keep one secret a device: set, replaced, listed, removed.
    @Test(arguments: StoreKind.allCases) func bothStoresKeepOneSecretADevice(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let store = endpoint.server.store
        #expect(try await store.secret(device: "anna/phone") == nil)
        try await store.setSecret(device: "anna/phone", secret: Self.secret, now: 1_715_679_000)
        try await store.setSecret(device: "bob/tab", secret: Self.secret, now: 1_715_679_000)
        try await store.setSecret(device: "anna/phone", secret: Self.other, now: 1_715_679_100)
        #expect(try await store.secret(device: "anna/phone") == Self.other)
        #expect(try await store.secretDevices() == ["anna/phone", "bob/tab"])
        #expect(try await store.removeSecret(device: "anna/phone"))
        #expect(try await !store.removeSecret(device: "anna/phone"))
        #expect(try await store.secret(device: "anna/phone") == nil)
        #expect(try await store.secret(device: "nul\u{0}") == nil)
        #expect(DeviceSecrets.secret(hex: DeviceSecrets.hex(Self.secret)) == Self.secret)
        #expect(DeviceSecrets.secret(hex: "zz") == nil)
        #expect(DeviceSecrets.ownTracksDevice("Anna/Phone") == "anna/phone")
        #expect(DeviceSecrets.ownTracksDevice("anna") == nil && DeviceSecrets.ownTracksDevice("a/b/c") == nil)
        await endpoint.stop()
    }
}
