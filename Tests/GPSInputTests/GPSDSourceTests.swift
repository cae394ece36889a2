import KeepTrackTesting
import Foundation
import Geo
import NMEA
import SystemIO
import Testing

@testable import GPSInput

/// Against a real gpsd started by gpsfake on a free loopback port.
@Suite("gpsd source", .serialized)
struct GPSDSourceTests {
    @Test func deliversTheDecodersFixesThroughARealGPSD() async throws {
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea") }
        defer { gpsd.terminate() }
        var options = GPSDSource.Options(host: "127.0.0.1", port: gpsd.port)
        // Merging is under test, not latency: epochs end by time change or on the learned cycle,
        // not by a quiet gap that a loaded machine could open inside an epoch (before the cycle is
        // known, and after).
        options.idleFlush = 5
        options.fallbackFlush = 5
        let source = GPSDSource(options: options)
        let seen = try await collect(source, what: "12 fixes from gpsd") { $0.fixes.filter(\.hasPosition).count >= 12 }
        #expect(seen.events.first?.kind == .connected)
        let reference = Dictionary(
            try decoderFixes("walk-15min.nmea").map { (timeOfDay($0)!, $0) },
            uniquingKeysWith: { a, _ in a })
        let received = seen.fixes.filter(\.hasPosition)
        // Time of day and position agree with our own decoder (gpsd may shift dates of old logs).
        for fix in received {
            let mine = try #require(reference[timeOfDay(fix)!], "no decoder fix at \(fix.time!)")
            #expect(abs(fix.coordinate!.latitude - mine.coordinate!.latitude) < 1e-9)
            #expect(abs(fix.coordinate!.longitude - mine.coordinate!.longitude) < 1e-9)
            #expect(fix.mode == mine.mode)
            #expect(fix.altitudeMSL == mine.altitudeMSL)
        }
        // One fix per epoch: gpsd's several TPV reports were merged.
        let times = received.compactMap(timeOfDay)
        #expect(Set(times).count == times.count)
        #expect(received.contains { $0.satellitesUsed != nil && $0.hdop != nil })
    }

    @Test func aConsumerThatPrefersTheSourcesExecutorTakesEveryFixOnTheReadingThread() async throws {
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea") }
        defer { gpsd.terminate() }
        let source = GPSDSource(options: .init(host: "127.0.0.1", port: gpsd.port))
        let executor = try #require(source.preferredExecutor as? ThreadExecutor)
        // Each element is taken on the thread that read it from gpsd: no hand-off to another thread.
        let (fixes, elsewhere) = try await withTimeout(180, "6 fixes on the reading thread") {
            await withTaskExecutorPreference(source.preferredExecutor) {
                var fixes = 0
                var elsewhere = 0
                for await element in source {
                    if !executor.isOwner { elsewhere += 1 }
                    if element.fix?.hasPosition == true { fixes += 1 }
                    if fixes >= 6 { break }
                }
                return (fixes, elsewhere)
            }
        }
        #expect(fixes == 6)
        #expect(elsewhere == 0)
    }

    @Test func saysGPSDIsNotRunningAndConnectsWhenItStarts() async throws {
        // A port nobody listens on, then a gpsd started on it.
        // Kept bound (connecting is refused) until gpsd is started on it.
        let reserved = try ReservedPort()
        let port = String(reserved.number)
        let source = GPSDSource(options: .init(host: "127.0.0.1", port: port))
        let started = Flag()
        let task = Task {
            try await collect(source, what: "an error then fixes") { seen in
                if seen.events.contains(where: { $0.kind == .error }) && !started.isSet {
                    started.set()
                }
                return seen.fixes.filter(\.hasPosition).count >= 2
            }
        }
        await started.wait()
        reserved.release()
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea", port: port) }
        defer { gpsd.terminate() }
        let seen = try await task.value
        let error = try #require(seen.events.first)
        #expect(error.kind == .error)
        #expect(error.message.contains("cannot connect to gpsd at 127.0.0.1:\(port)"))
        // libgps's reason for a refused port, from errno (its return value is always -1).
        #expect(error.message.contains("(can't connect to host/port pair)"), "\(error.message)")
        #expect(error.message.contains("is gpsd running?"))
        #expect(seen.events.contains { $0.kind == .connected })
    }

