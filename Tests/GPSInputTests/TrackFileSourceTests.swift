import Geo
import KeepTrackTesting
import Testing
import TrackFiles

@testable import GPSInput

@Suite("Track file replay")
struct TrackFileSourceTests {
    func run(_ source: TrackFileSource) async -> (fixes: [Fix], events: [SourceEvent]) {
        var fixes: [Fix] = []
        var events: [SourceEvent] = []
        for await element in source {
            switch element {
            case .fix(let f):
                // The log clock is at the fix's time when the fix arrives.
                if let t = f.time?.secondsSince1970 { #expect(source.logClock.now.secondsSince1970 >= t - 1e-6) }
                fixes.append(f)
            case .event(let e): events.append(e)
            }
        }
        return (fixes, events)
    }

    @Test(arguments: [
        ("walk-2min.gpx", TrackFileFormat.gpx), ("walk-2min.gpx.gz", .gpx), ("walk-2min.geojson", .geojson),
        ("walk-2min.csv", .csv), ("walk-2min.rec", .owntracksRec), ("walk-2min.takeout.json", .takeout),
    ])
    func deliversTheReadersFixesWithAnAccuracyAndDrivesTheLogClock(_ name: String, _ format: TrackFileFormat)
        async throws
    {
        let path = fixturePath("tracks/" + name)
        #expect(try TrackFileFormat.sniff(path: path) == format)
        let source = TrackFileSource(options: .init(path: path, format: format))
        let r = await run(source)
        #expect(r.events.map(\.kind) == [.connected, .endOfInput])
        #expect(r.fixes.count >= 120)
        #expect(r.fixes.allSatisfy { $0.horizontalAccuracy != nil && $0.hasPosition })
        #expect(source.progress.fixes == r.fixes.count)
        #expect(source.progress.position == source.progress.size)
        #expect(source.logClock.now.secondsSince1970 == r.fixes.last?.time?.secondsSince1970)
    }

    @Test func aMalformedFileEndsWithAnErrorEventAfterTheFixesBeforeIt() async throws {
        let source = TrackFileSource(options: .init(path: fixturePath("tracks/bad-cell.csv"), format: .csv))
        let r = await run(source)
        #expect(r.fixes.count == 5)
        #expect(r.events.map(\.kind) == [.connected, .error])
        #expect(r.events.last?.message.contains("bad-cell.csv:7: byte") == true)
    }

    @Test func loopingShiftsTheSecondPassForward() async throws {
        let source = TrackFileSource(
            options: .init(path: fixturePath("tracks/walk-2min.csv"), format: .csv, loop: true))
        var fixes: [Fix] = []
        for await element in source {
            if let f = element.fix { fixes.append(f) }
            if fixes.count == 240 { break }
        }
        let times = fixes.compactMap { $0.time?.nanosecondsSince1970 }
        #expect(times.count == 240)
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func pacedReplayWaitsOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let source = TrackFileSource(
            options: .init(path: fixturePath("tracks/walk-2min.csv"), format: .csv, speed: 1), clock: clock)
        var iterator = source.makeAsyncIterator()
        _ = await iterator.next()  // connected
        let first = await iterator.next()
        #expect(first?.fix != nil)
        // The second fix is due a second later on the pacing clock: it comes once the clock gets there.
        let second = Task {
            var it = iterator
            return await it.next()
        }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        #expect(await second.value?.fix != nil)
    }
}
