import Formats
import Foundation
import KeepTrackTesting
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// The outlier marks the store sets after ingest reach live clients as `outliers` events, so that a
/// live map takes a 0,0 fix or a jump out of its line (and puts a held point back once cleared).
@Suite("The live stream: outliers marked after ingest, as events", .serialized)
struct StreamOutlierEventsTests {
    static let t0 = 1_715_679_000.0

    /// One location as a JSON batch of `device`.
    static func batch(_ seq: Int, _ time: Double, _ lat: Double, _ lon: Double, device: String = "phone") -> String {
        #"{"device":"\#(device)","records":[{"seq":\#(seq),"kind":"location","time":"\#(ISOTime.string(time))","#
            + #""lat":\#(lat),"lon":\#(lon),"hAcc":5}]}"#
    }

    /// What the stream said, message by message, as JSON objects.
    final class Transcript {
        let reader: StreamReader
        var messages: [[String: Any]] = []

        init(_ reader: StreamReader) { self.reader = reader }

        /// Reads until a message `matches` (each read guarded: a missing one fails, naming the wait);
        /// returns its index.
        @discardableResult
        func until(_ what: String, _ matches: ([String: Any]) -> Bool) async throws -> Int {
            if let i = messages.firstIndex(where: matches) { return i }
            while true {
                let raw = try #require(try await reader.next()["raw"] as? String, "\(what)")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(raw.utf8)) as? [String: Any])
                messages.append(object)
                if matches(object) { return messages.count - 1 }
            }
        }
    }

    static func isRecord(at time: Double) -> ([String: Any]) -> Bool {
        { m in
            m["type"] as? String == "record"
                && (m["record"] as? [String: Any])?["time"] as? String
                    == ISOTime.string(time)
        }
    }

    /// An `outliers` event whose `list` ("marked", "cleared") names the point at `time` (with `mark`,
    /// for a marked one).
    static func isOutliers(_ list: String, at time: Double, mark: String? = nil) -> ([String: Any]) -> Bool {
        { m in
            guard m["type"] as? String == "event", let e = m["event"] as? [String: Any],
                e["kind"] as? String == "outliers", let points = e[list] as? [[String: Any]]
            else { return false }
            return points.contains {
                $0["time"] as? String == ISOTime.string(time) && $0["outlier"] as? String == mark
            }
        }
    }

