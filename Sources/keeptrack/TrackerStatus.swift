import Formats
import Geo

/// A running tracker's state and metrics as lines a person reads (`keeptrack ctl status`, `keeptrack
/// status`), from the control socket's `status` answer (``Tracker/statusJSON()``) and its `metrics`
/// (Prometheus text).
enum TrackerStatus {
    /// The status reply as lines a person reads.
    static func describe(_ reply: String) -> String {
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
        lines.append(
            "background time left: "
                + (left == "null" ? "unbounded" : "\(Double(left).map { Int($0.rounded()) } ?? 0) s")
                + " (policy \(value("policy") ?? "?"))")
        let tasks = reply.split(separator: "{\"name\":").dropFirst().map { t in
            let name = t.dropFirst().prefix { $0 != "\"" }
            return String(name)
        }
        lines.append("open tasks: " + (tasks.isEmpty ? "none" : tasks.joined(separator: ", ")))
        let fix = value("lastFixAge") ?? "null"
        lines.append("last fix: " + (fix == "null" ? "none yet" : "\(fix) s ago"))
        lines.append("location updates: " + (value("locationUpdates") == "true" ? "on" : "off"))
        // Said only while it lasts: the input lost (a receiver unplugged, gpsd gone).
        if let lost = value("inputLost"), lost != "null" { lines.append("input lost: " + lost) }
        return lines.joined(separator: "\n")
    }

    /// `name{labels}` → value, from Prometheus text.
    static func parse(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else {
                continue
            }
            out[String(line[..<space])] = v
        }
        return out
    }

    /// One series of Prometheus text: its name, its labels and its value.
    struct Series: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Every series of Prometheus text, labels unescaped (`\\`, `\"`, `\n`).
    static func series(_ text: String) -> [Series] {
        parse(text).compactMap { key, value in
            guard let open = key.firstIndex(of: "{") else { return Series(name: key, labels: [:], value: value) }
            var labels: [String: String] = [:]
            var rest = key[key.index(after: open)...]
            while let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].hasPrefix("\"") {
                let label = rest[..<equals].drop { $0 == "," }
                var text = ""
                var i = rest.index(equals, offsetBy: 2)
                while i < rest.endIndex && rest[i] != "\"" {
                    if rest[i] == "\\", rest.index(after: i) < rest.endIndex {
                        i = rest.index(after: i)
                        text.append(rest[i] == "n" ? "\n" : rest[i])
                    } else {
                        text.append(rest[i])
                    }
                    i = rest.index(after: i)
                }
                guard i < rest.endIndex else { return nil }
                labels[String(label)] = text
                rest = rest[rest.index(after: i)...]
            }
            return Series(name: String(key[..<open]), labels: labels, value: value)
        }
    }

    /// The uploads' figures: one line, or with several targets (whose counters carry a `target`
    /// label) one line per target, by name.
    static func uploadLines(_ metrics: String) -> [String] {
        let all = series(metrics).filter {
            $0.name.hasPrefix("keeptrack_upload_") || $0.name == "keeptrack_last_upload_timestamp_seconds"
        }
        func value(_ name: String, _ labels: [String: String]) -> Double? {
            all.first { $0.name == name && $0.labels == labels }?.value
        }
        func line(_ start: String, _ target: [String: String]) -> String {
            func n(_ name: String, _ result: String) -> Int {
                Int(value(name, target.merging(["result": result]) { a, _ in a }) ?? 0)
            }
            // The gauge is 0 until a first success.
            let last = value("keeptrack_last_upload_timestamp_seconds", target).flatMap {
                $0 > 0 ? Int(WallClock.seconds() - $0) : nil
            }
            // Every request made, those that failed with them (as the run's summary says them).
            let failed = n("keeptrack_upload_requests_total", "retried")
            return start + "\(counted(n("keeptrack_upload_records_total", "ok"), "record")) in "
                + "\(counted(n("keeptrack_upload_requests_total", "ok") + failed, "request")), "
                + "\(grouped(failed)) failed, "
                + "\(counted(n("keeptrack_upload_records_total", "dead_letter"), "dead letter")); last success "
                + (last.map { "\($0) s ago" } ?? "never")
        }
        let targets = Set(all.compactMap { $0.labels["target"] }).sorted()
        if targets.isEmpty { return [line("uploads: ", [:])] }
        return targets.map { line("uploads to \($0): ", ["target": $0]) }
    }

    static func summary(status: String, metrics: String) -> String {
        let m = parse(metrics)
        func n(_ key: String) -> Int { Int(m[key] ?? 0) }
        let human = describe(status)
        var lines = human.split(separator: "\n").map(String.init)
        let filtered = m.filter { $0.key.hasPrefix("keeptrack_fixes_filtered_total{") }
            .map { (String($0.key.split(separator: "\"")[1]), Int($0.value)) }.sorted { $0.0 < $1.0 }
        lines.append(
            "fixes: \(grouped(n("keeptrack_fixes_total"))) received, "
                + "\(grouped(n("keeptrack_locations_delivered_total"))) delivered as locations, "
                + "\(grouped(filtered.reduce(0) { $0 + $1.1 })) filtered"
                + (filtered.isEmpty
                    ? "" : " (" + filtered.map { "\($0.0) \(grouped($0.1))" }.joined(separator: ", ") + ")"))
        lines.append(
            "regions: \(n("keeptrack_region_events_total{event=\"enter\"}")) enter, "
                + "\(n("keeptrack_region_events_total{event=\"exit\"}")) exit, "
                + "\(n("keeptrack_region_events_total{event=\"dwell\"}")) dwell; significant changes: "
                + "\(n("keeptrack_significant_changes_total"))")
        if m["keeptrack_outbox_records"] != nil {
            lines.append(
                "outbox: \(grouped(n("keeptrack_outbox_records"))) records waiting, oldest "
                    + "\(n("keeptrack_outbox_oldest_age_seconds")) s; \(grouped(n("keeptrack_outbox_evicted_total"))) evicted"
            )
            lines += uploadLines(metrics)
        } else {
            lines.append("uploads: off (no --upload)")
        }
        return lines.joined(separator: "\n")
    }
}
