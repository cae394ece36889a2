import Geo
import KeepTrackTesting
import Logging
import Synchronization
import Testing

@testable import Tracking

/// What the tracker's log says of its source at the log's default level (warning): a lost source,
/// and its return, which was said at info only (a log that said "waiting for it to appear" never
/// said it came back).
@Suite struct SourceLogTests {
    /// A fix, the receiver unplugged and back, another fix, and a connection with nothing lost.
    struct Replugged: FixSource {
        /// How many elements it gives: 5 ends connected again, 2 ends unplugged.
        var count = 5
        var name: String { "replugged" }
        func makeAsyncIterator() -> Iterator { Iterator(count: count) }
        struct Iterator: AsyncIteratorProtocol {
            let count: Int
            var n = 0
            mutating func next() async -> SourceElement? {
                n += 1
                guard n <= count else { return nil }
                func fix(_ s: Int64) -> SourceElement {
                    var f = Fix(
                        time: GNSSTime(nanosecondsSince1970: (1_700_000_000 + s) * 1_000_000_000, fractionDigits: 0))
                    f.coordinate = Coordinate(latitude: 48.1, longitude: 11.5)
                    return .fix(f)
                }
                switch n {
                case 1: return fix(0)
                case 2: return .event(SourceEvent(.disconnected, source: "tty", message: "unplugged"))
                case 3: return .event(SourceEvent(.connected, source: "tty", message: "back"))
                case 4: return fix(1)
                case 5: return .event(SourceEvent(.connected, source: "tty", message: "again"))
                default: return nil
                }
            }
        }
    }

    @Test func aSourceThatComesBackIsSaidAtTheLevelItsLossWas() async throws {
        let logs = CapturedLogs()
        let tracker = try Tracker(
            source: Replugged(), configuration: .init(), sink: Collected(),
            logger: Logger(label: "test", factory: { _ in logs }), clock: ManualClock())
        try await tracker.run()
        let said = logs.lines.withLock { $0 }.filter { $0.message.hasPrefix("source") }
        #expect(
            said.map { "\($0.level) \($0.message)" } == [
                "warning source problem", "warning source back", "info source changed",
            ])
    }

    /// `ctl status` says the input is lost while it is, and not once it is back.
    @Test(arguments: [(2, "\"inputLost\":\"unplugged\""), (5, "\"inputLost\":null")])
    func theStatusSaysWhileTheInputIsLost(count: Int, said: String) async throws {
        let tracker = try Tracker(
            source: Replugged(count: count), configuration: .init(), sink: Collected(), clock: ManualClock())
        try await tracker.run()
        #expect(tracker.statusJSON().hasSuffix(said + "}"), "\(tracker.statusJSON())")
    }
}
