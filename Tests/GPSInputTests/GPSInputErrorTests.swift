import Foundation
import Geo
import KeepTrackTesting
import NMEA
import SystemIO
import Testing

@testable import GPSInput

/// The sources' failures are `GPSInputError`s, carried in their events with a code and where.
@Suite("GPSInput errors")
struct GPSInputErrorTests {
    /// The error of a source's first error event.
    func firstError<S: FixSource>(_ source: S) async throws -> (event: SourceEvent, error: GPSInputError) {
        var events: [SourceEvent] = []
        for await element in source { if let e = element.event { events.append(e) } }
        let event = try #require(events.first { $0.kind == .error })
        let error = try #require(event.error as? GPSInputError, "\(event)")
        return (event, error)
    }

    @Test func aMissingLogIsCannotOpenNamingItsPathWithTheCause() async throws {
        let (event, error) = try await firstError(NMEALogSource(options: .init(path: "/nonexistent/log.nmea")))
        #expect(error.code == .cannotOpen)
        #expect(error.path == "/nonexistent/log.nmea")
        #expect(error.errno == ENOENT)
        #expect((error.underlying as? NMEAError)?.code == .io)
        #expect(event.message == error.description)
    }

    @Test func aMalformedTrackFileIsUnreadableWithItsLineAndByte() async throws {
        let path = fixturePath("tracks/bad-cell.csv")
        let (event, error) = try await firstError(TrackFileSource(options: .init(path: path, format: .csv)))
        #expect(error.code == .unreadable)
        #expect(error.path == path)
        #expect(error.line == 7)
        #expect(error.byteOffset != nil)
        let cause = try #require(error.underlying)
        #expect(event.message == "\(cause)")
        #expect(event.message.contains("bad-cell.csv:7: byte"))
    }

    @Test func aMissingTrackFileIsCannotOpen() async throws {
        let (_, error) = try await firstError(
            TrackFileSource(options: .init(path: "/nonexistent/walk.gpx", format: .gpx)))
        #expect(error.code == .cannotOpen)
        #expect(error.path == "/nonexistent/walk.gpx")
        #expect(error.errno == ENOENT)
    }

    @Test func aMissingDeviceIsDeviceMissingNamingIt() async throws {
        let source = SerialSource(options: .init(path: "/nonexistent/ttyUSB9", baud: .fixed(9600)))
        let seen = try await collect(source, what: "an error") { !$0.events.isEmpty }
        let error = try #require(seen.events.first?.error as? GPSInputError)
        #expect(error.code == .deviceMissing)
        #expect(error.path == "/nonexistent/ttyUSB9")
        #expect(error.errno == ENOENT)
    }

    @Test(arguments: [
        (EACCES, GPSInputError.Code.permissionDenied), (ENOENT, .deviceMissing), (EBUSY, .cannotOpen),
    ])
    func aDeviceThatDoesNotOpenSaysWhyByItsCode(errno: Int32, code: GPSInputError.Code) {
        let problem = SerialWorker.openProblem(path: "/dev/ttyACM0", errno: errno, everOpened: false)
        #expect(problem.error.code == code)
        #expect(problem.error.path == "/dev/ttyACM0")
        #expect(problem.error.errno == errno)
        #expect(problem.text == problem.error.description)
    }

    @Test func aLostDeviceSaysHowInTheSameWords() {
        let lost = GPSInputError(.deviceLost, path: "/dev/ttyACM0", loss: .endOfFile)
        #expect(lost.description == "/dev/ttyACM0: the device went away (end of file); reopening when it reappears")
        let failed = GPSInputError(.deviceLost, path: "/dev/ttyACM0", loss: .readFailed(errno: EIO))
        #expect(
            failed.description
                == "/dev/ttyACM0: read failed: \(String(cString: strerror(EIO))); reopening when it reappears")
    }

    @Test func gpsdFailuresCarryTheAddress() {
        let worker = GPSDWorker(
            options: .init(host: "127.0.0.1", port: "2999"),
            link: WorkerLink(
                name: "gpsd", continuation: AsyncStream.makeStream(of: SourceElement.self).continuation,
                executor: ThreadExecutor()),
            wanted: { true })
        let down = worker.error(.cannotConnect(reason: "connection refused"))
        #expect(down?.code == .cannotConnect)
        #expect(down?.host == "127.0.0.1" && down?.port == "2999")
        #expect(down?.reason == "connection refused")
        #expect(
            worker.message(.cannotConnect(reason: "connection refused")).hasPrefix(
                "cannot connect to gpsd at 127.0.0.1:2999 (connection refused); is gpsd running?"))
        // A name that does not resolve (libgps's words): not a question of gpsd running.
        #expect(
            worker.message(.cannotConnect(reason: "can't get host entry")).hasPrefix(
                "cannot connect to gpsd at 127.0.0.1:2999 (can't get host entry); is 127.0.0.1 the right name?"))
        let lost = worker.error(.lost(.lineTooLong))
        #expect(lost?.code == .connectionLost && lost?.loss == .lineTooLong && lost?.limit == ReportLines.capacity)
        #expect(worker.error(.watching) == nil)
    }

    @Test func aSlowConsumerIsCountedInTheError() {
        let error = GPSInputError(.consumerTooSlow, limit: 1000)
        #expect(error.description == "the consumer is too slow: 1000 elements dropped so far")
        let event = SourceEvent(.error, source: "gpsd", error: error)
        #expect(event.message == error.description)
        #expect((event.error as? GPSInputError)?.code == .consumerTooSlow)
    }
}
