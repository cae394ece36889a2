import CGPS
import Geo
import Synchronization
import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// Fixes from gpsd, through libgps.
///
/// Each iteration opens its own connection on a dedicated thread, sends `WATCH` (JSON, optionally
/// for one device) and turns gpsd's reports into fixes: gpsd sends several TPV reports per epoch
/// (one per NMEA sentence it decoded until it has learned the receiver's cycle, then one), which
/// are merged by time into one ``Fix``; SKY reports add DOPs and satellite counts.
///
/// An epoch ends on the data: the merger learns the reports of gpsd's cycle (say TPV then SKY)
/// and, once two epochs in a row had the same ones, delivers an epoch as soon as its last report
/// arrives, with no timer. Until then (the first epochs, a receiver whose cycle varies), an epoch
/// is delivered when a report with another time arrives or after ``Options/idleFlush`` without a
/// report; once the cycle is known the quiet-time fallback is ``Options/fallbackFlush``.
///
/// Accuracies map from gpsd's error estimates: `eph` → horizontal, `epv` → vertical, `eps` →
/// speed, `epd` → course (gpsd derives them from DOPs when the receiver reports none).
///
/// When gpsd is not running or goes away, the source reports a ``SourceEvent/Kind/disconnected``
/// (or ``SourceEvent/Kind/error`` on the first failed connection) and reconnects with a backoff
/// that doubles from 0.25 s up to ``Options/maxBackoff`` (1 s by default), so fixes resume within
/// about two seconds after gpsd returns.
public final class GPSDSource: FixSource {
    public struct Options: Sendable {
        /// gpsd's host. The default is `localhost`.
        public var host: String = "localhost"
        /// gpsd's port. The default is `2947`.
        public var port: String = "2947"
        /// Only this device's reports (gpsd `WATCH` with `device`). The default is `nil` (all).
        public var device: String?
        /// Longest wait between reconnection attempts. The default is 1 s.
        public var maxBackoff: Double = 1.0
        /// Quiet time after a report that ends an epoch. The default is 0.5 s: gpsd reports
        /// sentence by sentence, and at 4800-9600 baud the untimed sentences after an epoch's
        /// last position (GSA, GSV) take a few hundred milliseconds to arrive.
        public var idleFlush: Double = 0.5
        /// Quiet time that ends an epoch once gpsd's report cycle is known, should its last report
        /// not come. The default is 1.5 s: longer than any gap inside an epoch (the SKY that ends
        /// a 4800-baud epoch comes half a second after its TPV), so it does not race the data.
        public var fallbackFlush: Double = 1.5

        public init(host: String = "localhost", port: String = "2947", device: String? = nil) {
            self.host = host
            self.port = port
            self.device = device
        }

        /// Parses `HOST[:PORT]`, `[IPv6]:PORT` or `:PORT`.
        public init?(address: String) {
            var host = address
            var port = "2947"
            if address.hasPrefix("[") {
                guard let close = address.firstIndex(of: "]") else { return nil }
                host = String(address[address.index(after: address.startIndex)..<close])
                let rest = address[address.index(after: close)...]
                if rest.hasPrefix(":") { port = String(rest.dropFirst()) } else if !rest.isEmpty { return nil }
            } else if let colon = address.lastIndex(of: ":"), address.firstIndex(of: ":") == colon {
                host = String(address[..<colon])
                port = String(address[address.index(after: colon)...])
            }
            if host.isEmpty { host = "localhost" }
            guard let p = Int(port), (1...65535).contains(p) else { return nil }
            self.init(host: host, port: String(p))
        }
    }

    public let options: Options
    private let watchWanted = Atomic<Bool>(true)
    /// The reading thread of the live iteration, as an executor: a consumer that prefers it
    /// (``preferredExecutor``) handles each fix on the thread that read it from gpsd.
    private let executor = ThreadExecutor()

    public var preferredExecutor: (any TaskExecutor)? { executor }

    public init(options: Options = Options()) {
        self.options = options
    }

    public var name: String { "gpsd \(options.host):\(options.port)" }

