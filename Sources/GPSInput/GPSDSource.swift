import CGPS
import Geo
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Fixes from gpsd, through libgps.
///
/// Each iteration opens its own connection on a dedicated thread, sends `WATCH` (JSON, optionally
/// for one device) and turns gpsd's reports into fixes: gpsd sends several TPV reports per epoch
/// (one per NMEA sentence it decoded), which are merged by time into one ``Fix``; SKY reports add
/// DOPs and satellite counts. An epoch is delivered when a report with another time arrives or
/// after ``Options/idleFlush`` without one, so a fix leaves within about half a second.
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
        return WorkerLink.start(name: name, threadName: "keeptrack.gpsd",
                                onLink: { link in links.withLock { $0.append(link) } }) { [self] link in
            GPSDWorker(options: options, link: link, wanted: { self.isWatching }).run()
        }
    }
}

/// The blocking libgps loop, on its own thread.
struct GPSDWorker {
    let options: GPSDSource.Options
    let link: WorkerLink
    let wanted: @Sendable () -> Bool

    func run() {
        let data = UnsafeMutablePointer<gps_data_t>.allocate(capacity: 1)
        defer { data.deallocate() }
        var connected = false
        var everConnected = false
        var released = false
        var backoff = 0.25
        var reportedDown = false
        var merger = TPVMerger()
        var lastReport = 0.0

        defer { if connected { gps_close(data) } }
        while !link.isStopped {
            if !wanted() {
                if connected {
                    if let fix = merger.flush() { link.yield(fix) }
                    gps_close(data)
                    connected = false
                }
                if !released {
                    released = true
                    link.yield(.released, "watch released; gpsd may idle the receiver")
                }
                // Until acquireWatch() or a stop wakes it.
                link.pause(3600)
                continue
            }
            if !connected {
                memset(data, 0, MemoryLayout<gps_data_t>.size)
                let rc = gps_open(options.host, options.port, data)
                if rc != 0 {
                    if !reportedDown {
                        let reason = String(cString: gps_errstr(rc))
                        let text = "cannot connect to gpsd at \(options.host):\(options.port) (\(reason)); "
                            + "is gpsd running? retrying every \(formatSeconds(options.maxBackoff)) at most"
                        link.yield(everConnected ? .disconnected : .error, text)
                        reportedDown = true
                    }
                    link.pause(backoff)
                    backoff = min(backoff * 2, options.maxBackoff)
                    continue
                }
                var flags = UInt32(WATCH_ENABLE) | UInt32(WATCH_JSON)
                if options.device != nil { flags |= UInt32(WATCH_DEVICE) }
                let watchRC = options.device.map { keeptrack_gps_watch(data, flags, $0) }
                    ?? keeptrack_gps_watch(data, flags, nil)
                if watchRC != 0 {
                    gps_close(data)
                    link.yield(.error, "gpsd refused the WATCH request")
                    link.pause(backoff)
                    continue
                }
                connected = true
                everConnected = true
                backoff = 0.25
                reportedDown = false
                if released {
                    released = false
                    link.yield(.acquired, "watching gpsd at \(options.host):\(options.port) again")
                } else {
                    let device = options.device.map { " for \($0)" } ?? ""
                    link.yield(.connected, "watching gpsd at \(options.host):\(options.port)\(device)")
                }
            }
            // Sleep until a report arrives, the epoch in progress is due (idle flush), or a stop or
            // a watch release wakes the link: no busy polling on a battery, no wait outlasting a stop.
            let waitSeconds = merger.hasPending ? max(0.001, lastReport + options.idleFlush - monotonicNow()) : -1
            if waitForReport(data, seconds: waitSeconds) {
                errno = 0
                // libgps accumulates `set` across reads: clear it to learn what this report carried.
                data.pointee.set = 0
                let n = gps_read(data, nil, 0)
                if n < 0 {
                    if let fix = merger.flush() { link.yield(fix) }
                    gps_close(data)
                    connected = false
                    link.yield(.disconnected, "gpsd closed the connection; reconnecting")
                    reportedDown = true
                    continue
                }
                let set = UInt64(data.pointee.set)
                if set & keeptrack_tpv_mask() != 0 {
                    if let fix = merger.tpv(data) { link.yield(fix) }
                    lastReport = monotonicNow()
                }
                if set & keeptrack_sky_mask() != 0 {
                    merger.sky(data)
                }
            } else if merger.hasPending && monotonicNow() - lastReport >= options.idleFlush {
                if let fix = merger.flush() { link.yield(fix) }
            }
        }
        if let fix = merger.flush() { link.yield(fix) }
    }

