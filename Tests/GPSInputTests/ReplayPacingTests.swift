import Geo
import KeepTrackTesting
import Testing
import TrackFiles

@testable import GPSInput

/// The pacing both file replays share, on a manual clock: nothing sleeps, the test moves time.
@Suite("Replay pacing")
struct ReplayPacingTests {
    /// Moves `clock` to each deadline a task sleeps until, as soon as one does, until cancelled.
    static func drive(_ clock: ManualClock) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                await clock.sleepers(atLeast: 1)
                if let deadline = clock.nextDeadline { clock.advance(to: deadline) }
            }
        }
    }

    /// One delivery: the fix's time since the first fix and the clock's since the start (ns), with
    /// the fixes the source's progress had counted by then.
    struct Delivery {
        var fix: Int64
        var clock: Int64
        var counted: Int
    }

    /// Replays `source` (looped) on `clock`, driven to each deadline, for a pass and a half; returns
    /// the deliveries and how many fixes the first pass had.
    static func replay<S: FixSource>(
        _ source: S, on clock: ManualClock, progress: () -> ReplayProgress<some Hashable & Sendable>
    ) async throws -> (deliveries: [Delivery], pass: Int) {
        let driver = drive(clock)
        defer { driver.cancel() }
        var deliveries: [Delivery] = []
        var firstPass: Int?
        var first: Int64?
        for await element in source {
            if case .event(let e) = element, e.kind == .endOfInput, firstPass == nil { firstPass = deliveries.count }
            guard let t = element.fix?.time?.nanosecondsSince1970 else { continue }
            first = first ?? t
            let now = clock.now.offset.components
            let elapsed = now.seconds * 1_000_000_000 + now.attoseconds / 1_000_000_000
            deliveries.append(Delivery(fix: t - first!, clock: elapsed, counted: progress().fixes))
            if let firstPass, deliveries.count == firstPass + firstPass / 2 { break }
        }
        #expect(progress().passes == 1)
        return (deliveries, try #require(firstPass))
    }

    /// Paced at 4x: a fix leaves when its time since the first fix, over 4, has passed on the clock;
    /// the progress counts it then; a looped pass begins a second of log after the last one ended.
    static func checkPacedAt4x(_ deliveries: [Delivery], pass: Int) {
        #expect(pass > 50)
        for (i, d) in deliveries.enumerated() {
            #expect(d.clock == Int64(Double(d.fix) / 4), "fix \(i)")
            #expect(d.counted == i + 1, "the progress counts fix \(i) once it is out")
        }
        #expect(deliveries[pass].fix - deliveries[pass - 1].fix == 1_000_000_000)
        #expect(deliveries[pass].clock - deliveries[pass - 1].clock == 250_000_000)
    }

    @Test(.timeLimit(.minutes(5)))
    func aLogIsPacedByItsFixTimesOnTheClockAcrossALoop() async throws {
        let clock = ManualClock()
        let source = NMEALogSource(
            options: .init(path: fixturePath("midnight.nmea"), speed: 4, loop: true), clock: clock)
        let (deliveries, pass) = try await Self.replay(source, on: clock) { source.progress }
        Self.checkPacedAt4x(deliveries, pass: pass)
    }

    @Test(.timeLimit(.minutes(5)))
    func aTrackFileIsPacedAsALogIs() async throws {
        let clock = ManualClock()
        let source = TrackFileSource(
            options: .init(path: fixturePath("tracks/walk-2min.csv"), format: .csv, speed: 4, loop: true),
            clock: clock)
        let (deliveries, pass) = try await Self.replay(source, on: clock) { source.progress }
        Self.checkPacedAt4x(deliveries, pass: pass)
    }

    @Test(.timeLimit(.minutes(5)))
    func fixesAlreadyDueGoOutWithoutWaiting() async throws {
        let clock = ManualClock()
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea"), speed: 1), clock: clock)
        var iterator = source.makeAsyncIterator()
        func nextFix() async -> Fix? {
            while let element = await iterator.next() {
                if let fix = element.fix { return fix }
            }
            return nil
        }
        #expect(await nextFix() != nil)
        // Ten seconds on: the next fixes, one a second of log, are due up to the tenth; none waits.
        clock.advance(by: .seconds(10))
        for _ in 0..<10 { #expect(await nextFix() != nil) }
        #expect(clock.sleeperCount == 0)
        #expect(source.progress.fixes == 11)
        // The twelfth is a second ahead: the replay waits for it on the clock.
        let twelfth = Task { () -> Fix? in
            var it = iterator
            while let element = await it.next() {
                if let fix = element.fix { return fix }
            }
            return nil
        }
        await clock.sleepers(atLeast: 1)
        #expect(clock.nextDeadline == EpochInstant(offset: .seconds(11)))
        clock.advance(by: .seconds(1))
        #expect(await twelfth.value != nil)
    }
}