    /// Gives up the watch: the connection to gpsd closes, so gpsd may stop reading (and powering)
    /// the receiver when no other client watches. Fixes stop until ``acquireWatch()``.
    public func releaseWatch() {
        watchWanted.store(false, ordering: .releasing)
        wakeWorkers()
    }

    /// Takes the watch back after ``releaseWatch()``.
    public func acquireWatch() {
        watchWanted.store(true, ordering: .releasing)
        wakeWorkers()
    }

    /// The workers of live iterations, to wake when the watch is wanted again.
    private let links = Mutex<[WorkerLink]>([])

    private func wakeWorkers() {
        let live = links.withLock { l in
            l.removeAll { $0.isStopped }
            return l
        }
        for link in live { link.wake() }
    }

    /// Whether the source currently wants its watch.
    public var isWatching: Bool { watchWanted.load(ordering: .acquiring) }

    public func makeAsyncIterator() -> SourceIterator {
        let options = self.options
        return WorkerLink.start(
            name: name, threadName: "keeptrack.gpsd", executor: executor,
            onLink: { link in links.withLock { $0.append(link) } }
        ) { [self] link in
            GPSDWorker(options: options, link: link, wanted: { self.isWatching }).run()
        }
    }
}

/// The blocking libgps loop, on its own thread: performs what its ``GPSDConnectionStateMachine``
/// decides, and tells it what happened.
struct GPSDWorker {
    typealias Action = GPSDConnectionStateMachine.Action

    let options: GPSDSource.Options
    let link: WorkerLink
    let wanted: @Sendable () -> Bool

    func run() {
        let data = UnsafeMutablePointer<gps_data_t>.allocate(capacity: 1)
        defer { data.deallocate() }
        let lines = ReportLines()
        var machine = GPSDConnectionStateMachine(options: options)
        let deliver: (Fix) -> Void = { link.yield($0) }
        var action = machine.start()
        while true {
            // Effects, at once.
            switch action {
            case .report(let kind, let notice, let then):
                if let error = error(notice) { link.yield(kind, error) } else { link.yield(kind, message(notice)) }
                action = then
                continue
            case .close(let then):
                gps_close(data)
                action = then
                continue
            case .sendWatch:
                var flags = UInt32(WATCH_ENABLE) | UInt32(WATCH_JSON)
                if options.device != nil { flags |= UInt32(WATCH_DEVICE) }
                let watchRC =
                    options.device.map { keeptrack_gps_watch(data, flags, $0) }
                    ?? keeptrack_gps_watch(data, flags, nil)
                if watchRC != 0 {
                    action = machine.watchRefused()
                } else {
                    lines.reset()
                    action = machine.watchAccepted()
                }
                continue
            case .exit:
                return
            case .connect, .waitToReconnect, .read, .waitForWatch:
                break
            }
            // Before each step that waits: a stop, or a change of the watch wanted.
            if link.isStopped {
                action = machine.stop(deliver: deliver)
                continue
            }
            let wanted = self.wanted()
            if wanted != machine.isWatchWanted {
                action = wanted ? machine.watchResumed() : machine.watchReleased(deliver: deliver)
                continue
            }
            switch action {
            case .connect:
                memset(data, 0, MemoryLayout<gps_data_t>.size)
                let rc = gps_open(options.host, options.port, data)
                // libgps returns -1 and leaves its own code (NL_NOHOST, NL_NOCONNECT...) in errno.
                let code = errno
                action =
                    rc == 0
                    ? machine.connectionOpened()
                    : machine.connectionFailed(
                        reason: code < 0 ? String(cString: gps_errstr(code)) : String(cString: strerror(code)))
            case .waitToReconnect(let seconds):
                link.pause(seconds)
                action = machine.backoffElapsed()
            case .waitForWatch:
                // Until acquireWatch() or a stop wakes it.
                link.pause(3600)
            case .read(let flushAt):
                if let line = lines.next() {
                    // libgps accumulates `set` across reports: clear it to learn what this one carried.
                    data.pointee.set = 0
                    _ = gps_unpack(line, data)
                    action = machine.reportRead(data, now: monotonicSeconds(), deliver: deliver)
                    continue
                }
                // Sleep until a report arrives, the epoch in progress is due (idle flush), or a stop
                // or a watch release wakes the link: no busy polling on a battery, no wait outlasting
                // a stop.
                let waitSeconds = flushAt.map { max(0.001, $0 - monotonicSeconds()) } ?? -1
                if waitForReport(data.pointee.gps_fd, seconds: waitSeconds) {
                    switch lines.fill(from: data.pointee.gps_fd) {
                    case .read: break  // the lines are taken on the next turn
                    case .closed: action = machine.connectionLost(.closed, deliver: deliver)
                    case .failed(let e): action = machine.connectionLost(.failed(errno: e), deliver: deliver)
                    case .tooLong: action = machine.connectionLost(.lineTooLong, deliver: deliver)
                    }
                } else {
                    action = machine.waitEnded(now: monotonicSeconds(), deliver: deliver)
                }
            case .sendWatch, .report, .close, .exit:
                preconditionFailure("performed above")
            }
        }
    }

