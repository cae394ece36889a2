import Geo
import KeepTrackTesting
import Lifecycle
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Application: handlers, observers, time")
struct ApplicationTests {
    @Test func expirationHandlersRunAtTheirDueTimeAndTheirEndCounts() {
        let clock = ManualClock()
        let app = Application(clock: clock)
        let log = Mutex<[String]>([])
        app.observe { e in
            if case .transition(let t) = e { log.withLock { $0.append("\(t.to.rawValue)@\(Int(t.time))") } }
        }
        app.launch()
        app.enterBackground()
        let id = Mutex(AppLifecycle.TaskIdentifier.invalid)
        id.withLock {
            $0 = app.beginBackgroundTask(name: "upload") {
                log.withLock { $0.append("handler@\(Int(app.now))") }
                // A restart in the handler is refused; ending the task is what saves the app.
                let again = app.beginBackgroundTask(name: "upload-again")
                log.withLock { $0.append("restart \(again == .invalid ? "refused" : "granted")") }
                app.endBackgroundTask(id.withLock { $0 })
            }
        }
        // Time jumps far past the budget in one step (a replay between two fixes): the handler
        // still runs at 175 s and the app is suspended, not terminated, at 180 s.
        clock.advance(to: .init(secondsSince1970: 1000))
        app.advance()
        #expect(
            log.withLock { $0 } == [
                "active@0", "inactive@0", "background@0", "handler@175", "restart refused", "suspended@180",
            ])
        #expect(app.state == .suspended)
    }

    @Test func withoutAHandlerTheOpenTaskTerminatesTheApp() {
        let clock = ManualClock()
        let app = Application(policy: .ios13, clock: clock)
        app.launch()
        app.enterBackground()
        _ = app.beginBackgroundTask(name: "forgotten")
        clock.advance(by: .seconds(60))
        app.advance()
        #expect(app.state == .terminated)
        let last = app.takeEvents().last
        guard case .transition(let t)? = last else {
            Issue.record("no transition")
            return
        }
        #expect(t.time == 30)
        #expect(t.reason == .tasksNotEnded(["forgotten"]))
        #expect(app.takeEvents().isEmpty)
    }

    @Test func inputsProcessDueDeadlinesFirst() {
        let clock = ManualClock()
        let app = Application(modes: .location, clock: clock)
        app.launch()
        app.enterBackground()
        clock.advance(by: .seconds(30))
        // The grace period ended at 5 s: turning updates on at 30 s is too late.
        app.setLocationUpdates(active: true)
        #expect(app.state == .suspended)
        app.locationDelivered()
        #expect(app.state == .suspended)
    }
}

@Suite("SystemdNotifier")
struct SystemdNotifierTests {
    /// A datagram socket bound at a fresh path, like systemd's notify socket.
    func boundSocket() throws -> (fd: Int32, path: String) {
        let dir = try TemporaryDirectory("keeptrack-notify").path
        let path = dir + "/notify"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(r == 0)
        return (fd, path)
    }

    func receive(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    @Test func sendsEachMessageAsOneDatagram() throws {
        let (fd, path) = try boundSocket()
        defer {
            close(fd)
            unlink(path)
        }
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000"]))
        #expect(notifier.watchdogInterval == 30)
        #expect(notifier.notify("READY=1\nSTATUS=active"))
        #expect(notifier.notify("WATCHDOG=1"))
        #expect(receive(fd) == "READY=1\nSTATUS=active")
        #expect(receive(fd) == "WATCHDOG=1")
        #expect(receive(fd) == nil)
    }

    @Test func isAbsentWithoutNotifySocketAndFailsQuietlyWithoutAListener() {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(socketPath: "/nonexistent/notify").notify("READY=1") == false)
    }
}
