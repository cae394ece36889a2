import ArgumentParser
import GPSInput
import Lifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The write end of the control thread's wake-up pipe, for the signal handler.
nonisolated(unsafe) private var signalPipe: Int32 = -1

/// The running tracker's control thread: answers `keeptrack ctl` on a Unix socket, turns SIGUSR1
/// (background) and SIGUSR2 (foreground) into lifecycle inputs, and processes the lifecycle's
/// deadlines and the suspended sampling between fixes. It sleeps in `poll` until a request, a
/// signal or the next deadline: no polling loop.
///
/// Protocol: one line per connection (`status`, `foreground` or `background`), answered with one
/// line of JSON (the status after the change), or `metrics`, answered with Prometheus text; then
/// the connection closes.
final class ControlServer: Sendable {
    let path: String
    let runtime: LifecycleRuntime
    let listener: Int32
    let wakePipe = WakePipe()
    let stopped = Atomic<Bool>(false)

    init(path: String, runtime: LifecycleRuntime) throws {
        self.path = path
        self.runtime = runtime
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !parent.isEmpty { mkdir(parent, 0o700) }
        guard var address = unixAddress(path) else {
            throw ValidationError("--control path is too long for a Unix socket: \(path)")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ValidationError("cannot create the control socket: \(String(cString: strerror(errno)))") }
        // A socket file left by a tracker that died: nobody answers on it, so it can go.
        if ControlClient.connect(path) == nil { unlink(path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ValidationError("cannot listen on the control socket \(path): \(reason)"
                + (errno == EADDRINUSE ? " (is another tracker running? keeptrack ctl status --control \(path))" : ""))
        }
        chmod(path, 0o600)
        listener = fd
    }

    func start() {
        signalPipe = wakePipe.writeFD
        signal(SIGUSR1) { _ in
            var b = UInt8(ascii: "1")
            _ = write(signalPipe, &b, 1)
        }
        signal(SIGUSR2) { _ in
            var b = UInt8(ascii: "2")
            _ = write(signalPipe, &b, 1)
        }
        startThread(name: "keeptrack.control") { [self] in run() }
    }

    /// Makes the thread look at the deadlines again.
    func poke() { wakePipe.wake(UInt8(ascii: "p")) }

    func stop() {
        stopped.store(true, ordering: .releasing)
        poke()
        unlink(path)
    }

    private func run() {
        let app = runtime.app
        while !stopped.load(ordering: .acquiring) {
            let now = app.now
            var next = app.nextDeadline ?? .infinity
            if let sample = runtime.sampleIfDue(at: now) { next = min(next, sample) }
            let timeout: Int32 = next.isFinite ? Int32(min(max(0, (next - now) * 1000).rounded(.up), 3_600_000)) : -1
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakePipe.readFD, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, timeout)
            if n < 0 && errno != EINTR { break }
            if stopped.load(ordering: .acquiring) { break }
            if fds[1].revents & Int16(POLLIN) != 0 {
                for b in wakePipe.drain() {
                    if b == UInt8(ascii: "1") { app.enterBackground() }
                    if b == UInt8(ascii: "2") { app.enterForeground() }
                }
            }
            if fds[0].revents & Int16(POLLIN) != 0 { serveOne() }
            app.advance()
        }
        close(listener)
    }

