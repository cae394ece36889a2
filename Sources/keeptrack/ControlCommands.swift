import ArgumentParser
import Formats
import SystemIO
import Tracking
#if canImport(Glibc)
#endif

/// Sends `command` to the tracker's control socket and returns its answer.
func controlRequest(_ command: String, at path: String) throws -> String {
    do {
        return try LineClient.request(command, at: path)
    } catch {
        throw ValidationError("no tracker answers at \(path) (\(error)). "
            + "Start one with `keeptrack track ...`, or name its socket with --control.")
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
        let reply = try controlRequest(command, at: control ?? ControlSocket.defaultPath)
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
        let path = control ?? ControlSocket.defaultPath
        let metrics = try controlRequest("metrics", at: path)
        if prometheus {
            print(metrics, terminator: "")
            return
        }
        let status = try controlRequest("status", at: path)
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
