import Foundation
import Geo
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore
import TrackStorePostgres

/// Issue 28: the PostgreSQL listener of the live stream reconnects after its connection fails, and
/// publishes what was stored meanwhile: a client gets every record once, in order.
@Suite("Endpoint: the live stream's PostgreSQL listener reconnects", .serialized)
struct StreamReconnectTests {
    func batch(_ device: String, seqs: ClosedRange<Int>) -> String {
        let records = seqs.map { s in
            #"{"seq":\#(s),"kind":"location","time":"2024-05-14T09:30:\#(String(format: "%02d", s))Z","#
                + #""lat":48.1,"lon":11.5}"#
        }
        return #"{"device":"\#(device)","records":[\#(records.joined(separator: ","))]}"#
    }

    /// `device:seq` of the next `n` record frames.
    func records(_ reader: StreamReader, _ n: Int) async throws -> [String] {
        var seen: [String] = []
        for _ in 0..<n {
            let text = try #require(try await reader.next()["raw"] as? String)
            let message = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(message["type"] as? String == "record", "\(text)")
            let record = try #require(message["record"] as? [String: Any])
            seen.append("\(message["device"] ?? ""):\(record["seq"] ?? "")")
        }
        return seen
    }

    /// Waits until a task sleeps on `clock` for less than a second (the listener's first backoff,
    /// beside the offline detector's ten minutes), then moves the clock past it.
    func passTheBackoff(_ clock: ManualClock) async throws {
        try await withTimeout(30, "the listener to wait before reconnecting") {
            var count = 1
            while true {
                await clock.sleepers(atLeast: count)
                if let next = clock.nextDeadline, next < clock.now.advanced(by: .seconds(1)) { break }
                count = clock.sleeperCount + 1
            }
        }
        clock.advance(by: .seconds(1))
    }

    /// The listener's backend terminated (`pg_terminate_backend`) while another instance stores: after
    /// its backoff it listens again, reads what was stored meanwhile, and the client of this instance
    /// gets every record exactly once, in order; the reconnection and the records caught up are counted.
    @Test func aTerminatedListenerReconnectsAndCatchesUpWithoutLosingOrDoublingARecord() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_715_679_000))
        let a = try await Endpoint.start(store: .postgres, clock: clock)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        let raw = Raw(endpoint: b)
        let reader = StreamReader("ws://127.0.0.1:\(a.port)/v1/stream?token=secret")
        do {
            #expect(try await reader.next()["type"] as? String == "snapshot")
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...2)).status == 200)
            #expect(try await records(reader, 2) == ["van1:1", "van1:2"])

            let store = try #require(a.server.store as? PostgresTrackStore)
            let cluster = try await Postgres.shared()
            let database = String(a.database.split(separator: "/").last!.prefix { $0 != "?" })
            let terminated = try await offThePool {
                try cluster.psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        + "WHERE application_name = '\(store.listenerName)'", database: database)
            }
            #expect(terminated.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
            // Stored while the listener is gone: their notifications are lost to it.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 3...5)).status == 200)
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van2", seqs: 1...1)).status == 200)
            try await passTheBackoff(clock)
            #expect(try await records(reader, 4) == ["van1:3", "van1:4", "van1:5", "van2:1"])
            // Listening again: the next record once, nothing doubled before it.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 6...7)).status == 200)
            #expect(try await records(reader, 2) == ["van1:6", "van1:7"])
            #expect(await a.metric("keeptrack_serve_stream_store_reconnects_total") == 1)
            #expect(await a.metric("keeptrack_serve_stream_caught_up_records_total") == 4)
        } catch {
            Issue.record(error)
        }
        reader.stop()
        await raw.close()
        await b.stop(keepingFiles: true)
        await a.stop()
    }

    /// A batch is announced after its commit, not by it: one committed and never announced (its
    /// instance killed in between; here a row inserted by psql, whose trigger leaves the
    /// announcement unsent) reaches the streams with the first announcement 15 s or more after the
    /// listener's last look, once, after that announcement's own records.
    @Test func aBatchCommittedAndNeverAnnouncedReachesTheStreamsAtTheNextLook() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_715_679_000))
        let a = try await Endpoint.start(store: .postgres, clock: clock)
        let b = try await Endpoint.start(store: .postgres, database: a.database)
        let raw = Raw(endpoint: b)
        let reader = StreamReader("ws://127.0.0.1:\(a.port)/v1/stream?token=secret")
        do {
            #expect(try await reader.next()["type"] as? String == "snapshot")
            // The listener listens (a record through it), then a batch is committed unannounced.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 1...1)).status == 200)
            #expect(try await records(reader, 1) == ["van1:1"])
            let cluster = try await Postgres.shared()
            let database = String(a.database.split(separator: "/").last!.prefix { $0 != "?" })
            _ = try await offThePool {
                try cluster.psql(
                    "INSERT INTO positions (key, device, seq, kind, time, position, format, received) VALUES "
                        + "('id:van3:1', 'van3', 1, 'location', '2024-05-14T09:30:01Z', "
                        + "'SRID=4326;POINT(11.5 48.1)', 'json', now())", database: database)
            }
            // Within 15 s of the last look: the announced batch alone.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 2...2)).status == 200)
            #expect(try await records(reader, 1) == ["van1:2"])
            clock.advance(by: .seconds(15))
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 3...3)).status == 200)
            #expect(try await records(reader, 2) == ["van1:3", "van3:1"])
            // Nothing doubled after it.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seqs: 4...4)).status == 200)
            #expect(try await records(reader, 1) == ["van1:4"])
        } catch {
            Issue.record(error)
        }
        reader.stop()
        await raw.close()
        await b.stop(keepingFiles: true)
        await a.stop()
    }
}