    private func serveOne() {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        defer { close(client) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while !request.contains(UInt8(ascii: "\n")) && request.count < 1024 {
            let n = read(client, &buffer, buffer.count)
            if n <= 0 { break }
            request += buffer[0..<n]
        }
        let command = String(decoding: request.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            .trimmingCharacters(in: [" ", "\r", "\t"])
        let app = runtime.app
        var reply: String
        switch command {
        case "status": reply = runtime.statusJSON(now: app.now)
        case "background":
            app.enterBackground()
            reply = runtime.statusJSON(now: app.now)
        case "foreground":
            app.enterForeground()
            reply = runtime.statusJSON(now: app.now)
        case "metrics":
            runtime.refreshGauges?()
            reply = prometheusText()
        default:
            var out = OutputBuffer()
            out.append("{\"error\":")
            out.appendJSONString("unknown command '\(command)': use status, metrics, foreground or background")
            out.append("}")
            reply = String(decoding: out.bytes, as: UTF8.self)
        }
        reply += "\n"
        let bytes = Array(reply.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { send(client, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            done += n
        }
    }
}

extension String {
    func trimmingCharacters(in set: Set<Character>) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

/// The address of the Unix socket at `path`, or `nil` when the path is too long for one.
func unixAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    return address
}

/// The client side of the control socket.
enum ControlClient {
    /// The default control socket: `$XDG_RUNTIME_DIR/keeptrack/control.sock`, or
    /// `/tmp/keeptrack-UID/control.sock` without a runtime directory.
    static var defaultPath: String {
        if let dir = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !dir.isEmpty {
            return dir + "/keeptrack/control.sock"
        }
        return "/tmp/keeptrack-\(getuid())/control.sock"
    }

    /// A connected socket, or `nil` with errno set.
    static func connect(_ path: String) -> Int32? {
        guard var address = unixAddress(path) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if r != 0 {
            let e = errno
            close(fd)
            errno = e
            return nil
        }
        return fd
    }

    /// Sends `command` and returns the one-line reply.
    static func send(_ command: String, to path: String) throws -> String {
        guard let fd = connect(path) else {
            throw ValidationError("no tracker answers at \(path) (\(String(cString: strerror(errno)))). "
                + "Start one with `keeptrack track ...`, or name its socket with --control.")
        }
        defer { close(fd) }
        let bytes = Array((command + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            reply += buffer[0..<n]
        }
        return String(decoding: reply, as: UTF8.self)
    }
}

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running tracker: move it between foreground and background, or ask its state.",
        discussion: """
            Talks to `keeptrack track` over its control socket (--control; the default is \
            $XDG_RUNTIME_DIR/keeptrack/control.sock, or /tmp/keeptrack-UID/control.sock). Without the \
            socket, signals do the same: SIGUSR1 moves the tracker to the background, SIGUSR2 to the \
            foreground (kill -USR1 PID).

            Examples:
              keeptrack ctl status
              keeptrack ctl background      # the budget starts counting (README, "The background budget")
              keeptrack ctl foreground
              keeptrack ctl status --json
            """
    )

    @Argument(help: "status, foreground or background.")
    var command: String


    @Option(help: ArgumentHelp("The tracker's control socket.", valueName: "path"))
    var control: String?

    @Flag(help: "Print the status as JSON.")
    var json = false

    func validate() throws {
        if !["status", "foreground", "background"].contains(command) {
            throw ValidationError("Unknown command '\(command)': use status, foreground or background.")
        }
    }

    func run() throws {
        let reply = try ControlClient.send(command, to: control ?? ControlClient.defaultPath)
        if json || reply.contains("\"error\"") {
            print(reply, terminator: reply.hasSuffix("\n") ? "" : "\n")
            return
        }
        print(Ctl.humanStatus(reply))
    }

    /// The status reply as lines a person reads.
    static func humanStatus(_ reply: String) -> String {
        func value(_ key: String) -> String? {
            guard let r = reply.firstRange(of: "\"\(key)\":") else { return nil }
            var rest = reply[r.upperBound...]
            if rest.hasPrefix("\"") {
                rest = rest.dropFirst()
                return String(rest.prefix { $0 != "\"" })
            }
            return String(rest.prefix { $0 != "," && $0 != "}" })
        }
        var lines = ["state: \(value("state") ?? "?")"]
        let left = value("backgroundTimeRemaining") ?? "null"
        lines.append("background time left: " + (left == "null" ? "unbounded" : "\(Double(left).map { Int($0.rounded()) } ?? 0) s")
            + " (policy \(value("policy") ?? "?"))")
        let tasks = reply.split(separator: "{\"name\":").dropFirst().map { t in
            let name = t.dropFirst().prefix { $0 != "\"" }
            return String(name)
        }
        lines.append("open tasks: " + (tasks.isEmpty ? "none" : tasks.joined(separator: ", ")))
        let fix = value("lastFixAge") ?? "null"
        lines.append("last fix: " + (fix == "null" ? "none yet" : "\(fix) s ago"))
        lines.append("location updates: " + (value("locationUpdates") == "true" ? "on" : "off"))
        return lines.joined(separator: "\n")
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a running tracker is doing: its state, fixes, regions, outbox and uploads.",
        discussion: """
            Reads the state and the metrics of `keeptrack track` over its control socket (--control; \
            the default is $XDG_RUNTIME_DIR/keeptrack/control.sock). --prometheus prints the metrics \
            as Prometheus text, for a scraper (e.g. node_exporter's textfile collector).

            Examples:
              keeptrack status
              keeptrack status --prometheus > /var/lib/node_exporter/keeptrack.prom
            """
    )

    @Option(help: ArgumentHelp("The tracker's control socket.", valueName: "path"))
    var control: String?

    @Flag(help: "Print the metrics in Prometheus text format.")
    var prometheus = false

    func run() throws {
        let path = control ?? ControlClient.defaultPath
        let metrics = try ControlClient.send("metrics", to: path)
        if prometheus {
            print(metrics, terminator: "")
            return
        }
        let status = try ControlClient.send("status", to: path)
        print(Status.summary(status: status, metrics: metrics))
    }

    /// `name{labels}` → value, from Prometheus text.
    static func parse(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
            out[String(line[..<space])] = v
        }
        return out
    }

    static func summary(status: String, metrics: String) -> String {
        let m = parse(metrics)
        func n(_ key: String) -> Int { Int(m[key] ?? 0) }
        let human = Ctl.humanStatus(status)
        var lines = human.split(separator: "\n").map(String.init)
        let filtered = m.filter { $0.key.hasPrefix("keeptrack_fixes_filtered_total{") }
            .map { (String($0.key.split(separator: "\"")[1]), Int($0.value)) }.sorted { $0.0 < $1.0 }
        lines.append("fixes: \(grouped(n("keeptrack_fixes_total"))) received, "
            + "\(grouped(n("keeptrack_locations_delivered_total"))) delivered as locations, "
            + "\(grouped(filtered.reduce(0) { $0 + $1.1 })) filtered"
            + (filtered.isEmpty ? "" : " (" + filtered.map { "\($0.0) \(grouped($0.1))" }.joined(separator: ", ") + ")"))
        lines.append("regions: \(n("keeptrack_region_events_total{event=\"enter\"}")) enter, "
            + "\(n("keeptrack_region_events_total{event=\"exit\"}")) exit, "
            + "\(n("keeptrack_region_events_total{event=\"dwell\"}")) dwell; significant changes: "
            + "\(n("keeptrack_significant_changes_total"))")
        if m["keeptrack_outbox_records"] != nil {
            lines.append("outbox: \(grouped(n("keeptrack_outbox_records"))) records waiting, oldest "
                + "\(n("keeptrack_outbox_oldest_age_seconds")) s; \(grouped(n("keeptrack_outbox_evicted_total"))) evicted")
            let last = m["keeptrack_last_upload_timestamp_seconds"].map { Int(wallClockSeconds() - $0) }
            lines.append("uploads: \(grouped(n("keeptrack_upload_records_total{result=\"ok\"}"))) records in "
                + "\(grouped(n("keeptrack_upload_requests_total{result=\"ok\"}"))) requests, "
                + "\(grouped(n("keeptrack_upload_requests_total{result=\"retried\"}"))) retried, "
                + "\(grouped(n("keeptrack_upload_records_total{result=\"dead_letter\"}"))) dead letters; last success "
                + (last.map { "\($0) s ago" } ?? "never"))
        } else {
            lines.append("uploads: off (no --upload)")
        }
        return lines.joined(separator: "\n")
    }
}
