import Foundation
import GPSInput
import Geo
import KeepTrackTesting
import Synchronization
import Testing

@testable import Tracking

/// Progress lines for long work: what they say, that they are erased, and that their time is the
/// clock they are given (a manual one here: nothing waits).
@Suite("Progress lines")
struct ProgressLineTests {
    @Test func theBacklogCountsFromItsFirstReadingAndGivesRateAndTimeLeft() {
        let progress = BacklogProgress()
        typealias Reading = BacklogProgress.Reading
        // 200 were sent before the backlog was first seen: they are not part of it.
        #expect(progress.reading(sent: 200, waiting: 10_000, now: 100) == Reading(sent: 0, total: 10_000))
        #expect(
            progress.reading(sent: 2_200, waiting: 8_000, now: 102)
                == Reading(sent: 2_000, total: 10_000, rate: 1_000, secondsLeft: 8))
        // Records appended meanwhile (a tracker still running) join the total.
        #expect(
            progress.reading(sent: 4_200, waiting: 7_000, now: 104)
                == Reading(sent: 4_000, total: 11_000, rate: 1_000, secondsLeft: 7))
        #expect(progress.reading(sent: 15_200, waiting: 0, now: 110) == nil)
    }

    @Test func linesAreDrawnWhileTheWorkRunsAndErasedAfter() async throws {
        let drawn = Mutex<[String]>([])
        let firstLine = AsyncStream<Void>.makeStream()
        let result = try await ProgressLine.during(
            every: .milliseconds(1),
            draw: { text in
                drawn.withLock { $0.append(text) }
                firstLine.continuation.yield()
            }, line: { "working" }
        ) {
            // The work ends once a line has been drawn: no guess at how long that takes.
            for await _ in firstLine.stream { break }
            return 42
        }
        #expect(result == 42)
        let lines = drawn.withLock { $0 }
        #expect(lines.first == "working")
        #expect(lines.last == "", "the line is erased at the end")
        #expect(lines.dropLast().allSatisfy { $0 == "working" })
    }

    @Test func nothingIsDrawnWithoutADrawerNorWhenTheLineIsNil() async throws {
        let calls = Atomic(0)
        let value = try await ProgressLine.during(
            draw: nil,
            line: {
                calls.add(1, ordering: .relaxed); return "x"
            }
        ) { 7 }
        #expect(value == 7)
        #expect(calls.load(ordering: .relaxed) == 0)

        let drawn = Mutex<[String]>([])
        let asked = AsyncStream<Void>.makeStream()
        _ = try await ProgressLine.during(
            every: .milliseconds(1), draw: { text in drawn.withLock { $0.append(text) } },
            line: {
                asked.continuation.yield(); return nil
            }
        ) {
            for await _ in asked.stream { break }
            return 0
        }
        #expect(drawn.withLock { $0 }.isEmpty, "no line drawn, so none erased either")
    }

    @Test func aFailingWorkStillErasesTheLine() async throws {
        struct Failure: Error {}
        let drawn = Mutex<[String]>([])
        let firstLine = AsyncStream<Void>.makeStream()
        await #expect(throws: Failure.self) {
            try await ProgressLine.during(
                every: .milliseconds(1),
                draw: { text in
                    drawn.withLock { $0.append(text) }
                    firstLine.continuation.yield()
                }, line: { "working" }
            ) { () async throws -> Int in
                for await _ in firstLine.stream { break }
                throw Failure()
            }
        }
        #expect(drawn.withLock { $0 }.last == "")
    }

    @Test func aThrottledLineDrawsAtMostEveryQuarterSecondOfItsClock() {
        let clock = ManualClock()
        let drawn = Mutex<[String]>([])
        let line = ProgressLine.Throttled(clock: clock) { text in drawn.withLock { $0.append(text) } }
        line.update("a")
        line.update("b")
        clock.advance(by: .milliseconds(249))
        line.update("c")
        clock.advance(by: .milliseconds(1))
        line.update("d")
        line.end()
        #expect(drawn.withLock { $0 } == ["a", "d", ""])
    }

    @Test func aRunsElapsedTimeIsTheClockItIsGiven() throws {
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        let tracker = try Tracker(source: source, configuration: .init(), sink: Collected(), clock: source.logClock)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: 1_700_000_000))
        let progress = tracker.progress(clock: clock)
        #expect(progress() == .input(elapsed: 0, outboxWaiting: nil))
        clock.advance(by: .milliseconds(2500))
        #expect(progress() == .input(elapsed: 2.5, outboxWaiting: nil))
    }

    /// Ten fixes, the clock moved 100 ms before each.
    struct Steps: FixSource {
        let clock: ManualClock
        var name: String { "steps" }
        func makeAsyncIterator() -> Iterator { Iterator(clock: clock) }
        struct Iterator: AsyncIteratorProtocol {
            let clock: ManualClock
            var n = 0
            mutating func next() async -> SourceElement? {
                guard n < 10 else { return nil }
                n += 1
                clock.advance(by: .milliseconds(100))
                return .fix(Fix(time: GNSSTime(nanosecondsSince1970: Int64(n) * 1_000_000_000, fractionDigits: 0)))
            }
        }
    }

    @Test func fixLinesTickAtMostEveryQuarterSecondOfTheirClock() async throws {
        let null = open("/dev/null", O_WRONLY)
        defer { close(null) }
        var lines = SourceLines()
        lines.out = OutputBuffer(fd: null)
        let clock = ManualClock()
        let ticks = Mutex<[Double?]>([])
        try await lines.pump(Steps(clock: clock), clock: clock) { t in ticks.withLock { $0.append(t) } }
        #expect(ticks.withLock { $0 } == [0.3, 0.6, 0.9, nil])
    }
}
