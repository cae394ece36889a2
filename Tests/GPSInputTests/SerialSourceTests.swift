import KeepTrackTesting
import Foundation
import Geo
import NMEA
import Testing

@testable import GPSInput

/// Against a real pseudo-terminal fed by tools/fake-receiver.py.
@Suite("serial source", .serialized)
struct SerialSourceTests {
    /// Starts tools/fake-receiver.py behind a symlink in a private directory.
    func receiver(_ args: [String]) async throws -> (Tool, String) {
        let dir = try TemporaryDirectory("keeptrack-serial").url
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let link = dir.appendingPathComponent("ttyGPS").path
        let tool = try Tool("tools/fake-receiver.py", args + ["--link", link])
        guard try await offThePool({ tool.readLine() }) != nil else { throw TimedOut(what: "fake-receiver start") }
        return (tool, link)
    }

    @Test func deliversTheDecodersFixesFromAPty() async throws {
        // The pty is written at the receiver's pace: read it off the cooperative pool.
        try await onOwnThreads {
            // --loop: the receiver plays until stopped. Played once (45 s at 20 epochs a second), it
            // could end and remove its pty before a reader started late on a loaded machine.
            let (fake, link) = try await receiver([
                fixturePath("walk-15min.nmea"), "--rate", "20", "--baud", "115200", "--loop",
            ])
            defer { fake.terminate() }
            var options = SerialSource.Options(path: link, baud: .fixed(115_200))
            // Equality, not latency, is under test: a generous end-of-epoch gap keeps a loaded CI
            // machine (the fake receiver descheduled mid-epoch) from splitting an epoch.
            options.idleFlush = 0.5
            let source = SerialSource(options: options)
            let seen = try await collect(source, what: "10 fixes from the pty") { $0.fixes.count >= 10 }
            #expect(seen.events.first?.kind == .connected)
            #expect(seen.events.first?.message == "reading \(link) at 115200 baud")
            let reference = try decoderFixes("walk-15min.nmea")
            // The first epoch may have been joined mid-way; every later one equals the decoder's fix
            // apart from the line numbers, which count from where reading started.
            let received = Array(seen.fixes.dropFirst())
            let start = try #require(reference.firstIndex { $0.time == received.first?.time })
            for (i, fix) in received.enumerated() {
                var expected = reference[(start + i) % reference.count]  // the log again after its end
                expected.lines = fix.lines
                #expect(fix == expected)
            }
        }
    }

    @Test func detectsTheBaudRate() async throws {
        // The pty is written at the receiver's pace: read it off the cooperative pool.
        try await onOwnThreads {
            let (fake, link) = try await receiver([fixturePath("walk-15min.nmea"), "--rate", "10", "--baud", "38400"])
            defer { fake.terminate() }
            let source = SerialSource(options: .init(path: link, baud: .auto))
            let seen = try await collect(source, what: "autobaud") { $0.fixes.count >= 2 }
            // 9600 and 4800 are tried first and see only garbage; 38400 gives NMEA.
            #expect(seen.events.first?.message == "reading \(link) at 38400 baud")
            #expect(seen.fixes.dropFirst().allSatisfy { $0.hasPosition })
        }
    }

    /// A fixed rate that is not the receiver's reads noise: it is said once, with the rate, rather
    /// than nothing forever.
    @Test func aWrongFixedRateIsSaid() async throws {
        try await onOwnThreads {
            let (fake, link) = try await receiver([
                fixturePath("walk-15min.nmea"), "--rate", "10", "--baud", "9600", "--loop",
            ])
            defer { fake.terminate() }
            let source = SerialSource(options: .init(path: link, baud: .fixed(4800)))
            let seen = try await collect(source, what: "a wrong rate said") { $0.events.count >= 2 }
            #expect(seen.events.first?.kind == .connected)
            let said = try #require(seen.events.dropFirst().first)
            #expect(said.kind == .error && (said.error as? GPSInputError)?.code == .noSentences)
            #expect(said.message.hasPrefix("no NMEA sentences from \(link) at 4800 baud in "), "\(said.message)")
            #expect(said.message.hasSuffix("the wrong baud rate? (auto detection finds it)"))
            #expect(seen.fixes.allSatisfy { !$0.hasPosition })
        }
    }

