import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServerTesting
import Upload

/// A record no format can carry (a corrupt fix's speed of 1e300) is set aside as a dead letter with
/// its reason, and the rest go on: the encoders never trap on it, the outbox never stalls behind it.
@Suite("Uploader: records no server would take", .serialized)
struct InvalidRecordTests {
    @Test(arguments: StoreKind.allCases, ["json", "osmand", "owntracks"])
    func setsAsideWhatNoFormatCanCarryAndSendsTheRest(kind: StoreKind, format: String) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        var records = walk(6)
        records[2].speed = 1e300
        records[4].horizontalAccuracy = .infinity
        _ = try outbox.append(records)
        var c = Uploader.Configuration(url: endpoint.url(UploadFormats.named(format)!.serverPath))
        c.format = UploadFormats.named(format)!
        c.token = "secret"
        c.maxWait = 0
        let uploader = try Uploader(outbox: outbox, configuration: c)
        try await drain(uploader)
        #expect(try outbox.stats().pending == 0)
        let dead = try outbox.deadLetters()
        #expect(dead.map(\.record.sequence) == [3, 5])
        #expect(dead.allSatisfy { $0.status == 0 && $0.reason.hasPrefix("not sent: ") })
        let device =
            format == "owntracks" ? OwnTracks.deviceID(user: "keeptrack", device: outbox.device) : outbox.device
        #expect(try await endpoint.server.store.trail(device: device).count == 4)
        await uploader.shutdown()
        await endpoint.stop()
    }

    @Test func theEncodersLeaveOutWhatTheyCannotWrite() {
        var r = TrailRecord(
            device: "d", sequence: 1, time: 1_715_679_000, latitude: 1, longitude: 2,
            horizontalAccuracy: 1e300, speed: .infinity, course: 1e20)
        #expect(!OsmAnd.parameters(r).contains("null"))
        #expect(!OsmAnd.parameters(r).contains("accuracy"))
        #expect(OwnTracks.encode(r).map { String(decoding: $0, as: UTF8.self).contains("acc") } == false)
        r.time = 1e300
        #expect(!OsmAnd.parameters(r).contains("timestamp"))
    }
}