    /// The error a notice of a failure is.
    func error(_ notice: GPSDConnectionStateMachine.Notice) -> GPSInputError? {
        let (host, port) = (options.host, options.port)
        switch notice {
        case .watching, .watchingAgain, .released:
            return nil
        case .cannotConnect(let reason):
            return GPSInputError(
                .cannotConnect, host: host, port: port, reason: reason, retrySeconds: options.maxBackoff)
        case .watchRefused:
            return GPSInputError(.watchRefused, host: host, port: port)
        case .lost(.closed):
            return GPSInputError(.connectionLost, host: host, port: port, loss: .closed)
        case .lost(.failed(let e)):
            return GPSInputError(.connectionLost, host: host, port: port, errno: e, loss: .readFailed(errno: e))
        case .lost(.lineTooLong):
            return GPSInputError(
                .connectionLost, host: host, port: port, loss: .lineTooLong, limit: ReportLines.capacity)
        }
    }

    /// What a source event says, in words.
    func message(_ notice: GPSDConnectionStateMachine.Notice) -> String {
        let address = "\(options.host):\(options.port)"
        switch notice {
        case .watching:
            let device = options.device.map { " for \($0)" } ?? ""
            return "watching gpsd at \(address)\(device)"
        case .watchingAgain:
            return "watching gpsd at \(address) again"
        case .released:
            return "watch released; gpsd may idle the receiver"
        case .cannotConnect, .watchRefused, .lost:
            return error(notice)?.description ?? ""
        }
    }

    /// Whether gpsd's socket `fd` can be read within `seconds` (negative: no limit). A wake of the
    /// link (a stop, a watch released or wanted again) ends the wait early with `false`.
    func waitForReport(_ fd: Int32, seconds: Double) -> Bool {
        // The consumer's work on what was handed over (when it prefers this thread) runs before
        // the wait: the fix goes from gpsd's report to the output without a thread wake-up.
        link.runJobs()
        if link.isStopped { return false }
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: link.wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        let timeout = seconds < 0 ? Int32(-1) : Int32(min(seconds * 1000, Double(Int32.max)).rounded(.up))
        let ready = poll(&fds, 2, timeout)
        if ready > 0 && fds[1].revents != 0 { link.runJobs(woken: true) }
        return ready > 0 && fds[0].revents != 0
    }
}

