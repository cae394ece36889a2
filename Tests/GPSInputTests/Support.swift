import Foundation
import Geo
import NMEA

@testable import GPSInput

let packageRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
    }
    fatalError("Package.swift not found above \(#filePath)")
}()

func fixturePath(_ name: String) -> String { packageRoot.appendingPathComponent("fixtures/\(name)").path }

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing with ``TimedOut`` after `seconds` (a guard against hangs, not a synchronisation).
func withTimeout<T: Sendable>(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut(what: what)
        }
        let result = try await group.next()!
        group.cancelAll()
        return result
    }
}

/// Reads elements until `stop` says enough; returns them.
func collect<S: FixSource>(_ source: S, seconds: Double = 30, what: String,
                           until stop: @escaping @Sendable ([SourceElement]) -> Bool) async throws -> [SourceElement] {
    try await withTimeout(seconds, what) {
        var seen: [SourceElement] = []
        for await element in source {
            seen.append(element)
            if stop(seen) { break }
        }
        return seen
    }
}

/// The decoder's fixes for a fixture, the reference every source must match.
func decoderFixes(_ name: String) throws -> [Fix] {
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    try decoder.decodeFile(fixturePath(name)) { fixes.append($0) }
    return fixes
}

/// Runs a tool and returns its first line of output (the tools print what they started).
final class Tool: @unchecked Sendable {
    let process = Process()
    private let out = Pipe()
    private var buffer = Data()

    init(_ path: String, _ arguments: [String]) throws {
        process.executableURL = packageRoot.appendingPathComponent(path)
        process.arguments = arguments
        process.currentDirectoryURL = packageRoot
        process.standardOutput = out
        // Not the test's own stderr: a straggler must not keep the test runner's pipes open.
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// The next line the tool prints (blocking read on the pipe).
    func readLine() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...nl)
                return line
            }
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// Reads until the tool's output closes (the tool and everything holding its stdout ended).
    func drain() {
        while readLine() != nil {}
    }

    /// SIGTERM, then SIGKILL if the tool is still there after a second.
    func terminate() {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        for _ in 0..<100 where process.isRunning { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
    }
}

/// A real gpsd under gpsfake on a free loopback port (tools/gpsfake-run).
struct GPSFake {
    let port: String
    let pid: String
    let dir: String

    static func start(_ log: String, port: String? = nil) throws -> GPSFake {
        var args = ["start", fixturePath(log), "0.05"]
        if let port { args.append(port) }
        let tool = try Tool("tools/gpsfake-run", args)
        // The script prints its line and exits; its end of output is the end of the script.
        // (Foundation's waitUntilExit can hang inside Swift concurrency on Linux: read to EOF.)
        guard let line = tool.readLine() else { throw TimedOut(what: "gpsfake-run start") }
        tool.drain()
        let parts = line.split(separator: " ").map(String.init)
        guard parts.count == 3 else { throw TimedOut(what: "gpsfake-run output, got '\(line)'") }
        return GPSFake(port: parts[0], pid: parts[1], dir: parts[2])
    }

    func stop() throws {
        let tool = try Tool("tools/gpsfake-run", ["stop", pid, dir])
        tool.drain()
    }
}

/// Matches fixes by UTC time of day (gpsd may shift dates of old logs).
func timeOfDay(_ fix: Fix) -> Int64? { fix.time?.nanosecondOfDay }

extension Array where Element == SourceElement {
    var fixes: [Fix] { compactMap(\.fix) }
    var events: [SourceEvent] { compactMap(\.event) }
}
