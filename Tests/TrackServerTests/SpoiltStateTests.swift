import EndpointEvents
import Foundation
import GRDB
import Geo
import KeepTrackTesting
import LocationService
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// What a store derives from a device's records and saves to go on from (its stop detector's state
/// and checkpoints, its event state) can stop reading back: a disk's damage, a hand's edit, another
/// version's format. The records are what counts: the next batch is stored all the same, and what
/// was derived is derived again from them, with the same answers and the same events as a device
/// whose states were never spoilt; a query that meets a spoilt checkpoint before then says which.
@Suite("Endpoint: saved states that do not read back", .serialized)
struct SpoiltStateTests {
    /// Three devices on one trail: `twin` untouched, `state` with its detector's state and event
    /// state spoilt (its checkpoints good), `all` with every checkpoint spoilt too. A geofence on
    /// the trail gives the event states something to remember.
    @Test(arguments: StoreKind.allCases) func theNextBatchDerivesThemAgainWithTheSameAnswersAndEvents(
        kind: StoreKind
    ) async throws {
        let devices = ["twin", "state", "all"]
        let trails = devices.map { StoredStopsTests.trail(seed: 21, device: $0) }
        // The server's clock at the trail's start, never moved: no device is ever offline (a
        // presence sweep on the wall clock would find whichever was stored first silent).
        let endpoint = try await Endpoint.start(
            store: kind, clock: ManualClock(now: EpochInstant(secondsSince1970: trails[0][0].time)))
        do {
            let store = endpoint.server.store
            // Around the point of the trail farthest from both its ends: entered, then left.
            let at = trails[0].map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }
            let far = at.map { min(Geodesy.distance($0, at.first!), Geodesy.distance($0, at.last!)) }
            let middle = far.indices.max { far[$0] < far[$1] }!
            try await store.replaceGeofences([
                Geofence(region: try Region(id: "middle", center: at[middle], radius: min(far[middle] / 2, 1000)))
            ])
            let half = trails[0].count / 2
            func send(_ range: Range<Int>) async throws {
                for trail in trails {
                    for at in stride(from: range.lowerBound, to: range.upperBound, by: 40) {
                        let batch = Array(trail[at..<min(range.upperBound, at + 40)])
                        let (accepted, _) = try await store.insert(batch, format: "osmand", received: batch[0].time)
                        #expect(accepted == batch.count)
                    }
                }
                await store.storedStopsSettled()
            }
            try await send(0..<half)
            try await Self.spoil(endpoint, kind: kind)

            // Before the next batch: a query that meets a spoilt checkpoint names the device.
            await #expect {
                _ = try await store.stops(device: "all")
            } throws: { error in
                let e = error as? TrackStoreError
                return e?.code == .corrupt && e?.device == "all"
                    && e?.message.hasPrefix("device all's stops checkpoint at ") == true
            }

            try await send(half..<trails[0].count)
            let twin = try await Self.events(store, device: "twin")
            #expect(twin.contains { $0.kind == .geofenceEnter } && twin.contains { $0.kind == .geofenceExit })
            #expect(twin.contains { $0.kind == .stopEnd } && twin.contains { $0.kind == .tripEnd })
            let reference = try await store.stops(device: "twin")
            for device in ["state", "all"] {
                try await StoredStopsTests.expectSameAnswers(
                    store, device: device, windows: StoredStopsTests.windows(trails[0], seed: 21), "\(kind) \(device)")
                let stops = try await store.stops(device: device)
                #expect(stops.stops == reference.stops && stops.trips == reference.trips, "\(kind) \(device)")
                // The same events at the same times, none twice.
                let events = try await Self.events(store, device: device)
                #expect(Self.kindsAndTimes(events) == Self.kindsAndTimes(twin), "\(kind) \(device)")
            }
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    /// Overwrites the saved states of `state` and `all` (and `all`'s checkpoints) with what no
    /// version wrote, through the database's own client.
    static func spoil(_ endpoint: Endpoint, kind: StoreKind) async throws {
        switch kind {
        case .sqlite:
            let queue = try DatabaseQueue(path: endpoint.database)
            try await queue.write { db in
                try db.execute(
                    sql: """
                        UPDATE stop_detectors SET state = '{"spoilt": true}' WHERE device IN ('state', 'all');
                        UPDATE event_states SET state = x'ff00' WHERE device IN ('state', 'all');
                        UPDATE stop_checkpoints SET state = 'spoilt' WHERE device = 'all';
                        """)
                let counts = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT (SELECT count(*) FROM stop_detectors WHERE state = '{"spoilt": true}'),
                            (SELECT count(*) FROM event_states WHERE state = x'ff00'),
                            (SELECT count(*) FROM stop_checkpoints WHERE state = 'spoilt')
                        """)
                let spoilt: [Int] = counts.map { [$0[0], $0[1], $0[2]] } ?? []
                #expect(spoilt.count == 3 && spoilt[0] == 2 && spoilt[1] == 2 && spoilt[2] > 0)
            }
            try queue.close()
        case .postgres:
            let cluster = try await Postgres.shared()
            let database = try #require(endpoint.createdDatabase)
            let out = try await offThePool {
                try cluster.psql(
                    """
                    UPDATE stop_detectors SET state = '{"spoilt": true}', events_state = '\\xff00'::bytea
                        WHERE device IN ('state', 'all');
                    UPDATE stop_checkpoints SET state = 'spoilt' WHERE device = 'all';
                    SELECT count(*), count(*) FILTER (WHERE events_state = '\\xff00'::bytea),
                        (SELECT count(*) FROM stop_checkpoints WHERE state = 'spoilt')
                    FROM stop_detectors WHERE state = '{"spoilt": true}';
                    """, database: database)
            }
            let counts = out.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").compactMap {
                Int($0)
            }
            #expect(counts.count == 3 && counts[0] == 2 && counts[1] == 2 && counts[2] > 0, "\(out)")
        }
    }

    /// Each event's time and kind, in that order (events of one time are in the order of their ids,
    /// which differ from device to device).
    static func kindsAndTimes(_ events: [StoredEvent]) -> [String] {
        events.map { "\($0.time) \($0.kind)" }.sorted()
    }

    /// Every stored event of `device`, by time then id.
    static func events(_ store: any TrackStore, device: String) async throws -> [StoredEvent] {
        var out: [StoredEvent] = []
        var cursor: EventCursor?
        repeat {
            let page = try await store.events(EventQuery(device: device), after: cursor, limit: 500)
            out += page.events
            cursor = page.next
        } while cursor != nil
        return out
    }
}