    @Test func reportsAnUnplugAndResumesWhenTheDeviceReturns() async throws {
        // The pty is written at the receiver's pace: read it off the cooperative pool.
        try await onOwnThreads {
            let (fake, link) = try await receiver([
                fixturePath("walk-15min.nmea"), "--rate", "20", "--baud", "9600", "--unplug-after", "6",
                "--replug-after", "1",
            ])
            defer { fake.terminate() }
            let source = SerialSource(options: .init(path: link, baud: .fixed(9600)))
            let seen = try await collect(source, seconds: 180, what: "unplug and replug") { seen in
                guard let lost = seen.firstIndex(where: { $0.event?.kind == .disconnected }) else { return false }
                return seen[lost...].filter { $0.fix?.hasPosition == true }.count >= 2
            }
            let kinds = seen.events.map(\.kind)
            #expect(kinds.first == .connected)
            let lost = try #require(seen.events.first { $0.kind == .disconnected })
            #expect(
                lost.message.contains("the device went away") || lost.message.contains("hung up"), "\(lost.message)")
            #expect(kinds.filter { $0 == .connected }.count == 2)
        }
    }

    @Test func stopsWhenTheConsumerIsCancelled() async throws {
        let (fake, link) = try await receiver([
            fixturePath("walk-15min.nmea"), "--rate", "20", "--baud", "9600", "--loop",
        ])
        defer { fake.terminate() }
        let source = SerialSource(options: .init(path: link, baud: .fixed(9600)))
        try await withTimeout(60, "the serial source to stop") {
            let (consumer, arrivals) = consumeInTheBackground(source)
            var fixes = arrivals.makeAsyncIterator()
            _ = await fixes.next()
            #expect(descriptors(openOn: link) == 1)
            consumer.cancel()
            // The iteration ends once the worker has closed the device.
            #expect(await consumer.value >= 1)
            #expect(descriptors(openOn: link) == 0)
        }
    }

    @Test func saysWhenTheDeviceIsMissing() async throws {
        let source = SerialSource(options: .init(path: "/nonexistent/ttyUSB9", baud: .fixed(9600)))
        let seen = try await collect(source, what: "an error") { !$0.events.isEmpty }
        #expect(seen.events.first?.kind == .error)
        #expect(
            seen.events.first?.message
                == "/nonexistent/ttyUSB9 is not there (receiver unplugged?); waiting for it to appear")
    }

    /// A path that is no terminal (a log given as a device) will not become one: the source says so
    /// once and ends, as a log that cannot be opened does (it retried for ever).
    @Test func aPathThatIsNotATerminalIsSaidAndEndsTheSource() async throws {
        let path = fixturePath("walk-15min.nmea")
        let source = SerialSource(options: .init(path: path, baud: .fixed(9600)))
        // Until the end: the collection stops at no element.
        let seen = try await collect(source, what: "the source's end") { _ in false }
        #expect(seen.events.map(\.kind) == [.error] && seen.fixes.isEmpty)
        #expect(seen.events.first?.message == "\(path) is not a serial device (Inappropriate ioctl for device)")
    }

    @Test func explainsPermissionDeniedWithTheDialoutGroup() {
        // Tests run as root, which no permission stops: check the message the worker gives EACCES.
        let message = SerialWorker.openProblem(path: "/dev/ttyACM0", errno: EACCES, everOpened: false)
        #expect(message.kind == .error)
        #expect(message.text.contains("dialout"))
        #expect(message.text.contains("sudo usermod -aG dialout $USER"))
        let gone = SerialWorker.openProblem(path: "/dev/ttyACM0", errno: ENOENT, everOpened: true)
        #expect(gone.kind == .disconnected)
    }

    @Test func parsesBaudRates() {
        #expect(SerialSource.Baud("4800") == .fixed(4800))
        #expect(SerialSource.Baud("auto") == .auto)
        #expect(SerialSource.Baud("1234") == nil)
    }
}
