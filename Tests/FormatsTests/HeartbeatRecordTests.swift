import Formats
import Testing

/// Issue 29, item 4: a heartbeat (the latest location again) on every wire.
@Suite("Wire formats: heartbeat records")
struct HeartbeatRecordTests {
    static let beat = TrailRecord(
        device: "van-1", sequence: 7, kind: .heartbeat, time: 1_715_679_060,
        latitude: 48.1373663, longitude: 11.5754087, altitude: 519.5, horizontalAccuracy: 4.5,
        verticalAccuracy: 8, speed: 0.2, course: 91)

    @Test func aHeartbeatRoundTripsThroughTheJSONBatchAsItsOwnKind() throws {
        let body = JSONBatch.encode(device: "van-1", records: [Self.beat])
        let text = String(decoding: body, as: UTF8.self)
        #expect(text.contains(#""kind":"heartbeat","time":"2024-05-14T09:31:00.000Z","lat":48.137366300"#), "\(text)")
        let decoded = try JSONBatch.decode(body, now: 1_800_000_000)
        #expect(decoded.records == [Self.beat])
        #expect(Self.beat.problem(now: 1_800_000_000) == nil)
    }

    @Test func owntracksSendsAHeartbeatAsALocationWithTriggerP() throws {
        let body = try #require(OwnTracks.encode(Self.beat))
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"_type":"location","t":"p","tst":1715679060,"lat":48.1373663,"lon":11.5754087,"acc":5,"alt":520,"vac":8,"vel":1,"cog":91,"tid":"VA"}"#
        )
    }

    @Test func osmandSendsAHeartbeatAsAPlainPosition() {
        var location = Self.beat
        location.kind = .location
        #expect(OsmAnd.parameters(Self.beat) == OsmAnd.parameters(location))
        #expect(!OsmAnd.parameters(Self.beat).contains("event"))
        #expect(TrailRecord.Kind.heartbeat.isPosition && !TrailRecord.Kind.heartbeat.isRegionEvent)
    }
}
