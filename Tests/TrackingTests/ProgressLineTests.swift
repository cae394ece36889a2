import Synchronization
import Testing

@testable import Tracking

/// Progress lines for long work (issue 14, item 6): what they say, and that they are erased.
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
}
