import Foundation
import Geo
import KeepTrackTesting
import Testing
import TrackServerTesting

@testable import TrackServer

/// Issue 28, item 1: the live stream's `{"type":"event"}` frames, a device going silent for the offline
/// delay and coming back, on a manual clock.
@Suite("Endpoint: offline and online events on the live stream", .serialized)
struct StreamEventTests {
    static let start = EpochInstant(secondsSince1970: 1_715_679_000)

    /// The detector as a value: a device silent for the delay is declared offline once, at the time
    /// it is told; a record makes it online again; a device the store knew is seeded without events.
    @Test func theDetectorDeclaresASilentDeviceOfflineOnceAndOnlineWhenItSendsAgain() {
        var d = OfflineDetector(after: .seconds(600))
        #expect(d.nextDeadline == nil)
        d.seed(device: "old", lastSeen: Self.start.advanced(by: .seconds(-3600)), now: Self.start)
        d.seed(device: "recent", lastSeen: Self.start.advanced(by: .seconds(-60)), now: Self.start)
        #expect(d.devices["old"] == .offline(lastSeen: Self.start.advanced(by: .seconds(-3600))))
        #expect(d.nextDeadline == Self.start.advanced(by: .seconds(540)))
        #expect(d.received(device: "van1", at: Self.start) == nil)
        #expect(d.expire(at: Self.start.advanced(by: .seconds(539))).isEmpty)
        let first = d.expire(at: Self.start.advanced(by: .seconds(540)))
        #expect(first.map(\.device) == ["recent"])
        #expect(d.nextDeadline == Self.start.advanced(by: .seconds(600)))
        let second = d.expire(at: Self.start.advanced(by: .seconds(700)))
        let expected = StreamEvent(
            device: "van1",
            kind: .offline(
                time: Self.start.secondsSince1970 + 700, lastSeen: Self.start.secondsSince1970))
        #expect(second == [expected])
        #expect(d.expire(at: Self.start.advanced(by: .seconds(7000))).isEmpty)
        #expect(d.nextDeadline == nil)
        let back = d.received(device: "van1", at: Self.start.advanced(by: .seconds(800)))
        #expect(back == StreamEvent(device: "van1", kind: .online(time: Self.start.secondsSince1970 + 800)))
        #expect(d.received(device: "old", at: Self.start.advanced(by: .seconds(801)))?.name == "online")
        #expect(d.received(device: "van1", at: Self.start.advanced(by: .seconds(802))) == nil)
    }

    /// The frames' shape: `offline` with the time it was declared and `lastSeen`, `online` with its time.
    @Test func eventFramesHaveTheKindTheTimeAndForOfflineTheLastSeenTime() {
        var out: [UInt8] = []
        StreamEvent(device: "a\"b", kind: .offline(time: 1_715_679_600, lastSeen: 1_715_679_000))
            .appendMessage(to: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == #"{"type":"event","device":"a\"b","event":{"kind":"offline","#
                + #""time":"2024-05-14T09:40:00.000Z","lastSeen":"2024-05-14T09:30:00.000Z"}}"#)
        out = []
        StreamEvent(device: "van1", kind: .online(time: 1_715_679_601.5)).appendMessage(to: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == #"{"type":"event","device":"van1","event":{"kind":"online","time":"2024-05-14T09:40:01.500Z"}}"#)
    }

    func batch(_ device: String, seq: Int) -> String {
        #"{"device":"\#(device)","records":[{"seq":\#(seq),"kind":"location","time":"2024-05-14T09:30:0\#(seq)Z","#
            + #""lat":48.1,"lon":11.5}]}"#
    }

    /// Through a real endpoint on a manual clock: a device silent for `offlineAfter` gets an `offline`
    /// event at that time; its next record comes after an `online` event; a client narrowed to another
    /// device sees neither.
    @Test(arguments: StoreKind.allCases)
    func aSilentDeviceGetsAnOfflineEventAndAnOnlineOneWhenItSendsAgain(_ kind: StoreKind) async throws {
        let clock = ManualClock(now: Self.start)
        let endpoint = try await Endpoint.start(store: kind, clock: clock) { $0.stream.offlineAfter = .seconds(300) }
        let raw = Raw(endpoint: endpoint)
        let all = StreamReader("ws://127.0.0.1:\(endpoint.port)/v1/stream?token=secret")
        let other = StreamReader("ws://127.0.0.1:\(endpoint.port)/v1/stream?token=secret&device=van2")
        do {
            #expect(try await all.next()["type"] as? String == "snapshot")
            #expect(try await other.next()["type"] as? String == "snapshot")
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seq: 1)).status == 200)
            #expect(try await all.next()["type"] as? String == "record")
            clock.advance(by: .seconds(300))
            let offline = try await all.next()
            #expect(
                offline["raw"] as? String
                    == #"{"type":"event","device":"van1","event":{"kind":"offline","#
                    + #""time":"2024-05-14T09:35:00.000Z","lastSeen":"2024-05-14T09:30:00.000Z"}}"#)
            clock.advance(by: .seconds(60))
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van1", seq: 2)).status == 200)
            #expect(
                try await all.next()["raw"] as? String
                    == #"{"type":"event","device":"van1","event":{"kind":"online","time":"2024-05-14T09:36:00.000Z"}}"#)
            let record = try await all.next()
            #expect((record["raw"] as? String)?.hasPrefix(#"{"type":"record","device":"van1""#) == true)
            // The narrowed client got nothing of van1: its first message is van2's record.
            #expect(try await raw.send(.POST, "/v1/locations", body: batch("van2", seq: 1)).status == 200)
            #expect((try await other.next()["raw"] as? String)?.hasPrefix(#"{"type":"record","device":"van2""#) == true)
        } catch {
            all.stop()
            other.stop()
            await raw.close()
            await endpoint.stop()
            throw error
        }
        all.stop()
        other.stop()
        await raw.close()
        await endpoint.stop()
    }
}