/// gpsd's JSON reports, one a line, read from its socket into a buffer of our own and handed to
/// libgps's parser (`gps_unpack`) one at a time: one `recv` after each `poll` that found data, as
/// gpxlogger does, without the `select` that `gps_waiting` adds before every `gps_read`.
final class ReportLines {
    /// The longest line kept (gpsd's longest reports, SKY with many satellites, are a few KB).
    static let capacity = 1 << 16
    private let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: ReportLines.capacity)
    private var start = 0
    private var end = 0

    deinit { buffer.deallocate() }

    /// Forgets what was read (a new connection).
    func reset() { (start, end) = (0, 0) }

    /// The next complete line, NUL-terminated in place (valid until the next call), or `nil`.
    func next() -> UnsafeMutablePointer<CChar>? {
        guard start < end, let found = memchr(buffer + start, 0x0A, end - start) else { return nil }
        let newline = found.assumingMemoryBound(to: CChar.self)
        newline.pointee = 0
        defer { start = newline - buffer + 1 }
        return buffer + start
    }

    enum Fill: Equatable {
        case read, closed, tooLong
        case failed(Int32)
    }

    /// Reads what `fd` has (after `poll` said it is readable); `EINTR` is retried.
    func fill(from fd: Int32) -> Fill {
        if start > 0 {
            memmove(buffer, buffer + start, end - start)
            (start, end) = (0, end - start)
        }
        if end == Self.capacity { return .tooLong }
        while true {
            let n = recv(fd, buffer + end, Self.capacity - end, 0)
            if n > 0 {
                end += n
                return .read
            }
            if n == 0 { return .closed }
            if errno != EINTR { return .failed(errno) }
        }
    }
}

/// Merges gpsd's TPV reports of one epoch (same time) into one fix, and SKY reports into it, and
/// says when the epoch is complete.
///
/// An epoch is complete when a TPV with another time arrives, when the owner calls ``flush(_:)``
/// (quiet time, a stop), or on the data: the merger records the reports of each epoch in order
/// (``ReportCycle``) and once two epochs in a row had the same ones, an epoch that has received
/// them is delivered at once. gpsd reports at the end of the receiver's cycle once it has learned
/// it (one TPV, then a SKY after the satellites' sentences). Replayed over gpsd's regression output
/// for 42 real receivers (`../shared/corpus/*.chk`, where gpsd reports sentence by sentence), the
/// rule ends 863 of 1,091 epochs on their last report; 4 of 3,092 TPVs and 24 more SKYs than with
/// time changes alone arrive after their epoch was delivered (and are dropped).
struct TPVMerger {
    private var pending: Fix?
    private var pendingTime: Int64?
    /// The time of the epoch last delivered by ``flush(_:)``: its stragglers are dropped.
    private var flushedTime: Int64?
    /// The reports of the epoch in progress, or of the last one delivered (stragglers included).
    private var current = ReportCycle()
    /// The reports of the last complete epoch.
    private var last: ReportCycle?
    /// Whether the last two complete epochs had the same reports.
    private(set) var knowsCycle = false
    /// Epochs delivered on their last report (for tests and counting).
    private(set) var endedOnData = 0

    var hasPending: Bool { pending != nil }

    /// Forgets the learned cycle (a new connection).
    mutating func forgetCycle() {
        current = ReportCycle()
        last = nil
        knowsCycle = false
    }