    /// Whether a report can be read within `seconds` (negative: no limit): one already in
    /// libgps's buffer, or the socket readable. A wake of the link (a stop, a watch released or
    /// wanted again) ends the wait early with `false`.
    func waitForReport(_ data: UnsafeMutablePointer<gps_data_t>, seconds: Double) -> Bool {
        if gps_waiting(data, 0) { return true }
        var fds = [pollfd(fd: data.pointee.gps_fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: link.wakeFD, events: Int16(POLLIN), revents: 0)]
        let timeout = seconds < 0 ? Int32(-1) : Int32(min(seconds * 1000, Double(Int32.max)).rounded(.up))
        let ready = poll(&fds, 2, timeout)
        if ready > 0 && fds[1].revents != 0 { link.drainWakes() }
        return ready > 0 && fds[0].revents != 0
    }
}

/// Merges gpsd's TPV reports of one epoch (same time) into one fix.
struct TPVMerger {
    private var pending: Fix?
    private var pendingTime: Int64?
    /// The time of the epoch last delivered by ``flush()``: its stragglers are dropped.
    private var flushedTime: Int64?

    var hasPending: Bool { pending != nil }

    /// Takes a TPV; returns the previous epoch's fix when this one starts a new epoch.
    /// (By pointer: `gps_data_t` is 24 KB, too big to copy per report.)
    mutating func tpv(_ data: UnsafePointer<gps_data_t>) -> Fix? {
        let f = data.pointee.fix
        guard data.pointee.set & UInt64(TIME_SET) != 0 || f.time.tv_sec != 0 else { return nil }
        let nanos = Int64(f.time.tv_sec) * 1_000_000_000 + Int64(f.time.tv_nsec)
        if pending == nil, nanos == flushedTime { return nil }
        var out: Fix?
        if let pendingTime, pendingTime != nanos {
            out = pending
            pending = nil
        }
        var fix = pending ?? Fix()
        let day = Int32(nanos / GNSSTime.nanosecondsPerDay)
        fix.time = GNSSTime(day: day, nanosecondOfDay: nanos - Int64(day) * GNSSTime.nanosecondsPerDay,
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
        fix.quality = switch f.status {
        case Int32(STATUS_DGPS_FIX): .dgps
        case Int32(STATUS_RTK_FIX): .rtkFixed
        case Int32(STATUS_RTK_FLT): .rtkFloat
        case Int32(STATUS_DR), Int32(STATUS_GNSSDR): .estimated
        case Int32(STATUS_SIM): .simulated
        default: fix.mode == .none ? .invalid : .gps
        }
        pending = fix
        pendingTime = nanos
        return out
    }

    /// Takes a SKY report: DOPs and satellite counts for the epoch in progress.
    mutating func sky(_ pointer: UnsafePointer<gps_data_t>) {
        guard var fix = pending else { return }
        let data = (dop: pointer.pointee.dop, satellites_used: pointer.pointee.satellites_used,
                    satellites_visible: pointer.pointee.satellites_visible)
        @inline(__always) func value(_ v: Double) -> Double? { v.isFinite && v > 0 ? v : nil }
        fix.hdop = value(data.dop.hdop) ?? fix.hdop
        fix.vdop = value(data.dop.vdop) ?? fix.vdop
        fix.pdop = value(data.dop.pdop) ?? fix.pdop
        if data.satellites_used > 0 { fix.satellitesUsed = Int(data.satellites_used) }
        if data.satellites_visible > 0 { fix.satellitesInView = Int(data.satellites_visible) }
        pending = fix
    }

    /// The epoch in progress, now.
    mutating func flush() -> Fix? {
        defer {
            if pending != nil { flushedTime = pendingTime }
            pending = nil
            pendingTime = nil
        }
        return pending
    }
}

func formatSeconds(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
}
