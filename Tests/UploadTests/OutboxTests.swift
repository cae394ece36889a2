import Formats
import Foundation
import Geo
import Synchronization
import Testing
import TrackServerTesting
@testable import Upload

@Suite("Outbox")
struct OutboxTests {
    @Test func appendsGiveIncreasingIdsThatSurviveAReopenAndAreNeverReused() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Outbox.Configuration()
        c.device = "van-1"
        let first = try Outbox(path: dir + "/outbox.sqlite", configuration: c)
        let stored = try first.append(walk(3)).stored
        #expect(stored.map(\.id) == ["van-1:1", "van-1:2", "van-1:3"])
        try first.acknowledge([1, 2, 3])
        // Reopened (a restart): the device and the sequence carry on.
        let second = try Outbox(path: dir + "/outbox.sqlite")
        #expect(second.device == "van-1")
        #expect(try second.append(walk(1)).stored.map(\.id) == ["van-1:4"])
        #expect(try second.stats().lastSequence == 4)
        // The waiting count is counted at open: a third process sees the one record.
        try second.append(walk(2))
        let third = try Outbox(path: dir + "/outbox.sqlite")
        #expect(try third.stats().pending == 3)
    }

    @Test func regionTransitionsJumpTheBacklogAndOrderIsKept() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        var records = walk(4)
        records[2].kind = .enter
        records[2].region = "home"
        try outbox.append(records)
        #expect(try outbox.nextBatch(maxCount: 10).map(\.sequence) == [3, 1, 2, 4])
        #expect(try outbox.nextBatch(maxCount: 2).map(\.sequence) == [3, 1])
    }

    @Test func capsEvictTheOldestAndCountIt() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let clock = ManualClock(now: .init(secondsSince1970: 1000))
        var c = Outbox.Configuration()
        c.maxCount = 5
        c.maxAge = 60
        let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: c, clock: clock)
        try outbox.append(walk(4))
        let more = try outbox.append(walk(3))
        #expect(more.evicted.byCount == 2)
        #expect(try outbox.nextBatch(maxCount: 10).map(\.sequence) == [3, 4, 5, 6, 7])
        clock.advance(by: .seconds(61))
        let later = try outbox.append(walk(1))
        #expect(later.evicted.byAge == 5)
        let stats = try outbox.stats()
        #expect(stats.pending == 1)
        #expect(stats.evicted == 7)
    }

    @Test func deadLettersKeepTheRecordAndTheServersReason() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        try outbox.append(walk(3))
        try outbox.deadLetter([2], status: 400, reason: "records[0]: lat 95 is out of range")
        #expect(try outbox.nextBatch(maxCount: 10).map(\.sequence) == [1, 3])
        let dead = try outbox.deadLetters()
        #expect(dead.map(\.record.sequence) == [2])
        #expect(dead.first?.status == 400)
        #expect(dead.first?.reason == "records[0]: lat 95 is out of range")
    }

    @Test func anotherDeviceIdWithRecordsInFlightIsRefused() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Outbox.Configuration()
        c.device = "van-1"
        try Outbox(path: dir + "/outbox.sqlite", configuration: c).append(walk(1))
        c.device = "van-2"
        #expect(throws: UploadError.self) { try Outbox(path: dir + "/outbox.sqlite", configuration: c) }
    }

    @Test func anUnwritableFileIsNamed() {
        #expect {
            try Outbox(path: "/nonexistent-dir/outbox.sqlite")
        } throws: { error in
            (error as? UploadError)?.message.contains("/nonexistent-dir/outbox.sqlite") == true
        }
    }
}
