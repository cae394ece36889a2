import Formats
import Foundation
import Geo
import KeepTrackTesting
import Synchronization
import Testing
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// The live stream's read-back on PostgreSQL (``PostgresTrackStore/followStored(clock:)``): what a
/// statement stored is read by its storage numbers, whatever happened to its rows since.
@Suite("PostgreSQL store: the live stream's read-back")
struct StoredStreamTests {
    /// Found by `StreamTests` failing now and then: a statement's rows were read back by their
    /// transaction (`xmin`), which the detector's catch-up changes when it marks an outlier or a pending
    /// point (an `UPDATE`) before the listener reads them; they were then never streamed. Here the rows
    /// are stored, one of them updated in a transaction of its own, and only then announced, in one
    /// session; the listener publishes them, and nothing twice.
    @Test func rowsUpdatedBeforeTheyAreReadBackAreStreamedOnce() async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let store = try #require(try await openTrackStore(cluster.url(name)) as? PostgresTrackStore)
        let (arrivals, arrived) = AsyncStream.makeStream(of: [TrailRecord].self)
        let subscription = store.storedRecords.subscribe { arrived.yield($0) }
        let follow = Task { try await store.followStored(clock: WallClock()) }
        do {
            let seen = try await withTimeout(120, "the records on the stream") {
                var it = arrivals.makeAsyncIterator()
                var seen: [String] = []
                func take(_ count: Int) async {
                    while seen.count < count, let batch = await it.next() {
                        seen += batch.map { "\($0.device):\(Int($0.time))" }
                    }
                }
                // Published once the listener is in place, whenever that is: from the store's opening on.
                _ = try await store.insert(walk(2, device: "van"), format: "osmand", received: 1)
                await take(2)
                _ = try await offThePool {
                    try cluster.psql(
                        """
                        BEGIN;
                        INSERT INTO positions (key, device, kind, time, position, format, received) VALUES
                            ('bus-1', 'bus', 'location', to_timestamp(1715679100), 'SRID=4326;POINT(11.5 48.1)',
                             'osmand', now()),
                            ('bus-2', 'bus', 'location', to_timestamp(1715679101), 'SRID=4326;POINT(11.6 48.1)',
                             'osmand', now());
                        COMMIT;
                        BEGIN;
                        UPDATE positions SET outlier = 'jump' WHERE key = 'bus-2';
                        COMMIT;
                        SELECT pg_notify('keeptrack_stored', current_setting('keeptrack.stored'));
                        """, database: name)
                }
                await take(4)
                _ = try await store.insert(walk(1, from: 1_715_679_200, device: "van"), format: "osmand", received: 1)
                await take(5)
                return seen
            }
            #expect(seen == ["van:1715679000", "van:1715679001", "bus:1715679100", "bus:1715679101", "van:1715679200"])
        } catch {
            Issue.record(error)
        }
        follow.cancel()
        store.storedRecords.unsubscribe(subscription)
        arrived.finish()
        await store.close()
    }

    /// What a subscriber is told, in order.
    enum Told: Hashable, Sendable {
        case devices([String])
        case records([String])
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
    }

    /// A store on a fresh database whose listener follows it, a subscriber that needs the records
    /// while `needs` says so and tells what it is told in order: `body` gets the store, the
    /// database's name and what is told; then the listener stops and the store closes.
    func following(
        needs: Flag, _ what: String,
        _ body: @escaping @Sendable (PostgresTrackStore, String, inout AsyncStream<Told>.Iterator) async throws -> Void
    ) async throws {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let store = try #require(try await openTrackStore(cluster.url(name)) as? PostgresTrackStore)
        let (arrivals, arrived) = AsyncStream.makeStream(of: Told.self)
        let subscription = store.storedRecords.subscribe(
            needsRecords: { needs.value.load(ordering: .relaxed) },
            devices: { arrived.yield(.devices($0)) },
            records: { arrived.yield(.records($0.map { "\($0.device):\(Int($0.time))" })) })
        let follow = Task { try await store.followStored(clock: WallClock()) }
        do {
            try await withTimeout(120, what) {
                var it = arrivals.makeAsyncIterator()
                try await body(store, name, &it)
            }
        } catch {
            Issue.record(error)
        }
        follow.cancel()
        store.storedRecords.unsubscribe(subscription)
        arrived.finish()
        await store.close()
    }

    /// While no subscriber needs the records (the live stream without a client), the listener reads
    /// and publishes only the devices of each statement, each once; once one needs them, the
    /// records of the statements read after.
    @Test func whileNoSubscriberNeedsTheRecordsOnlyTheDevicesArePublished() async throws {
        let needs = Flag()
        try await following(needs: needs, "the devices, then the records, on the stream") { store, _, it in
            #expect(!store.storedRecords.needsRecords)
            _ = try await store.insert(
                walk(3, device: "van") + walk(2, from: 1_715_679_100, device: "bus"), format: "osmand", received: 1)
            let first = await it.next()
            guard case .devices(let devices) = first else {
                Issue.record("expected the devices only, got \(String(describing: first))")
                return
            }
            #expect(devices.sorted() == ["bus", "van"])
            needs.value.store(true, ordering: .relaxed)
            #expect(store.storedRecords.needsRecords)
            _ = try await store.insert(walk(1, from: 1_715_679_200, device: "van"), format: "osmand", received: 1)
            #expect(await it.next() == .records(["van:1715679200"]))
        }
    }

    /// A row inserted with its storage number given, as psql writes it.
    static func row(_ device: String, _ stored: Int, _ time: Int) -> String {
        "(\(stored), '\(device)-\(stored)', '\(device)', 'location', to_timestamp(\(time)), "
            + "'SRID=4326;POINT(11.5 48.1)', 'osmand', now())"
    }

    static func insert(_ rows: [String]) -> String {
        "INSERT INTO positions (stored, key, device, kind, time, position, format, received) "
            + "OVERRIDING SYSTEM VALUE VALUES \(rows.joined(separator: ", "));"
    }

    /// Announces the last statement of the session, as the store does after its commit.
    static let announce = "SELECT pg_notify('keeptrack_stored', current_setting('keeptrack.stored'));"

    /// A statement's announcement names its storage numbers and devices: while no subscriber needs
    /// the records, the listener publishes the devices and counts exactly those numbers published
    /// without reading a row. Shown by rows deleted before their announcement (their device is still
    /// told), then by two statements whose numbers interleave, as concurrent `COPY`s' do: once a
    /// subscriber needs the records, the second one's are published, all of them, and not the
    /// first one's, told as devices already.
    @Test func anAnnouncementThatNamesItsDevicesIsPublishedWithoutAReadAndCountedExactly() async throws {
        let cluster = try await Postgres.shared()
        let needs = Flag()
        try await following(needs: needs, "the devices, then the records, on the stream") { store, name, it in
            // Once the listener is in place (the van's devices through it).
            _ = try await store.insert(walk(2, device: "van"), format: "osmand", received: 1)
            #expect(await it.next() == .devices(["van"]))
            _ = try await offThePool {
                try cluster.psql(
                    "BEGIN; \(Self.insert([Self.row("bus", 1_000, 1_715_679_100), Self.row("tram", 1_001, 1_715_679_101)])) "
                        + "COMMIT; BEGIN; DELETE FROM positions WHERE device IN ('bus', 'tram'); COMMIT; \(Self.announce)",
                    database: name)
            }
            #expect(await it.next() == .devices(["bus", "tram"]))
            _ = try await offThePool {
                try cluster.psql(
                    Self.insert([Self.row("a", 2_000, 1_715_679_200), Self.row("a", 2_002, 1_715_679_202)])
                        + Self.announce, database: name)
            }
            #expect(await it.next() == .devices(["a"]))
            needs.value.store(true, ordering: .relaxed)
            _ = try await offThePool {
                try cluster.psql(
                    Self.insert([Self.row("b", 2_001, 1_715_679_201), Self.row("b", 2_003, 1_715_679_203)])
                        + Self.announce, database: name)
            }
            #expect(await it.next() == .records(["b:1715679201", "b:1715679203"]))
        }
    }

    /// A statement whose devices would not fit in a notification (300 of 100 bytes each) is
    /// announced by its range alone, and read: its devices are told all the same, in storage order.
    @Test func aStatementTooLargeToNameItsDevicesIsReadInstead() async throws {
        let cluster = try await Postgres.shared()
        let devices = (0..<300).map { String(format: "%03d", $0) + String(repeating: "d", count: 97) }
        try await following(needs: Flag(), "the devices on the stream") { store, name, it in
            _ = try await store.insert(walk(1, device: "van"), format: "osmand", received: 1)
            #expect(await it.next() == .devices(["van"]))
            let rows = devices.enumerated().map { Self.row($1, 1_000 + $0, 1_715_679_100 + $0) }
            let payload = try await offThePool {
                try cluster.psql(
                    Self.insert(rows) + " SELECT current_setting('keeptrack.stored'); " + Self.announce,
                    database: name)
            }
            #expect(payload.split(separator: "\n").count == 1, "\(payload.prefix(200))")
            #expect(await it.next() == .devices(devices))
        }
    }
}