    /// Takes a TPV; delivers the previous epoch's fix when this one starts a new epoch, and this
    /// epoch's when it completes the learned cycle. (By pointer: `gps_data_t` is 24 KB, too big to
    /// copy per report.)
    mutating func tpv(_ data: UnsafePointer<gps_data_t>, deliver: (Fix) -> Void) {
        let f = data.pointee.fix
        guard data.pointee.set & UInt64(TIME_SET) != 0 || f.time.tv_sec != 0 else { return }
        let nanos = Int64(f.time.tv_sec) * 1_000_000_000 + Int64(f.time.tv_nsec)
        if pending == nil, nanos == flushedTime {
            current.append(.tpv)
            return
        }
        if let pendingTime, pendingTime != nanos {
            let done = pending!
            flush { _ in }
            completeEpoch()
            deliver(done)
        } else if pending == nil, flushedTime != nil, !current.isEmpty {
            completeEpoch()
        }
        if pending == nil { current = ReportCycle() }
        var fix = pending ?? Fix()
        let day = Int32(nanos / GNSSTime.nanosecondsPerDay)
        fix.time = GNSSTime(
            day: day, nanosecondOfDay: nanos - Int64(day) * GNSSTime.nanosecondsPerDay,
            fractionDigits: 3)
        switch f.mode {
        case Int32(MODE_3D): fix.mode = .threeD
        case Int32(MODE_2D): fix.mode = .twoD
        default: fix.mode = .none
        }
        if fix.mode != .none, f.latitude.isFinite, f.longitude.isFinite {
            fix.coordinate = Coordinate(latitude: f.latitude, longitude: f.longitude)
        } else {
            fix.coordinate = nil
        }
        @inline(__always) func value(_ v: Double) -> Double? { v.isFinite ? v : nil }
        fix.altitudeMSL = value(f.altMSL) ?? fix.altitudeMSL
        fix.geoidSeparation = value(f.geoid_sep) ?? fix.geoidSeparation
        fix.speed = value(f.speed) ?? fix.speed
        fix.course = value(f.track) ?? fix.course
        fix.magneticVariation = value(f.magnetic_var) ?? fix.magneticVariation
        if let eph = value(f.eph) {
            fix.horizontalAccuracy = eph
            fix.accuracySource = .receiver
        }
        if let epv = value(f.epv), fix.mode == .threeD { fix.verticalAccuracy = epv }
        fix.quality =
            switch f.status {
            case Int32(STATUS_DGPS_FIX): .dgps
            case Int32(STATUS_RTK_FIX): .rtkFixed
            case Int32(STATUS_RTK_FLT): .rtkFloat
            case Int32(STATUS_DR), Int32(STATUS_GNSSDR): .estimated
            case Int32(STATUS_SIM): .simulated
            default: fix.mode == .none ? .invalid : .gps
            }
        pending = fix
        pendingTime = nanos
        current.append(.tpv)
        endIfComplete(deliver)
    }

    /// Takes a SKY report: DOPs and satellite counts for the epoch in progress; delivers it when
    /// this completes the learned cycle.
    mutating func sky(_ pointer: UnsafePointer<gps_data_t>, deliver: (Fix) -> Void) {
        guard var fix = pending else {
            if flushedTime != nil { current.append(.sky) }
            return
        }
        let data = (
            dop: pointer.pointee.dop, satellites_used: pointer.pointee.satellites_used,
            satellites_visible: pointer.pointee.satellites_visible
        )
        @inline(__always) func value(_ v: Double) -> Double? { v.isFinite && v > 0 ? v : nil }
        fix.hdop = value(data.dop.hdop) ?? fix.hdop
        fix.vdop = value(data.dop.vdop) ?? fix.vdop
        fix.pdop = value(data.dop.pdop) ?? fix.pdop
        if data.satellites_used > 0 { fix.satellitesUsed = Int(data.satellites_used) }
        if data.satellites_visible > 0 { fix.satellitesInView = Int(data.satellites_visible) }
        pending = fix
        current.append(.sky)
        endIfComplete(deliver)
    }

    /// Delivers the epoch in progress, now.
    mutating func flush(_ deliver: (Fix) -> Void) {
        guard let fix = pending else { return }
        flushedTime = pendingTime
        pending = nil
        pendingTime = nil
        deliver(fix)
    }

    /// The epoch whose reports `current` holds is over (a report of the next one arrived).
    private mutating func completeEpoch() {
        knowsCycle = current.isComparable && current == last
        last = current
    }

    private mutating func endIfComplete(_ deliver: (Fix) -> Void) {
        guard knowsCycle, current == last else { return }
        endedOnData += 1
        flush(deliver)
    }
}

/// The reports of one epoch in arrival order (2 bits each), compared from one epoch to the next.
struct ReportCycle: Equatable {
    enum Report: UInt64 {
        case tpv = 1
        case sky = 2
    }

    private var bits: UInt64 = 0
    private var count: UInt8 = 0

    var isEmpty: Bool { count == 0 }
    /// Up to 32 reports are told apart; an epoch with more is never taken as a cycle.
    var isComparable: Bool { count > 0 && count <= 32 }

    mutating func append(_ report: Report) {
        if count < 32 { bits |= report.rawValue << (2 * UInt64(count)) }
        if count < UInt8.max { count += 1 }
    }
}

func formatSeconds(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
}
