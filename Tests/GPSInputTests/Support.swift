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
