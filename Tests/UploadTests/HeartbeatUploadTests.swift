import Formats
import Foundation
import Testing
import TrackServerTesting
import Upload

/// Issue 29, item 4: a heartbeat reaches a real endpoint in each format, as a position (never
/// left out with the region events).
@Suite("Uploader: heartbeat records on every wire")
struct HeartbeatUploadTests {
    @Test(arguments: ["json", "osmand", "owntracks"])
    func aHeartbeatReachesTheEndpointAsAPosition(format: String) async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var records = walk(3)
        var beat = records[2]
        beat.kind = .heartbeat
        beat.time += 60
        records.append(beat)
        try outbox.append(records)
        let path = UploadFormats.named(format)!.serverPath
        let u = try uploader(outbox, endpoint, path: path, format: format, regionEvents: false)
        try await drain(u)
        #expect(u.stats.uploaded == 4)
        #expect(u.stats.skipped == 0)
        let device = format == "owntracks" ? "keeptrack/van-1" : "van-1"
        let trail = try await endpoint.server.store.trail(device: device)
        try #require(trail.count == 4)
        let stored = trail[3]
        #expect(stored.time == beat.time && stored.latitude == beat.latitude && stored.longitude == beat.longitude)
        switch format {
        case "json":
            #expect(stored.kind == .heartbeat)
        case "owntracks":
            // The Recorder's way: a location, its trigger kept.
            #expect(stored.kind == .location && stored.attributes["t"] == "p")
        default:
            #expect(stored.kind == .location && stored.attributes.isEmpty)
        }
        await u.shutdown()
        await endpoint.stop()
    }
}