    @Test func reportsTheLossWhenGPSDDiesAndResumesWhenItReturns() async throws {
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea") }
        let port = gpsd.port
        let source = GPSDSource(options: .init(host: "127.0.0.1", port: port))
        let phase = Flag()
        let restarted = Flag()
        let task = Task {
            try await collect(source, seconds: 180, what: "loss and recovery") { seen in
                if !phase.isSet && seen.fixes.filter(\.hasPosition).count >= 3 { phase.set() }
                guard let lost = seen.lastIndex(where: { $0.event?.kind == .disconnected }) else { return false }
                return restarted.isSet && seen[lost...].contains { $0.fix?.hasPosition == true }
            }
        }
        await phase.wait()
        try await offThePool { try gpsd.stop() }
        let again = try await offThePool { try GPSFake.start("walk-15min.nmea", port: port) }
        defer { again.terminate() }
        restarted.set()
        let seen = try await task.value
        let kinds = seen.events.map(\.kind)
        #expect(kinds.first == .connected)
        #expect(kinds.contains(.disconnected))
        #expect(kinds.filter { $0 == .connected }.count >= 2)
    }

    @Test func releasesAndReacquiresItsWatch() async throws {
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea") }
        defer { gpsd.terminate() }
        let source = GPSDSource(options: .init(host: "127.0.0.1", port: gpsd.port))
        let seen = try await collect(source, what: "release and reacquire") { seen in
            if seen.fixes.filter(\.hasPosition).count == 2 && source.isWatching && seen.events.count == 1 {
                source.releaseWatch()
            }
            if seen.last?.event?.kind == .released { source.acquireWatch() }
            guard let back = seen.firstIndex(where: { $0.event?.kind == .acquired }) else { return false }
            return seen[back...].contains { $0.fix?.hasPosition == true }
        }
        let kinds = seen.events.map(\.kind)
        #expect(kinds == [.connected, .released, .acquired])
        // Nothing arrives between the release and the re-acquisition.
        let released = seen.firstIndex { $0.event?.kind == .released }!
        let acquired = seen.firstIndex { $0.event?.kind == .acquired }!
        #expect(seen[(released + 1)..<acquired].isEmpty)
    }

    @Test func stopsWhenTheConsumerIsCancelled() async throws {
        let gpsd = try await offThePool { try GPSFake.start("walk-15min.nmea") }
        defer { gpsd.terminate() }
        let source = GPSDSource(options: .init(host: "127.0.0.1", port: gpsd.port))
        try await withTimeout(60, "the gpsd source to stop") {
            let (consumer, arrivals) = consumeInTheBackground(source)
            var fixes = arrivals.makeAsyncIterator()
            _ = await fixes.next()
            #expect(connections(toPort: gpsd.port) == 1, "\(connectionReport(gpsd.port))")
            consumer.cancel()
            // The iteration ends once the worker has closed its connection to gpsd.
            #expect(await consumer.value >= 1)
            #expect(connections(toPort: gpsd.port) == 0)
        }
    }

    @Test func parsesGPSDAddresses() {
        #expect(GPSDSource.Options(address: "localhost")?.port == "2947")
        #expect(GPSDSource.Options(address: "10.0.0.2:3000")?.host == "10.0.0.2")
        #expect(GPSDSource.Options(address: ":3000")?.host == "localhost")
        #expect(GPSDSource.Options(address: "[::1]:2948")?.host == "::1")
        #expect(GPSDSource.Options(address: "[::1]:2948")?.port == "2948")
        #expect(GPSDSource.Options(address: "host:99999") == nil)
        #expect(GPSDSource.Options(address: "host:abc") == nil)
    }
}

/// A one-way thread-safe flag.
/// A condition one task sets and another waits for (no polling: the waiter sleeps until it is set).
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    private let signal = Signal()
    var isSet: Bool { lock.withLock { value } }

    func set() {
        lock.withLock { value = true }
        signal.fire()
    }

    /// Returns once the flag is set.
    func wait() async {
        while !isSet && !Task.isCancelled { await signal.wait() }
    }
}
