// visits-bench: the visit detector's cost per location, beside the cost of decoding the log.
//
//   visits-bench [--fixture fixtures/visits-night.nmea.gz] [--passes 20] [--positions-only] [--outliers]
//
// --positions-only leaves the fixes' speeds out (a phone that sends none: every fix is smoothed);
// --outliers feeds the detector through its outlier filter (`add`, what the device and the endpoint
// do) instead of `process`.
//
// Decodes the fixture once (timed: ns per fix, for scale), then runs its locations through a
// VisitDetector: an untimed pass records the decisions, and the timed passes replay the same
// locations later each time (a day apart, so that each pass starts afresh after the maximum gap).
// It checks its own output before printing a figure: every pass must decide the same visits and trips
// as the first, and on the default fixture those are its truth's (4 arrivals, 3 departures, 3 trips).
// Run under tools/bench.py's malloc-counting preload library
// (`LD_PRELOAD=malloc-count.so visits-bench`), it also prints the allocations of the timed passes.

import BenchSupport
import GPSInput
import Geo
import LocationService
import NMEA

#if canImport(Glibc)
    import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ fallback: String) -> String {
    if let i = arguments.firstIndex(of: name), i + 1 < arguments.count { return arguments[i + 1] }
    return fallback
}
let defaultFixture = "fixtures/visits-night.nmea.gz"
let path = option("--fixture", defaultFixture)
let passes = Int(option("--passes", "20")) ?? 20
let positionsOnly = arguments.contains("--positions-only")
let throughOutliers = arguments.contains("--outliers")

var samples: [VisitDetector.Sample] = []
var decodeSeconds = Double.infinity
for _ in 0..<3 {
    var decoder = NMEADecoder()
    var decoded: [VisitDetector.Sample] = []
    decoded.reserveCapacity(samples.count)
    let t0 = now()
    do {
        try decoder.decodeFile(path) { fix in
            if let l = Location(fix) {
                var sample = VisitDetector.Sample(l)
                if positionsOnly { sample.speed = -1 }
                decoded.append(sample)
            }
        }
    } catch {
        print("visits-bench: \(error)")
        exit(2)
    }
    decodeSeconds = min(decodeSeconds, now() - t0)
    samples = decoded
}
guard !samples.isEmpty else {
    print("visits-bench: no locations in \(path)")
    exit(2)
}

/// The decisions of one pass, as (kind, times) with the pass's shift taken off.
func summary(_ decisions: [VisitDetector.Decision], shift: Double) -> [String] {
    decisions.map {
        switch $0 {
        case .arrival(let v): "arrival \(v.arrival - shift)"
        case .departure(let v): "departure \(v.arrival - shift) \(v.departure! - shift)"
        case .trip(let t): "trip \(t.start - shift) \(t.end - shift) \(Int(t.distance))"
        }
    }
}

/// One fix through the detector, as the options say.
@inline(__always)
func feed(_ detector: inout VisitDetector, _ s: VisitDetector.Sample, _ decided: (VisitDetector.Decision) -> Void) {
    if throughOutliers {
        detector.add(s) { for d in $0 { decided(d) } }
    } else {
        for d in detector.process(s) { decided(d) }
    }
}

var detector = VisitDetector()
var recorded: [VisitDetector.Decision] = []
for s in samples { feed(&detector, s) { recorded.append($0) } }
let reference = summary(recorded, shift: 0)
let count = (
    reference.filter { $0.hasPrefix("arrival") }.count, reference.filter { $0.hasPrefix("departure") }.count,
    reference.filter { $0.hasPrefix("trip") }.count
)
if path == defaultFixture && (count.0 != 4 || count.1 != 3 || count.2 != 3) {
    print("visits-bench: \(count.0) arrivals, \(count.1) departures, \(count.2) trips; the truth has 4, 3, 3")
    exit(1)
}

/// The timed part: every pass through the same detector, a day later each time; decisions counted
/// (kept in a preallocated buffer for the check).
@inline(never)
func timedPasses(
    _ detector: inout VisitDetector, _ samples: [VisitDetector.Sample], passes: Int,
    into kept: inout [(Int, VisitDetector.Decision)]
) {
    for pass in 1...passes {
        let shift = Double(pass) * 86_400 * 2
        for var s in samples {
            s.time += shift
            feed(&detector, s) { kept.append((pass, $0)) }
        }
    }
}

var best = Double.infinity
var allocations: UInt64?
for _ in 0..<3 {
    var timed = detector
    var kept: [(Int, VisitDetector.Decision)] = []
    kept.reserveCapacity((recorded.count + 2) * passes)
    let before = mallocCount?()
    let t0 = now()
    timedPasses(&timed, samples, passes: passes, into: &kept)
    let elapsed = now() - t0
    if let before, let after = mallocCount?() { allocations = after - before }
    for pass in 1...passes {
        let shift = Double(pass) * 86_400 * 2
        // A pass after the first starts with the last one's open visit, ended by the day's gap.
        var got = summary(kept.filter { $0.0 == pass }.map(\.1), shift: shift)
        if got.first?.hasPrefix("departure") == true { got.removeFirst() }
        guard got == reference else {
            print("visits-bench: pass \(pass) decided otherwise than the first; not reporting")
            exit(1)
        }
    }
    best = min(best, elapsed)
}

let locations = samples.count * passes
print("visit detector over every location of the log: \(samples.count), \(passes) passes, best of 3 runs")
print(
    "log: \(path)" + (positionsOnly ? ", positions only" : "")
        + (throughOutliers ? ", through the outlier filter (add)" : ""))
print("decisions per pass: \(count.0) arrivals, \(count.1) departures, \(count.2) trips (checked in every pass)")
let detectorSeconds = best / Double(locations)
let decodeSecondsPerFix = decodeSeconds / Double(samples.count)
print("detector: \(Int((detectorSeconds * 1e9).rounded())) ns per location")
print(
    "decoding the log: \(Int((decodeSecondsPerFix * 1e9).rounded())) ns per fix "
        + "(the detector adds \(Int((detectorSeconds / decodeSecondsPerFix * 100).rounded())) %)")
if let allocations {
    print("allocations in the timed passes: \(allocations) (\(Double(allocations) / Double(locations)) per location)")
}
