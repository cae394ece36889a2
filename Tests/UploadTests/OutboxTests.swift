import Formats
import Foundation
import Geo
import KeepTrackTesting
import GRDB
import Synchronization
import Testing
import TrackServerTesting
@testable import Upload

@Suite("Outbox", .offThePool)
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

    @Test func aGeneratedDeviceIdHasEightHexDigits() throws {
        #expect(Outbox.generatedDevice(0xc463747) == "keeptrack-0c463747")
        #expect(Outbox.generatedDevice(0) == "keeptrack-00000000")
        #expect(Outbox.generatedDevice(.max) == "keeptrack-ffffffff")
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let made = try Outbox(path: dir + "/outbox.sqlite").device
        #expect(made.hasPrefix("keeptrack-") && made.count == 18 && UInt32(made.dropFirst(10), radix: 16) != nil)
    }

    /// A write that failed on a full disk says what to do; another failure says nothing more.
    @Test func aFullDiskIsSaidWithWhatToDo() {
        #expect(Outbox.hint(DatabaseError(resultCode: .SQLITE_FULL)).contains("its disk is full: free space there"))
        #expect(Outbox.hint(DatabaseError(resultCode: .SQLITE_IOERR)) == "")
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

    @Test func sequenceNumbersAreNeverReusedHoweverTheLastRecordsLeft() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Outbox.Configuration()
        c.maxCount = 3
        let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: c)
        // Acknowledged, every one: the table is empty, the numbers go on.
        try outbox.append(walk(2))
        try outbox.acknowledge([1, 2])
        #expect(try outbox.append(walk(1)).stored.map(\.sequence) == [3])
        // The newest dead-lettered, then purged.
        try outbox.deadLetter([3], status: 400, reason: "refused")
        try outbox.purgeDeadLetters()
        #expect(try outbox.append(walk(1)).stored.map(\.sequence) == [4])
        // Evicted by the count cap, the newest included (a batch larger than the cap).
        let evicting = try outbox.append(walk(5))
        #expect(evicting.stored.map(\.sequence) == [5, 6, 7, 8, 9])
        #expect(evicting.evicted.byCount == 3)
        try outbox.acknowledge([7, 8, 9])
        // Reopened with nothing left: still no number given twice.
        let again = try Outbox(path: dir + "/outbox.sqlite")
        #expect(try again.stats().pending == 0)
        #expect(try again.stats().lastSequence == 9)
        #expect(try again.append(walk(1)).stored.map(\.sequence) == [10])
    }

    @Test func aLocationsCommitWritesOnePageOfOneKilobyte() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        try outbox.append(walk(1))
        /// The WAL's frames written by `records`' commit, from an empty WAL.
        func framesWritten(_ records: [TrailRecord]) throws -> Int {
            try outbox.pool.writeWithoutTransaction { db in
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try outbox.append(records)
            return try outbox.pool.writeWithoutTransaction { db in
                // (busy, frames in the WAL, frames checkpointed)
                let row = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)")
                return row?[1] ?? -1
            }
        }
        #expect(try outbox.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 1024)
        // The table's last leaf alone: no sequence table, no index for a location.
        #expect(try framesWritten(walk(1)) == 1)
        // A transition adds its partial index's page.
        var transition = walk(1)
        transition[0].kind = .enter
        transition[0].region = "home"
        #expect(try framesWritten(transition) == 2)
    }

    @Test func anOutboxMadeBeforeVersionSixKeepsItsRecordsOrderAndNumbers() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // As v1-v5 left it: AUTOINCREMENT (9 given, 8 and 9 acknowledged), the (priority, seq) index,
        // 4 KB pages; a transition waiting behind two locations, a dead letter.
        let sql = """
            PRAGMA journal_mode = WAL;
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1-outbox'), ('v2-dead-letter'), ('v3-pending-count-and-age-index'),
                ('v4-count-in-memory'), ('v5-decided-at');
            CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, region TEXT,
                time REAL NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL,
                course REAL, priority INTEGER NOT NULL, appended REAL NOT NULL, decided REAL);
            CREATE INDEX outbox_order ON outbox (priority, seq);
            CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
            INSERT INTO meta (key, value) VALUES ('evicted', 0), ('uploaded', 6), ('device', 'van-1');
            CREATE TABLE dead_letter (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT, time REAL NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                appended REAL NOT NULL, status INTEGER NOT NULL, reason TEXT NOT NULL, failed REAL NOT NULL,
                decided REAL);
            INSERT INTO outbox (seq, kind, region, time, lat, lon, priority, appended) VALUES
                (5, 'location', NULL, 50, 48, 11, 1, 100), (6, 'location', NULL, 60, 48, 11, 1, 100),
                (7, 'enter', 'home', 70, 48, 11, 0, 100);
            INSERT INTO dead_letter (seq, kind, time, lat, lon, appended, status, reason, failed) VALUES
                (4, 'location', 40, 48, 11, 100, 400, 'refused', 100);
            UPDATE sqlite_sequence SET seq = 9 WHERE name = 'outbox';
            """
        try runSQLite(dir + "/outbox.sqlite", sql)
        let clock = ManualClock(now: .init(secondsSince1970: 200))  // appended 100 s ago
        let outbox = try Outbox(path: dir + "/outbox.sqlite", clock: clock)
        #expect(outbox.device == "van-1")
        // Converted to 1 KB pages (a VACUUM: 3 records wait), and back in WAL mode.
        #expect(try outbox.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 1024)
        #expect(try outbox.pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
        #expect(try outbox.stats().pending == 3)
        #expect(try outbox.stats().lastSequence == 9)
        #expect(try outbox.nextBatch(maxCount: 10).map(\.sequence) == [7, 5, 6])
        #expect(try outbox.nextBatch(maxCount: 10).first?.region == "home")
        #expect(try outbox.append(walk(1)).stored.map(\.sequence) == [10])
        #expect(try outbox.retryDeadLetters(nil) == 1)
        let all = try outbox.nextBatch(maxCount: 10, transitionsFirst: false).map(\.sequence)
        #expect(all == [4, 5, 6, 7, 10])
    }

    @Test func anUnwritableFileIsNamed() {
        #expect {
            try Outbox(path: "/nonexistent-dir/outbox.sqlite")
        } throws: { error in
            (error as? UploadError)?.message.contains("/nonexistent-dir/outbox.sqlite") == true
        }
    }
}
