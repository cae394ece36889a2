import Foundation
import Geo
import NMEA

@testable import GPSInput
import KeepTrackTesting

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
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keeptrack-input-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}
