import Foundation
import Synchronization
import Geo
import NMEA

@testable import GPSInput
import KeepTrackTesting

/// Reads elements until `stop` says enough; returns them. `seconds` is a give-up against a hang,
/// not a speed limit: generous, because on a loaded 2-core machine the suite's blocking tests can
/// hold both of the cooperative pool's threads for a minute (seen: trivial decoder tests waiting
/// 60 s to start while three other builds ran).
func collect<S: FixSource>(
    _ source: S, seconds: Double = 180, what: String,
    until stop: @escaping @Sendable ([SourceElement]) -> Bool
) async throws -> [SourceElement] {
    let progress = Mutex<[SourceElement]>([])
    do {
        return try await withTimeout(seconds, what) {
            var seen: [SourceElement] = []
            for await element in source {
                seen.append(element)
                progress.withLock { $0.append(element) }
                if stop(seen) { break }
            }
            return seen
        }
    } catch let error as TimedOut {
        // Say what did arrive: events (connected? errors?) and how many fixes.
        let seen = progress.withLock { $0 }
        throw TimedOut(
            what: error.what
                + " (seen: \(seen.fixes.count) fixes, events \(seen.events.map { "\($0.kind): \($0.message)" }))")
    }
}

/// The decoder's fixes for a fixture, the reference every source must match.
func decoderFixes(_ name: String) throws -> [Fix] {
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    try decoder.decodeFile(fixturePath(name)) { fixes.append($0) }
    return fixes
}

/// Matches fixes by UTC time of day (gpsd may shift dates of old logs).
func timeOfDay(_ fix: Fix) -> Int64? { fix.time?.nanosecondOfDay }

extension Array where Element == SourceElement {
    var fixes: [Fix] { compactMap(\.fix) }
    var events: [SourceEvent] { compactMap(\.event) }
}

/// `bytes` compressed by gzip(1).
func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    let input = try temporaryFile(bytes, name: "plain")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/gzip")
    process.arguments = ["-c", "-n", input]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Array(data)
}

/// Writes `bytes` to a new file in a private temporary directory; returns its path.
func temporaryFile(_ bytes: [UInt8], name: String) throws -> String {
    let dir = try TemporaryDirectory("keeptrack-input").url
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}

/// Descriptors of this process open on `path` (after resolving symlinks): whether a source still
/// holds its device.
func descriptors(openOn path: String) -> Int {
    let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == target }
        .count
}

/// TCP connections of this process to `port` on the loopback: whether a source still holds its
/// connection. (Sockets in /proc/net/tcp{,6} with that remote port, matched by inode to this
/// process's descriptors.)
func connections(toPort port: String) -> Int {
    guard let wanted = Int(port) else { return 0 }
    var inodes: Set<String> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = procText(table)
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, let colon = fields[2].lastIndex(of: ":"),
                Int(fields[2][fields[2].index(after: colon)...], radix: 16) == wanted
            else { continue }
            inodes.insert(String(fields[9]))
        }
    }
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.filter { fd in
        guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
            link.hasPrefix("socket:[")
        else { return false }
        return inodes.contains(String(link.dropFirst(8).dropLast()))
    }.count
}

/// Consumes `source` in a task, signalling each fix; returns the task and the signals.
func consumeInTheBackground<S: FixSource>(_ source: S) -> (Task<Int, Never>, AsyncStream<Void>) {
    let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
    let task = Task {
        var fixes = 0
        for await element in source where element.fix != nil {
            fixes += 1
            arrived.yield()
        }
        arrived.finish()
        return fixes
    }
    return (task, arrivals)
}

/// Runs a blocking call (a child process's first line, gpsfake's start) on a thread of its own:
/// blocking a thread of the cooperative pool (two on two cores) stalls every other test's tasks,
/// the hang guards' timers included.

/// What `connections(toPort:)` looked at, for a failure message.
func connectionReport(_ port: String) -> String {
    let hex = String(Int(port)!, radix: 16, uppercase: true)
    let tcp = procText("/proc/net/tcp") + procText("/proc/net/tcp6")
    let lines = tcp.split(separator: "\n").filter { $0.contains(":" + hex + " ") }
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    let links = fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
        .filter { $0.hasPrefix("socket") }
    return "tcp: \(lines) sockets: \(links)"
}

/// A /proc file read to its end (they report a size of 0).
func procText(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
}
