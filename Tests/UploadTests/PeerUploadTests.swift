import Formats
import Foundation
import Geo
import Testing
import TrackServerTesting
import TrackServer
@testable import Upload

/// The uploader against what real servers do with its requests (issue 13, items 1-6).
@Suite("Uploader: what real servers do with our requests", .serialized)
struct PeerUploadTests {
    /// A wrong URL path (docs/uploads.md's `http://HOST:PORT/` without `/v1/locations`), or
    /// OsmAnd sent where no OsmAnd is spoken: every record is refused alike. A settings problem:
    /// the records stay, the drain stops, the reason says what to fix (before: all dead letters).
    @Test(arguments: [("json", "/"), ("osmand", "/v1/locations")])
    func aRejectionEveryRecordGetsAlikeKeepsTheRecordsAndSaysWhatToFix(format: String, path: String) async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(40)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint, path: path, format: format, batch: 20)
        try await drain(u)
        #expect(try outbox.stats().pending == 40)
        #expect(try outbox.deadLetters().isEmpty)
        #expect(u.stats.deadLettered == 0)
        #expect(u.stats.lastError?.contains("a settings problem, not the records; check the upload URL") == true)
        // (OsmAnd keeps a full batch's last location for the next, in case its transitions follow.)
        #expect(
            u.stats.lastError?.contains("answered 400 to every one of \(format == "json" ? 20 : 19) records alike")
                == true)
        #expect(try await endpoint.server.store.count() == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    /// Traccar's OsmAnd clients: a region transition is an event on the position that decided it;
    /// never a position of its own at the crossing's (earlier) time.
    @Test(arguments: StoreKind.allCases) func transitionsReachTraccarAsEventsOnTheirPosition(kind: StoreKind)
        async throws
    {
        let endpoint = try await Endpoint.start(store: kind)
        let (outbox, dir) = try filledOutbox(0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var records = walk(6)
        // The location at index 3 decided an entry (evidence since index 1); index 5's exit has no
        // location of its own in the outbox (a distance filter held it back).
        var enter = records[3]
        enter.kind = .enter
        enter.region = "home"
        enter.time = records[1].time
        enter.decidedAt = records[3].time
        var exit = records[5]
        exit.kind = .exit
        exit.region = "home"
        exit.time = records[4].time + 0.5
        exit.decidedAt = records[5].time + 7
        records = Array(records[0...3]) + [enter, records[4], exit]
        try outbox.append(records)
        let u = try uploader(outbox, endpoint, path: "/", format: "osmand")
        try await drain(u)
        let trail = try await endpoint.server.store.trail(device: "van-1")
        #expect(trail.count == 6)
        #expect(
            trail.map(\.time) == [
                records[0].time, records[1].time, records[2].time, records[3].time, records[5].time,
                exit.decidedAt!,
            ])
        #expect(trail[3].attributes == ["event": "geofenceEnter", "geofence": "home"])
        #expect(trail[5].attributes == ["event": "geofenceExit", "geofence": "home"])
        #expect(trail.allSatisfy { $0.kind == .location })
        #expect(try outbox.stats().pending == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    @Test(arguments: ["osmand", "owntracks"])
    func regionEventsAreLeftOutWhenTheUserSaysSo(format: String) async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(0)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var records = walk(3)
        var enter = records[1]
        enter.kind = .enter
        enter.region = "home"
        enter.decidedAt = enter.time
        records.insert(enter, at: 2)
        try outbox.append(records)
        let path = UploadFormats.named(format)!.serverPath
        let u = try uploader(outbox, endpoint, path: path, format: format, regionEvents: false)
        try await drain(u)
        #expect(u.stats.skipped == 1)
        #expect(u.stats.uploaded == 3)
        let device = format == "osmand" ? "van-1" : "keeptrack/van-1"
        let trail = try await endpoint.server.store.trail(device: device, includeInvalid: true)
        #expect(trail.count == 3)
        #expect(trail.allSatisfy { $0.kind == .location && $0.attributes["event"] == nil })
        await u.shutdown()
        await endpoint.stop()
    }

    /// OwnTracks' user: its own option, and a `--header` of the same name replaces the built-in
    /// one instead of adding a second (the Recorder takes the first: it would have filed the device
    /// under `keeptrack`).
    @Test(arguments: [(nil as String?, [("x-limit-u", "bob")]), ("anna", [])])
    func ownTracksIsFiledUnderTheUsersName(user: String?, headers: [(String, String)]) async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(3)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: endpoint.url("/owntracks"))
        c.format = OwnTracksFormat()
        c.token = "secret"
        c.maxWait = 0
        c.headers = headers
        if let user { c.formatSettings.user = user }
        let u = try Uploader(outbox: outbox, configuration: c)
        try await drain(u)
        let expected = user ?? "bob"
        #expect(try await endpoint.server.store.devices().map(\.id) == ["\(expected)/van-1"])
        await u.shutdown()
        await endpoint.stop()
    }

    /// Dead letters come back once the setting is fixed: `keeptrack outbox retry`, then the next
    /// upload stores them under their own ids; `purge` deletes them.
    @Test func deadLettersCanBeSentAgainOrPurged() async throws {
        let endpoint = try await Endpoint.start()
        let (outbox, dir) = try filledOutbox(10)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try outbox.deadLetter([2, 3, 4, 7], status: 400, reason: "id: missing")
        #expect(try outbox.stats().pending == 6 && outbox.stats().deadLetters == 4)
        #expect(
            try outbox.deadLetterLines().first
                == #"{"seq":2,"kind":"location","time":"2024-05-14T09:30:01.000Z","status":400,"reason":"id: missing"}"#
        )
        #expect(try outbox.retryDeadLetters([2, 3]) == 2)
        #expect(try outbox.stats().pending == 8)
        #expect(try outbox.deadLetters().map(\.record.sequence) == [4, 7])
        let u = try uploader(outbox, endpoint)
        try await drain(u)
        #expect(try await endpoint.server.store.trail(device: "van-1").map(\.sequence) == [1, 2, 3, 5, 6, 8, 9, 10])
        #expect(try outbox.purgeDeadLetters() == 2)
        #expect(try outbox.stats().deadLetters == 0)
        #expect(try outbox.retryDeadLetters(nil) == 0)
        await u.shutdown()
        await endpoint.stop()
    }

    /// Traccar stores a re-sent position twice, so the window is one request: when an answer is
    /// lost, only that request's record goes again, not the others in flight or in the batch (our
    /// endpoint recognises it: exactly one duplicate).
    @Test(arguments: StoreKind.allCases) func aLostOsmAndAnswerResendsOnlyItsOwnRecord(kind: StoreKind) async throws {
        var faults = Faults()
        faults.dropNext = 1
        let endpoint = try await Endpoint.start(store: kind, faults: faults)
        let (outbox, dir) = try filledOutbox(40)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint, path: "/", format: "osmand")
        try await drain(u)
        #expect(try await endpoint.server.store.count() == 40)
        #expect(await endpoint.metric("keeptrack_serve_records_duplicate_total") == 1)
        #expect(u.stats.retries == 1)
        await u.shutdown()
        await endpoint.stop()
    }

    /// A backlog of single-record requests drains with several in flight, every record once.
    @Test(arguments: StoreKind.allCases) func anOsmAndBacklogDrainsWithSeveralRequestsInFlight(kind: StoreKind)
        async throws
    {
        var faults = Faults()
        faults.delay = 0.05
        let endpoint = try await Endpoint.start(store: kind, faults: faults)
        let (outbox, dir) = try filledOutbox(64)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let u = try uploader(outbox, endpoint, path: "/", format: "osmand")
        try await drain(u)
        #expect(try await endpoint.server.store.count() == 64)
        #expect(u.stats.requests == 64)
        await u.shutdown()
        await endpoint.stop()
    }
}
