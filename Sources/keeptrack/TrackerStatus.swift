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
            let last = m["keeptrack_last_upload_timestamp_seconds"].map { Int(WallClock.seconds() - $0) }
            lines.append(
                "uploads: \(grouped(n("keeptrack_upload_records_total{result=\"ok\"}"))) records in "
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
