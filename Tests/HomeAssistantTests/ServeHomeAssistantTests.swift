import Foundation
import KeepTrackTesting
import Testing

/// Issue 39, item 2: `keeptrack serve --homeassistant` (the built binary) against the real Home
/// Assistant: three devices uploading to the endpoint in three formats (OsmAnd, OwnTracks, Overland)
/// become three device trackers by discovery, each at its last fix; silent past `--offline-after`,
/// each becomes unavailable, and available again with its next record. The offline detector runs on
/// the endpoint's wall clock: every wait is on what Home Assistant shows (``eventually``), bounded.
extension HomeAssistantTests {
    /// A fix sent to the endpoint.
    struct Fix: Sendable {
        var latitude: Double
        var longitude: Double
        var accuracy: Double
        var time: Double

        /// Whether `state` is at this fix, within 1e-6 degrees, with its accuracy.
        func isAt(_ state: HomeAssistant.State) -> Bool {
            guard let lat = state.number("latitude"), let lon = state.number("longitude") else { return false }
            return abs(lat - latitude) <= 1e-6 && abs(lon - longitude) <= 1e-6
                && state.number("gps_accuracy") == accuracy
        }
    }

    /// Uploads of one device in one format, as its app sends them.
    struct Sender: Sendable {
        var entity: String
        var name: String
        var send: @Sendable (_ port: Int, _ fix: Fix) throws -> LoopbackHTTP.Response
    }

    static let senders: [Sender] = [
        Sender(entity: "device_tracker.serve_osmand", name: "serve-osmand") { port, fix in
            try LoopbackHTTP.request(
                "GET", port: port,
                path: "/?id=serve-osmand&lat=\(fix.latitude)&lon=\(fix.longitude)&timestamp=\(Int(fix.time))"
                    + "&accuracy=\(fix.accuracy)&batt=81")
        },
        Sender(entity: "device_tracker.serve_owntracks", name: "serve/owntracks") { port, fix in
            let body =
                "{\"_type\":\"location\",\"lat\":\(fix.latitude),\"lon\":\(fix.longitude),\"tst\":\(Int(fix.time)),"
                + "\"acc\":\(fix.accuracy),\"tid\":\"ow\",\"batt\":64}"
            return try LoopbackHTTP.request(
                "POST", port: port, path: "/owntracks",
                headers: [("Content-Type", "application/json"), ("X-Limit-U", "serve"), ("X-Limit-D", "owntracks")],
                body: Array(body.utf8))
        },
        Sender(entity: "device_tracker.serve_overland", name: "serve-overland") { port, fix in
            let time = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: fix.time))
            let body =
                "{\"locations\":[{\"type\":\"Feature\",\"geometry\":{\"type\":\"Point\",\"coordinates\":["
                + "\(fix.longitude),\(fix.latitude)]},\"properties\":{\"timestamp\":\"\(time)\","
                + "\"horizontal_accuracy\":\(fix.accuracy),\"device_id\":\"serve-overland\",\"battery_level\":0.5}}]}"
            return try LoopbackHTTP.request(
                "POST", port: port, path: "/api/v1/overland/batches", headers: [("Content-Type", "application/json")],
                body: Array(body.utf8))
        },
    ]

    @Test func serveMakesEveryDeviceATrackerWithItsAvailability() async throws {
        let ha = try await homeAssistant()
        let since = Date()
        let dir = try TemporaryDirectory("keeptrack-ha-serve")
        defer { dir.remove() }
        let server = try Tool(
            executable: URL(fileURLWithPath: keeptrackPath),
            [
                "serve", "--port", "0", "--db", dir.path + "/endpoint.sqlite", "--data-dir", dir.path,
                "--homeassistant", "mqtt://127.0.0.1:\(ha.broker.port)", "--offline-after", "8s",
            ])
        server.guardAgainstHang(seconds: 300)
        defer { server.terminate() }
        let port = try await offThePool { () throws -> Int in
            var seen: [String] = []
            let line = try #require(server.readLine(containing: "\"listening\"", seen: &seen), "\(server.errors())")
            let url = try #require(line.split(separator: "\"").first { $0.hasPrefix("http://") })
            return try #require(Int(url.split(separator: ":").last.map { $0.filter(\.isNumber) } ?? ""))
        }
        // Two fixes each, a few metres apart, a little apart from one another.
        let now = Date().timeIntervalSince1970.rounded(.down)
        var last: [String: Fix] = [:]
        for (i, sender) in Self.senders.enumerated() {
            for step in 0..<2 {
                let fix = Fix(
                    latitude: 48.1501234 + Double(i) * 0.001 + Double(step) * 0.0001,
                    longitude: 11.5601234 + Double(step) * 0.0001, accuracy: Double(5 + i + step),
                    time: now - 20 + Double(step * 10))
                let answer = try await offThePool { try sender.send(port, fix) }
                #expect(answer.status == 200, "\(sender.name): \(answer.status) \(answer.text)")
                last[sender.entity] = fix
            }
        }
        // Three trackers, each at its last fix while available (the recorder keeps it: the device
        // may be unavailable already when this looks).
        for sender in Self.senders {
            let fix = try #require(last[sender.entity])
            let state = try await eventually("\(sender.entity) at its last fix", within: 60) {
                try await ha.history(sender.entity, since: since).last {
                    $0.state != "unavailable" && fix.isAt($0)
                }
            }
            #expect(state.string("friendly_name") == sender.name)
            #expect(state.number("battery_level") != nil, "\(state)")
        }
        // Silent past --offline-after: unavailable, each.
        for sender in Self.senders {
            _ = try await eventually("\(sender.entity) unavailable once silent", within: 60) {
                try await ha.state(sender.entity).flatMap { $0.state == "unavailable" ? $0 : nil }
            }
        }
        // The next record: available again, at it; the others stay unavailable.
        let back = Self.senders[1]
        let next = Fix(latitude: 48.1531234, longitude: 11.5631234, accuracy: 4, time: Date().timeIntervalSince1970)
        let answer = try await offThePool { try back.send(port, next) }
        #expect(answer.status == 200, "\(answer.text)")
        let revived = try await eventually("\(back.entity) available at its next record", within: 60) {
            try await ha.state(back.entity).flatMap { $0.state != "unavailable" && next.isAt($0) ? $0 : nil }
        }
        #expect(revived.state == "not_home" || revived.state == "home", "\(revived)")
        for other in [Self.senders[0], Self.senders[2]] {
            #expect(try await ha.state(other.entity)?.state == "unavailable")
        }
    }
}
