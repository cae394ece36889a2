import CGPS
import Geo
import Testing

@testable import GPSInput

/// The gpsd connection's decisions, without gpsd or a socket: events in, actions out.
@Suite("gpsd connection")
struct GPSDConnectionStateMachineTests {
    typealias Machine = GPSDConnectionStateMachine
    typealias Action = Machine.Action

    static func machine(maxBackoff: Double = 1) -> Machine {
        Machine(maxBackoff: maxBackoff, idleFlush: 0.5, fallbackFlush: 1.5)
    }

    /// A machine whose first connection and watch succeeded.
    static func watching() -> Machine {
        var m = machine()
        #expect(m.start() == .connect)
        #expect(m.connectionOpened() == .sendWatch)
        #expect(m.watchAccepted() == .report(.connected, .watching, then: .read(flushAt: nil)))
        return m
    }

    /// A report SKY as libgps leaves it (its `set` bits say what it carried).
    static func sky(_ r: Reports, hdop: Double) -> UnsafePointer<gps_data_t> {
        let report = r.sky(hdop: hdop)
        r.data.pointee.set = UInt64(keeptrack_sky_mask())
        return report
    }

    /// Feeds a report; returns the action and what was delivered.
    static func read(_ m: inout Machine, _ report: UnsafePointer<gps_data_t>, at now: Double) -> (Action, [Fix]) {
        var fixes: [Fix] = []
        let action = m.reportRead(report, now: now) { fixes.append($0) }
        return (action, fixes)
    }

    @Test(arguments: [
        (1.0, [0.25, 0.5, 1.0, 1.0, 1.0]),
        (0.25, [0.25, 0.25, 0.25]),
        (3.0, [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]),
    ])
    func aDeadGpsdIsReconnectedAfterTheBackoff(maxBackoff: Double, waits: [Double]) {
        var m = Self.machine(maxBackoff: maxBackoff)
        #expect(m.start() == .connect)
        for (attempt, wait) in waits.enumerated() {
            let action = m.connectionFailed(reason: "Connection refused")
            // Said once, as an error (gpsd was never reached); later attempts fail quietly.
            let expected: Action =
                attempt == 0
                ? .report(.error, .cannotConnect(reason: "Connection refused"), then: .waitToReconnect(seconds: wait))
                : .waitToReconnect(seconds: wait)
            #expect(action == expected, "attempt \(attempt)")
            #expect(m.backoffElapsed() == .connect)
        }
    }

