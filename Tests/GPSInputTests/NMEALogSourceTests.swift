import KeepTrackTesting
import Foundation
import Geo
import NMEA
import Testing

@testable import GPSInput

@Suite("NMEA log replay", .offThePool)
struct NMEALogSourceTests {
    @Test func deliversExactlyTheDecodersFixes() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea")))
        var fixes: [Fix] = []
        var events: [SourceEvent] = []
        for await element in source {
            switch element {
            case .fix(let f): fixes.append(f)
            case .event(let e): events.append(e)
            }
        }
        #expect(fixes == (try decoderFixes("walk-15min.nmea")))
        #expect(events.map(\.kind) == [.connected, .endOfInput])
        #expect(source.progress.fixes == 895)
        #expect(source.progress.position == source.progress.size)
    }

    @Test func drivesTheLogClockWithFixTimes() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("midnight.nmea")))
        var last: Fix?
        for await element in source {
            guard let fix = element.fix, let t = fix.time?.secondsSince1970 else { continue }
            // The clock is at the fix's time when the fix arrives.
            #expect(abs(source.logClock.now.secondsSince1970 - t) < 1e-6)
            last = fix
        }
        #expect(last?.time?.iso8601 == "2025-01-01T00:02:00.00Z")
    }

    @Test func reportsAMissingFileAsAnErrorEvent() async throws {
        let source = NMEALogSource(options: .init(path: "/nonexistent/log.nmea"))
        var events: [SourceEvent] = []
        for await element in source { if let e = element.event { events.append(e) } }
        #expect(events.count == 1)
        #expect(events.first?.kind == .error)
        #expect(events.first?.message.contains("/nonexistent/log.nmea") == true)
    }

    @Test func loopsWithTimesMovingForward() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("midnight.nmea"), loop: true))
        let once = try decoderFixes("midnight.nmea")
        var fixes: [Fix] = []
        for await element in source {
            if let f = element.fix { fixes.append(f) }
            if fixes.count == once.count * 2 + 1 { break }
        }
        let times = fixes.compactMap { $0.time?.nanosecondsSince1970 }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
        // The second pass starts one second after the first ended, same positions.
        #expect(times[once.count] == times[once.count - 1] + 1_000_000_000)
        #expect(fixes[once.count].coordinate == once[0].coordinate)
        #expect(source.progress.passes == 2)
    }

    /// Waits on the fixes themselves and on the clock's sleeper, never on a wall-clock deadline: a
    /// loaded machine only makes it slower.
    @Test(.timeLimit(.minutes(5)))
    func pacesByFixTimeOnTheGivenClock() async throws {
        let clock = ManualClock()
        let source = NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea"), speed: 2), clock: clock)
        let (fixes, delivered) = AsyncStream.makeStream(of: Int.self)
        let consumer = Task {
            var n = 0
            for await element in source where element.fix != nil {
                n += 1
                delivered.yield(n)
                if n == 3 { break }
            }
            delivered.finish()
        }
        var it = fixes.makeAsyncIterator()
        // The first fix goes out at once; the second is due 0.5 s later (1 s of log at 2x).
        #expect(await it.next() == 1)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(499))
        #expect(clock.sleeperCount == 1, "not due yet: still asleep")
        clock.advance(by: .milliseconds(1))
        #expect(await it.next() == 2)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(500))
        #expect(await it.next() == 3)
        await consumer.value
    }

    @Test func pacedAndUnpacedReplaysGiveIdenticalFixes() async throws {
        let clock = ManualClock()
        let paced = NMEALogSource(options: .init(path: fixturePath("drive-10hz.nmea"), speed: 1), clock: clock)
        let ticker = Task {
            // Move the manual clock to the replay's deadline whenever it waits on it.
            while !Task.isCancelled {
                await clock.sleepers(atLeast: 1)
                if let deadline = clock.nextDeadline { clock.advance(to: deadline) }
            }
        }
        var fixes: [Fix] = []
        for await element in paced { if let f = element.fix { fixes.append(f) } }
        ticker.cancel()
        #expect(fixes == (try decoderFixes("drive-10hz.nmea")))
    }

    @Test func aTruncatedGzipLogDeliversEveryEpochReadBeforeTheEndThenAnError() async throws {
        let gz = try gzip(fixtureBytes("walk-15min.nmea"))
        let path = try temporaryFile(Array(gz[0..<(gz.count / 2)]), name: "truncated.nmea.gz")
        let source = NMEALogSource(options: .init(path: path))
        var elements: [SourceElement] = []
        for await element in source { elements.append(element) }
        // The reference: the decoder run by decodeFile, which delivers the epoch in progress too.
        var reference: [Fix] = []
        var decoder = NMEADecoder()
        #expect(throws: NMEAError.self) { try decoder.decodeFile(path) { reference.append($0) } }
        #expect(reference.count > 400)
        #expect(elements.fixes == reference)
        #expect(elements.events.map(\.kind) == [.connected, .error])
        #expect(elements.last?.event?.message.contains("byte \(gz.count / 2): gzip data ends early") == true)
    }

    @Test func stopsWhenTheConsumerIsCancelledWhileAPipeIsSilent() async throws {
        // A FIFO whose writer sends two epochs and then nothing (a receiver piped in, gone quiet).
        let dir = try TemporaryDirectory("keeptrack-fifo").url
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("receiver").path
        #expect(mkfifo(path, 0o600) == 0)
        let writer = open(path, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let log = try fixtureBytes("walk-15min.nmea")
        let twoEpochs = Array(log[...log.indices.filter { log[$0] == 0x0A }[15]])
        #expect(twoEpochs.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) } == twoEpochs.count)
        let source = NMEALogSource(options: .init(path: path))
        try await withTimeout(60, "the log source to stop") {
            let (consumer, arrivals) = consumeInTheBackground(source)
            var fixes = arrivals.makeAsyncIterator()
            _ = await fixes.next()
            consumer.cancel()
            #expect(await consumer.value == 1)
        }
    }

    @Test func readsGzipLogs() async throws {
        let source = NMEALogSource(options: .init(path: fixturePath("day-24h.nmea.gz")))
        var count = 0
        for await element in source where element.fix != nil { count += 1 }
        #expect(count == 86_397)
    }
}

