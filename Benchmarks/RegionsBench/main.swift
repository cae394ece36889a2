// regions-bench: the cost of region monitoring per location as the number of regions grows.
//
//   regions-bench [--fixture fixtures/walk-15min.nmea] [--day fixtures/day-24h.nmea.gz]
//
// Builds monitors of 10, 10,000 and 1,000,000 circular regions (a dense city cluster of up to
// 1,000 within 10 km of the fixture's start, the rest scattered worldwide), replays the fixture's locations through
// each (the same locations, timed), and reports nanoseconds per location, resident bytes per region
// (resident memory before and after adding them) and, on the 24-hour fixture with 10,000 regions,
// the location service's events per second. It checks its own output first: every monitor must
// report the same events for the regions they share (the 10 regions are in all of them).

import BenchSupport
import GPSInput
import Geo
import LocationService
import NMEA

#if canImport(Glibc)
import Glibc
#endif

/// Resident memory in bytes (/proc/self/statm), for memory per region.
func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    let fields = String(decoding: buffer[0..<max(0, n)], as: UTF8.self).split(separator: " ")
    return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

nonisolated(unsafe) var seed: UInt64 = 2024
func random() -> Double {
    seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    return Double(seed >> 11) / Double(1 << 53)
}

func locations(_ path: String) -> [Location] {
    var decoder = NMEADecoder()
    var out: [Location] = []
    do {
        try decoder.decodeFile(path) { fix in if let l = Location(fix) { out.append(l) } }
    } catch {
        print("regions-bench: \(error)")
        exit(2)
    }
    return out
}

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ fallback: String) -> String {
    if let i = arguments.firstIndex(of: name), i + 1 < arguments.count { return arguments[i + 1] }
    return fallback
}
let walk = locations(option("--fixture", "fixtures/walk-15min.nmea"))
let start = walk[0].coordinate

/// The 10 regions every monitor has: along the walk.
let shared: [Region] = (0..<10).map { i in
    let l = walk[i * walk.count / 10]
    return try! Region(id: "shared\(i)", center: l.coordinate, radius: 40 + Double(i) * 10)
}

func makeMonitor(_ count: Int) -> (RegionMonitor, bytesPerRegion: Double) {
    let before = residentBytes()
    var m = RegionMonitor()
    m.reserveCapacity(count)
    for r in shared { m.add(r) }
    let cluster = min(count / 10, 1000)
    for i in 0..<(count - shared.count) {
        let center: Coordinate
        if i < cluster {
            center = Geodesy.destination(from: start, bearing: random() * 360, distance: random() * 10_000)
        } else {
            center = Coordinate(latitude: asin(2 * random() - 1) * 180 / .pi, longitude: random() * 360 - 180)
        }
        m.add(try! Region(id: "r\(i)", center: center, radius: 50 + random() * 450))
    }
    // Settle the far regions once (the first location does this for real).
    _ = m.process(walk[0])
    return (m, Double(residentBytes() - before) / Double(count))
}

func run(_ monitor: inout RegionMonitor, passes: Int) -> (nsPerLocation: Double, events: [String]) {
    // Pass 0 settles the states and records the events (not timed); the timed passes that follow
    // replay the walk again, later each time, through the same monitor.
    var recorded: [RegionMonitor.Event] = []
    for l in walk.dropFirst() { recorded += monitor.process(l) }
    let t0 = now()
    timedPasses(&monitor, passes: passes)
    let elapsed = now() - t0
    return (elapsed / Double(passes * (walk.count - 1)) * 1e9, recorded.map { "\($0)" })
}

/// The timed part alone, a function of its own for callgrind:
/// `valgrind --tool=callgrind --toggle-collect='$s13regions_bench11timedPasses*' regions-bench --sizes N --no-day`.
@inline(never)
func timedPasses(_ monitor: inout RegionMonitor, passes: Int) {
    var sink = 0
    for pass in 1...passes {
        for l in walk.dropFirst() {
            var shifted = l
            shifted.timestamp += Double(pass) * 100_000
            sink &+= monitor.process(shifted).count
        }
    }
    if sink < 0 { print(sink) }
}

print("region monitoring per location (\(walk.count - 1) locations of the walk fixture, best of 3 runs)")
print("| regions | ns per location | resident bytes per region | cost vs 10 regions |")
print("|---:|---:|---:|---:|")
var reference: [String]?
var baseline = 0.0
// `--sizes 10,1000000` measures those monitors only (the first is the reference), e.g. one at a
// time under callgrind, whose instruction counts are steadier than time on a shared machine.
let sizes = option("--sizes", arguments.contains("--quick") ? "10,10000" : "10,10000,1000000")
    .split(separator: ",").compactMap { Int($0) }
for count in sizes {
    var (monitor, bytes) = makeMonitor(count)
    var best = Double.infinity
    var events: [String] = []
    for _ in 0..<3 {
        var copy = monitor
        let r = run(&copy, passes: 20)
        best = min(best, r.nsPerLocation)
        events = r.events.filter { $0.contains("shared") }
    }
    if let reference, reference != events {
        print("regions-bench: \(count) regions gave other events for the shared regions; not reporting")
        exit(1)
    }
    reference = events
    if count == sizes[0] { baseline = best }
    print("| \(count) | \(Int(best)) | \(count == 10 ? "-" : String(Int(bytes))) | \(String(format1(best / baseline)))x |")
    monitor = RegionMonitor()
}
print("events for the shared regions: \(reference?.count ?? 0) (identical in every monitor)")

if arguments.contains("--no-day") { exit(0) }
// The whole location service on the 24-hour fixture with 10,000 regions, on log time.
let (dayRegions, _) = makeMonitor(10_000)
let source = NMEALogSource(options: .init(path: option("--day", "fixtures/day-24h.nmea.gz")))
let clock = source.logClock
var configuration = LocationManagerConfiguration()
configuration.significantChanges = SignificantChangeMonitor()
let manager = LocationManager(source: source, configuration: configuration, regions: dayRegions,
                              clock: clock)
let t0 = now()
var count = 0
for await _ in manager.events { count += 1 }
let elapsed = now() - t0
print("24-hour fixture, 10,000 regions: \(source.progress.fixes) fixes -> \(count) events in "
    + "\(String(Int(elapsed * 1000))) ms: \(Int(Double(count) / elapsed)) events/s, "
    + "\(Int(Double(source.progress.fixes) / elapsed)) fixes/s")

func format1(_ v: Double) -> String {
    let tenths = Int((v * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}
