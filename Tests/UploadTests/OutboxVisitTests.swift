import Formats
import Foundation
import Geo
import KeepTrackTesting
import GRDB
import Testing
import TrackServerTesting
@testable import Upload

/// Issue 27, item 3: visits and trips in the outbox.
@Suite("Outbox: visits and trips", .offThePool)
struct OutboxVisitTests {
    static func visit(departure: Double?) -> TrailRecord {
        var r = TrailRecord(
            device: "", sequence: 0, kind: .visit, time: 1_715_679_000, latitude: 48.1,
            longitude: 11.5, horizontalAccuracy: 6.5)
        r.span = TrailRecord.Span(end: departure)
        r.decidedAt = 1_715_679_180
        return r
    }

    static let trip: TrailRecord = {
        var r = TrailRecord(
            device: "", sequence: 0, kind: .trip, time: 1_715_679_600, latitude: 48.1,
            longitude: 11.5)
        r.span = TrailRecord.Span(
            end: 1_715_680_000, endLatitude: 48.2, endLongitude: 11.6, distance: 12_400,
            maximumSpeed: 16.5)
        r.decidedAt = 1_715_680_180
        return r
    }()

    /// Stored with their spans, and sent ahead of a location backlog as region transitions are; a
    /// dead-lettered trip keeps its span, and comes back with it when retried.
    @Test func visitsAndTripsKeepTheirSpanAndJumpTheBacklog() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        try outbox.append(
            walk(3) + [Self.visit(departure: nil)] + walk(2) + [
                Self.visit(departure: 1_715_679_500),
                Self.trip,
            ])
        let batch = try outbox.nextBatch(maxCount: 10)
        #expect(batch.map(\.sequence) == [4, 7, 8, 1, 2, 3, 5, 6])
        #expect(batch[0].span == TrailRecord.Span(end: nil) && batch[0].decidedAt == 1_715_679_180)
        #expect(batch[1].span?.end == 1_715_679_500)
        #expect(batch[2].span == Self.trip.span && batch[2].kind == .trip)
        #expect(batch[3].span == nil)
        try outbox.deadLetter([8], status: 400, reason: "refused")
        #expect(try outbox.deadLetters().first?.record.span == Self.trip.span)
        #expect(try outbox.retryDeadLetters(nil) == 1)
        #expect(try outbox.nextBatch(maxCount: 3).map(\.span?.distance) == [nil, nil, 12_400])
    }

    /// An outbox of the version before visits (v6), with records waiting, opens: it gains the span
    /// columns, keeps its records, order and numbers, and takes visits.
    @Test func anOutboxMadeBeforeVisitsOpensAndTakesThem() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sql = """
            PRAGMA page_size = 1024;
            PRAGMA journal_mode = WAL;
            CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
            INSERT INTO grdb_migrations VALUES ('v1-outbox'), ('v2-dead-letter'), ('v3-pending-count-and-age-index'),
                ('v4-count-in-memory'), ('v5-decided-at'), ('v6-one-page-a-commit');
            CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
            INSERT INTO meta (key, value) VALUES ('evicted', 0), ('uploaded', 0), ('device', 'van-1'), ('lastseq', 2);
            CREATE TABLE dead_letter (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT, time REAL NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                appended REAL NOT NULL, status INTEGER NOT NULL, reason TEXT NOT NULL, failed REAL NOT NULL,
                decided REAL);
            CREATE TABLE outbox (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT, time REAL NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                priority INTEGER NOT NULL, appended REAL NOT NULL, decided REAL);
            CREATE INDEX outbox_transitions ON outbox (seq) WHERE priority = 0;
            INSERT INTO outbox (seq, kind, region, time, lat, lon, priority, appended, decided) VALUES
                (3, 'location', NULL, 50, 48, 11, 1, 100, NULL), (4, 'exit', 'home', 55, 48, 11, 0, 100, 60);
            """
        try runSQLite(dir + "/outbox.sqlite", sql)
        let outbox = try Outbox(path: dir + "/outbox.sqlite", clock: ManualClock(now: .init(secondsSince1970: 200)))
        #expect(outbox.device == "van-1")
        #expect(try outbox.append([Self.visit(departure: nil)]).stored.map(\.sequence) == [5])
        let batch = try outbox.nextBatch(maxCount: 10)
        #expect(batch.map(\.sequence) == [4, 5, 3])
        #expect(batch.map(\.kind) == [.exit, .visit, .location])
        #expect(batch[0].span == nil && batch[1].span == TrailRecord.Span(end: nil))
    }
}