/// A thread-safe counter for tests.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    var value: Int { lock.withLock { n } }
    func increment() { lock.withLock { n += 1 } }
}

@Suite("Replay progress follows the fixes delivered")
struct ReplayProgressTests {
    @Test(arguments: ["walk-15min.nmea", "day-24h.nmea.gz"])
    func theShareGrowsWithTheFixesNotWithTheReadAhead(log: String) async throws {
        let source = NMEALogSource(options: .init(path: fixturePath(log)))
        var positions: [Int64] = []
        var reads: [Int64] = []
        for await element in source {
            if case .fix = element {
                positions.append(source.progress.position)
                reads.append(source.progress.read)
            }
        }
        let size = try #require(source.progress.size)
        // The reader is a 256 KiB chunk ahead (59% of the walk after its first fix); the progress is not.
        #expect(reads[0] > positions[0])
        if log == "walk-15min.nmea" { #expect(Double(reads[0]) / Double(size) > 0.5) }
        #expect(Double(positions[0]) / Double(size) < 0.01)
        #expect(positions == positions.sorted())
        #expect(zip(positions, reads).allSatisfy { $0 <= $1 })
        #expect(positions.last == size)
        // Halfway through the fixes, about halfway through the file (the fixes are evenly spread).
        let half = Double(positions[positions.count / 2]) / Double(size)
        #expect(half > 0.4 && half < 0.6, "\(half)")
        #expect(source.progress.fraction == 1)
    }
}
