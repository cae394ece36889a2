import Foundation
import Formats
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// The endpoint's Home Assistant relay (`serve --homeassistant`, issue 39 item 2) on a real mosquitto,
/// watched by `mosquitto_sub`: its cursors kept in the store (both stores), and a restart that
/// resumes after the last position published, sending none again. What Home Assistant makes of the
/// messages is checked against a real one in HomeAssistantTests.
@Suite("Home Assistant relay", .offThePool)
struct HomeAssistantRelayTests {
    @Test(arguments: StoreKind.allCases) func theStoreKeepsEachTargetsCursorsApart(kind: StoreKind) async throws {
        let endpoint = try await Endpoint.start(store: kind)
        defer { Task { await endpoint.stop() } }
        let store = endpoint.server.store
        #expect(try await store.homeAssistantCursors(target: "a:1883/homeassistant").isEmpty)
        try await store.setHomeAssistantCursors(
            ["van 1": 1_715_679_000.123456, "ünï/phone": 12.5], target: "a:1883/homeassistant")
        try await store.setHomeAssistantCursors(["van 1": 7], target: "b:1883/homeassistant")
        try await store.setHomeAssistantCursors(["van 1": 1_715_679_001.5], target: "a:1883/homeassistant")
        #expect(
            try await store.homeAssistantCursors(target: "a:1883/homeassistant")
                == ["van 1": 1_715_679_001.5, "ünï/phone": 12.5])
        #expect(try await store.homeAssistantCursors(target: "b:1883/homeassistant") == ["van 1": 7])
    }

    @Test func aRestartResumesAfterTheLastPositionPublished() async throws {
        let broker = try Broker()
        defer { broker.stop() }
        // A retained probe: once the watcher prints it, it is subscribed.
        let probe = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-p", "\(broker.port)", "-h", "127.0.0.1", "-r", "-q", "1", "-t", "keeptrack/probe", "-m", "here"])
        try await probe.remainingLines().forEach { _ in }
        // Line-buffered (stdbuf): mosquitto_sub's output to a pipe is otherwise held back in 4 KiB blocks.
        let watcher = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/stdbuf"),
            [
                "-oL", "/usr/bin/mosquitto_sub", "-p", "\(broker.port)", "-h", "127.0.0.1", "-v", "-t", "keeptrack/#",
                "-t", "homeassistant/#",
            ])
        watcher.guardAgainstHang(seconds: 90)
        defer { watcher.terminate() }
        _ = try await lines(of: watcher, until: 1, on: "keeptrack/probe here")
        let configure: (inout TrackServer.Configuration) -> Void = { c in
            c.homeAssistant = .init(url: "mqtt://127.0.0.1:\(broker.port)")
        }
        let first = try await Endpoint.start(token: nil, configure: configure)
        let start = 1_715_679_000.0
        _ = try await first.server.store.insert(
            (0..<3).map { fix("van 1", start + Double($0)) }, format: "json", received: Date().timeIntervalSince1970)
        // The tracker announced (retained, before any position), then the three positions in order.
        let announced = try await lines(of: watcher, until: 3, on: "keeptrack/van_1/attributes")
        let config = try #require(announced.firstIndex { $0.hasPrefix("homeassistant/device_tracker/van_1/config ") })
        let firstPosition = try #require(announced.firstIndex { $0.hasPrefix("keeptrack/van_1/attributes ") })
        #expect(config < firstPosition)
        #expect(announced.contains("keeptrack/_serve/availability online"))
        #expect(announced.contains("keeptrack/van_1/availability online"))
        #expect(
            times(announced) == ["2024-05-14T09:30:00.000Z", "2024-05-14T09:30:01.000Z", "2024-05-14T09:30:02.000Z"])
        await first.stop(keepingFiles: true)
        // Stopped: the relay said so.
        _ = try await lines(of: watcher, until: 1, on: "keeptrack/_serve/availability offline")
        // Two more stored while it is away, then a restart on the same database.
        let store = try SQLiteTrackStore(path: first.database)
        _ = try await store.insert(
            (3..<5).map { fix("van 1", start + Double($0)) }, format: "json", received: Date().timeIntervalSince1970)
        await store.close()
        let second = try await Endpoint.start(database: first.database, token: nil, configure: configure)
        defer { Task { await second.stop() } }
        // Only the two new positions (the first three would come before them: positions go in order).
        let resumed = try await lines(of: watcher, until: 2, on: "keeptrack/van_1/attributes")
        #expect(times(resumed) == ["2024-05-14T09:30:03.000Z", "2024-05-14T09:30:04.000Z"])
        // Noted in the store once the broker acknowledged it (the watcher may see it first).
        let store2 = second.server.store
        let target = "127.0.0.1:\(broker.port)/homeassistant"
        _ = try await eventually("the cursor at the last position", within: 30) {
            try await store2.homeAssistantCursors(target: target) == ["van 1": start + 4] ? true : nil
        }
    }

    func fix(_ device: String, _ time: Double) -> TrailRecord {
        var r = TrailRecord(
            device: device, sequence: Int64(time - 1_715_679_000) + 1, time: time, latitude: 48.1, longitude: 11.5)
        r.horizontalAccuracy = 5
        return r
    }

    /// The `mosquitto_sub -v` lines read until `n` of them start with `prefix` (off the pool).
    func lines(of watcher: Tool, until n: Int, on prefix: String) async throws -> [String] {
        try await offThePool {
            var out: [String] = []
            while out.filter({ $0.hasPrefix(prefix) }).count < n {
                guard let line = watcher.readLine() else {
                    throw TimedOut(what: "\(n) messages on \(prefix); got \(out.map { $0.prefix(60) })")
                }
                out.append(line)
            }
            return out
        }
    }

    /// The attributes' times, in the order the lines came.
    func times(_ lines: [String]) -> [String] {
        lines.filter { $0.hasPrefix("keeptrack/van_1/attributes ") }.compactMap { line in
            line.range(of: "\"time\":\"").map { String(line[$0.upperBound...].prefix(24)) }
        }
    }
}