    /// Good points, a 0,0 fix, a jump and back, then a point far away that the next one confirms:
    /// the stream carries each record, then an `outliers` event naming it (`no-position`; `pending`,
    /// then `jump`; `pending`, then `cleared`), with the record's own time and position. A share
    /// link's stream, whose window is after these points, is told neither them nor their marks.
    @Test(arguments: StoreKind.allCases)
    func aZeroFixAndAJumpAreMarkedOnTheStreamAfterTheirRecords(_ kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let raw = Raw(endpoint: endpoint)
        let admin = StreamReader("ws://127.0.0.1:\(endpoint.port)/v1/stream?token=secret")
        var share: StreamReader?
        do {
            let stream = Transcript(admin)
            try await stream.until("the snapshot") { $0["type"] as? String == "snapshot" }
            let t0 = Self.t0
            for i in 0..<5 {
                let body = Self.batch(i + 1, t0 + Double(i), 48.1, 11.5 + Double(i) * 0.00001)
                #expect(try await raw.send(.POST, "/v1/locations", body: body).status == 200)
            }
            let (made, text) = try await raw.send(
                .POST, "/v1/shares",
                body:
                    #"{"device":"phone","expires":"1h","from":"\#(ISOTime.string(Date().timeIntervalSince1970 - 60))"}"#
            )
            #expect(made == 201, "\(text)")
            let token = try #require(
                (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["token"] as? String)
            share = StreamReader("ws://127.0.0.1:\(endpoint.port)/v1/stream?share=\(token)")
            let shared = Transcript(share!)
            try await shared.until("the share's snapshot") { $0["type"] as? String == "snapshot" }

            // Each step waits for its event: the next point would otherwise decide with it in one run.
            let steps: [(seq: Int, time: Double, lat: Double, lon: Double, list: String, marks: Double, as: String?)] =
                [
                    (6, t0 + 5, 0, 0, "marked", t0 + 5, "no-position"),
                    // 11 km in a second: held, then the next point is back.
                    (7, t0 + 6, 48.2, 11.5, "marked", t0 + 6, "pending"),
                    (8, t0 + 7, 48.1, 11.50005, "marked", t0 + 6, "jump"),
                    // 5.5 km in a second, then the next point is there too: the device went there.
                    (9, t0 + 8, 48.15, 11.5, "marked", t0 + 8, "pending"),
                    (10, t0 + 9, 48.15, 11.50001, "cleared", t0 + 8, nil),
                ]
            for step in steps {
                let body = Self.batch(step.seq, step.time, step.lat, step.lon)
                #expect(try await raw.send(.POST, "/v1/locations", body: body).status == 200)
                let event = try await stream.until("\(step.list) \(step.as ?? "") at +\(step.marks - t0) s") {
                    Self.isOutliers(step.list, at: step.marks, mark: step.as)($0)
                }
                let record = try await stream.until(
                    "the record at +\(step.marks - t0) s", Self.isRecord(at: step.marks))
                // SQLite tells both after the same commit, records first; PostgreSQL's records come by
                // its notifications and may follow its detector's event (the live map copes either way).
                if kind == .sqlite { #expect(record < event, "the record after the event naming it") }
                let named = try #require(
                    ((stream.messages[event]["event"] as? [String: Any])?[step.list] as? [[String: Any]])?.first {
                        $0["time"] as? String == ISOTime.string(step.marks)
                    })
                let stored = try #require(stream.messages[record]["record"] as? [String: Any])
                #expect(named["lat"] as? Double == stored["lat"] as? Double)
                #expect(named["lon"] as? Double == stored["lon"] as? Double)
                #expect((stream.messages[event]["event"] as? [String: Any])?["time"] is String)
            }
            // Nothing was told twice: one `no-position` mark, the jump marked twice (held, then a jump).
            let marked = stream.messages.compactMap { m -> [[String: Any]]? in
                guard m["type"] as? String == "event", let e = m["event"] as? [String: Any],
                    e["kind"] as? String == "outliers"
                else { return nil }
                #expect(m["device"] as? String == "phone")
                return e["marked"] as? [[String: Any]]
            }.flatMap { $0 }
            #expect(marked.map { $0["outlier"] as? String } == ["no-position", "pending", "jump", "pending"])

            // A record in the share's window after all that: the share's stream has it alone, none of
            // the phone's records before its window nor their marks, in the hub's order (those were
            // published before it).
            let now = Date().timeIntervalSince1970.rounded(.down)
            let body = Self.batch(11, now, 48.15, 11.50002)
            #expect(try await raw.send(.POST, "/v1/locations", body: body).status == 200)
            try await shared.until("the record in the share's window", Self.isRecord(at: now))
            #expect(
                !shared.messages.contains {
                    $0["type"] as? String == "event"
                        && ($0["event"] as? [String: Any])?["kind"] as? String == "outliers"
                })
            #expect(shared.messages.filter { $0["type"] as? String == "record" }.count == 1)
        } catch {
            Issue.record(error)
        }
        admin.stop()
        share?.stop()
        await raw.close()
        await endpoint.stop()
    }

    /// A late point makes the detector run again from the checkpoint before it, clearing the marks
    /// after it and marking anew: the store tells only what changed (nothing, when the same jump is
    /// marked again), then the next batch's 0,0 fix alone.
    @Test(arguments: StoreKind.allCases)
    func aRunAgainFromACheckpointTellsOnlyWhatChanged(_ kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        let store = endpoint.server.store
        let told = Mutex([OutlierMarks]())
        let subscription = store.outlierMarks.subscribe { marks in told.withLock { $0 += marks } }
        do {
            let t0 = Self.t0
            func point(_ seq: Int64, _ time: Double, _ lat: Double, _ lon: Double) -> TrailRecord {
                TrailRecord(
                    device: "phone", sequence: seq, time: time, latitude: lat, longitude: lon, horizontalAccuracy: 5)
            }
            var trail = (0..<10).map { (i: Int) -> TrailRecord in
                point(Int64(i + 1), t0 + Double(i), 48.1, 11.5 + Double(i) * 0.00001)
            }
            trail[5] = point(6, t0 + 5, 48.2, 11.5)
            _ = try await store.insert(trail, format: "json", received: t0 + 10)
            await store.storedStopsSettled()
            let first = told.withLock { $0 }
            #expect(first.map(\.marked) == [[.init(time: t0 + 5, latitude: 48.2, longitude: 11.5, mark: "jump")]])
            #expect(first.map(\.cleared) == [[]] && first.map(\.device) == ["phone"])
            #expect(first.map(\.time) == [t0 + 9])

            _ = try await store.insert([point(11, t0 + 2.5, 48.1, 11.500025)], format: "json", received: t0 + 11)
            await store.storedStopsSettled()
            _ = try await store.insert([point(12, t0 + 10, 0, 0)], format: "json", received: t0 + 12)
            await store.storedStopsSettled()
            let then = told.withLock { Array($0.dropFirst(first.count)) }
            #expect(then.map(\.marked) == [[.init(time: t0 + 10, latitude: 0, longitude: 0, mark: "no-position")]])
            #expect(then.map(\.cleared) == [[]])
        } catch {
            Issue.record(error)
        }
        store.outlierMarks.unsubscribe(subscription)
        await endpoint.stop()
    }

    /// The changes a run noted: a mark cleared and set again the same is none; one set anew, or
    /// changed, is marked; one cleared and not set again is cleared, in time order.
    @Test func theChangesOfARunAreItsNetChanges() {
        var changes = OutlierMarks.Changes()
        #expect(changes.marks(device: "d", time: 9) == nil)
        changes.cleared(time: 3, latitude: 1, longitude: 1, was: "jump")
        changes.cleared(time: 2, latitude: 1, longitude: 1, was: "pending")
        changes.cleared(time: 1, latitude: 1, longitude: 1, was: "inaccurate")
        changes.marked(time: 3, latitude: 1, longitude: 1, as: "jump")
        changes.marked(time: 1, latitude: 1, longitude: 1, as: "no-position")
        changes.marked(time: 5, latitude: 2, longitude: 2, as: "pending")
        changes.marked(time: 4, latitude: 2, longitude: 2, as: "jump")
        let marks = changes.marks(device: "d", time: 9)
        #expect(marks?.marked.map(\.time) == [1, 4, 5])
        #expect(marks?.marked.map(\.mark) == ["no-position", "jump", "pending"])
        #expect(marks?.cleared == [.init(time: 2, latitude: 1, longitude: 1, mark: nil)])
        var same = OutlierMarks.Changes()
        same.cleared(time: 3, latitude: 1, longitude: 1, was: "jump")
        same.marked(time: 3, latitude: 1, longitude: 1, as: "jump")
        #expect(same.marks(device: "d", time: 9) == nil)
    }
}