    @Test(arguments: [Machine.Loss.closed, .failed(errno: 104), .lineTooLong])
    func aLostConnectionIsReportedOnceAndGpsdIsAskedAgainAtOnce(loss: Machine.Loss) {
        var m = Self.watching()
        var fixes: [Fix] = []
        #expect(
            m.connectionLost(loss) { fixes.append($0) }
                == .close(then: .report(.disconnected, .lost(loss), then: .connect)))
        #expect(fixes.isEmpty)
        // The loss was said: failed attempts are quiet, the backoff starts from its first wait.
        #expect(m.connectionFailed(reason: "Connection refused") == .waitToReconnect(seconds: 0.25))
        #expect(m.backoffElapsed() == .connect)
        #expect(m.connectionFailed(reason: "Connection refused") == .waitToReconnect(seconds: 0.5))
        #expect(m.backoffElapsed() == .connect)
        #expect(m.connectionOpened() == .sendWatch)
        #expect(m.watchAccepted() == .report(.connected, .watching, then: .read(flushAt: nil)))
        // Watching again reset the backoff.
        _ = m.connectionLost(.closed) { _ in }
        #expect(m.connectionFailed(reason: "x") == .waitToReconnect(seconds: 0.25))
    }

    @Test func aFailedConnectionAfterAWatchIsADisconnectionNotAnError() {
        var m = Self.watching()
        _ = m.watchReleased { _ in }
        #expect(m.watchResumed() == .connect)
        let wait = Action.waitToReconnect(seconds: 0.25)
        #expect(
            m.connectionFailed(reason: "Connection refused")
                == .report(.disconnected, .cannotConnect(reason: "Connection refused"), then: wait))
    }

    @Test func aRefusedWatchClosesTheConnectionAndRetriesAfterTheSameBackoff() {
        var m = Self.machine()
        _ = m.start()
        _ = m.connectionFailed(reason: "Connection refused")
        #expect(m.backoffElapsed() == .connect)
        for _ in 0..<3 {
            #expect(m.connectionOpened() == .sendWatch)
            #expect(
                m.watchRefused()
                    == .close(then: .report(.error, .watchRefused, then: .waitToReconnect(seconds: 0.5))))
            #expect(m.backoffElapsed() == .connect)
        }
    }

    @Test func aReleasedWatchDeliversTheEpochClosesAndIsTakenBackAsAcquired() {
        let r = Reports()
        var m = Self.watching()
        #expect(Self.read(&m, r.tpv(second: 0, latitude: 48.0), at: 10).0 == .read(flushAt: 10.5))
        var fixes: [Fix] = []
        let release = Action.close(then: .report(.released, .released, then: .waitForWatch))
        #expect(m.watchReleased { fixes.append($0) } == release)
        #expect(fixes.map(\.coordinate?.latitude) == [48.0])
        #expect(!m.isWatchWanted)
        #expect(m.watchResumed() == .connect)
        #expect(m.isWatchWanted)
        #expect(m.connectionOpened() == .sendWatch)
        #expect(m.watchAccepted() == .report(.acquired, .watchingAgain, then: .read(flushAt: nil)))
        // Released once more: said again.
        #expect(m.watchReleased { _ in } == release)
    }

    @Test func aWatchReleasedWhileGpsdIsDownIsSaidOnceUntilTheNextWatch() {
        var m = Self.machine()
        _ = m.start()
        _ = m.connectionFailed(reason: "Connection refused")
        #expect(m.watchReleased { _ in } == .report(.released, .released, then: .waitForWatch))
        #expect(m.watchResumed() == .connect)
        // Still down: quiet, and the backoff goes on from where it was.
        #expect(m.connectionFailed(reason: "Connection refused") == .waitToReconnect(seconds: 0.5))
        #expect(m.watchReleased { _ in } == .waitForWatch)
        #expect(m.watchResumed() == .connect)
        #expect(m.connectionOpened() == .sendWatch)
        #expect(m.watchAccepted() == .report(.acquired, .watchingAgain, then: .read(flushAt: nil)))
    }

    @Test(arguments: [(0.2, false), (0.49, false), (0.5, true), (3, true)])
    func anEpochIsDeliveredOnceItsQuietTimeHasPassed(after quiet: Double, delivered: Bool) {
        let r = Reports()
        var m = Self.watching()
        #expect(Self.read(&m, r.tpv(second: 0, latitude: 48.0), at: 100).0 == .read(flushAt: 100.5))
        var fixes: [Fix] = []
        let action = m.waitEnded(now: 100 + quiet) { fixes.append($0) }
        #expect(fixes.count == (delivered ? 1 : 0))
        #expect(action == .read(flushAt: delivered ? nil : 100.5))
    }

    @Test func aWaitWithNoEpochInProgressHasNoDeadline() {
        var m = Self.watching()
        var fixes: [Fix] = []
        #expect(m.waitEnded(now: 1_000) { fixes.append($0) } == .read(flushAt: nil))
        #expect(fixes.isEmpty)
    }

    @Test func theQuietTimeIsLongerOnceTheCycleIsKnownAndShortAgainOnANewConnection() {
        let r = Reports()
        var m = Self.watching()
        // Epochs of a TPV then a SKY, one a second: two alike teach the cycle.
        #expect(Self.read(&m, r.tpv(second: 0, latitude: 48.0), at: 1).0 == .read(flushAt: 1.5))
        #expect(Self.read(&m, Self.sky(r, hdop: 1), at: 1.1).0 == .read(flushAt: 1.6))
        #expect(Self.read(&m, r.tpv(second: 1, latitude: 48.1), at: 2).1.map(\.coordinate?.latitude) == [48.0])
        #expect(Self.read(&m, Self.sky(r, hdop: 1), at: 2.1).0 == .read(flushAt: 2.6))
        let (learned, previous) = Self.read(&m, r.tpv(second: 2, latitude: 48.2), at: 3)
        #expect(m.merger.knowsCycle)
        #expect(learned == .read(flushAt: 4.5))
        #expect(previous.map(\.coordinate?.latitude) == [48.1])
        // Known: the SKY ends the epoch at once, and the next epoch waits the fallback.
        let (ended, fixes) = Self.read(&m, Self.sky(r, hdop: 1), at: 3.1)
        #expect(ended == .read(flushAt: nil))
        #expect(fixes.map(\.coordinate?.latitude) == [48.2])
        #expect(Self.read(&m, r.tpv(second: 3, latitude: 48.3), at: 4).0 == .read(flushAt: 5.5))
        // Another connection: gpsd's cycle is learned again.
        _ = m.connectionLost(.closed) { _ in }
        _ = m.connectionOpened()
        _ = m.watchAccepted()
        #expect(!m.merger.knowsCycle)
        #expect(Self.read(&m, r.tpv(second: 10, latitude: 48.4), at: 20).0 == .read(flushAt: 20.5))
    }

    @Test func aReportWithoutPositionOrSatellitesLeavesNoEpochInProgress() {
        let r = Reports()
        var m = Self.watching()
        let report = r.sky(hdop: 1)  // no `set` bits: neither a TPV nor a SKY for libgps
        let (action, fixes) = Self.read(&m, report, at: 5)
        #expect(action == .read(flushAt: nil))
        #expect(fixes.isEmpty)
    }

    @Test func stoppingDeliversTheEpochInProgressAndClosesTheConnection() {
        let r = Reports()
        var m = Self.watching()
        _ = Self.read(&m, r.tpv(second: 0, latitude: 48.0), at: 1)
        var fixes: [Fix] = []
        #expect(m.stop { fixes.append($0) } == .close(then: .exit))
        #expect(fixes.map(\.coordinate?.latitude) == [48.0])
        #expect(m.state == .stopped)
    }

    @Test func stoppingWithoutAConnectionClosesNothing() {
        var down = Self.machine()
        _ = down.start()
        _ = down.connectionFailed(reason: "Connection refused")
        #expect(down.stop { _ in } == .exit)
        var released = Self.watching()
        _ = released.watchReleased { _ in }
        #expect(released.stop { _ in } == .exit)
    }
}
