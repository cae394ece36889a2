// events-bench: the endpoint's event evaluation per stored location as the number of geofences grows,
// beside the device's own region monitor on the same locations and regions (the peer).
//
//   events-bench [--day fixtures/day-24h.nmea.gz] [--sizes 10,10000,100000] [--batch 100]
//
// Builds geofence sets of 10, 10,000 and 100,000 (the day fixture's 4 regions and a polygon around
// one, 1,000 circles within 10 km of the day's start, a tenth of the rest polygons, the rest circles
// scattered over the globe; fixed seed), then replays the 24-hour fixture's locations:
//
// - through one device's GeofenceState, location by location (the geofences alone);
// - through its DeviceEventState in batches (--batch, as a store runs it: the state read, the
//   reorder window, the overspeed and battery rules, the state written; the reading and writing
//   also timed apart);
// - through a RegionMonitor holding the same regions (the device's code: the peer).
//
// It checks its own output first: the three must report the same entries and exits for the shared
// regions, in every set. Also: building a set, and reading a GeoJSON document of 100,000 geofences.

import BenchSupport
import EndpointEvents
import Formats
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

func fail(_ message: String) -> Never {
    print("events-bench: \(message); not reporting")
    exit(1)
}

var locations: [Location] = []
do {
    var decoder = NMEADecoder()
    try decoder.decodeFile(option("--day", "fixtures/day-24h.nmea.gz")) { fix in
        if let l = Location(fix), l.horizontalAccuracy >= 0 { locations.append(l) }
    }
} catch {
    fail("\(error)")
}
guard locations.count > 1000 else { fail("only \(locations.count) locations in the fixture") }
let records: [KeyedRecord] = locations.enumerated().map { i, l in
    var r = TrailRecord(device: "van-1", sequence: Int64(i + 1), location: l)
    r.attributes["batt"] = String(100 - i * 100 / locations.count)
    return KeyedRecord(key: "id:van-1:\(i + 1)", record: r)
}

nonisolated(unsafe) var random = SeededRandom(seed: 37)
let start = locations[0].coordinate
let shared: [Region] = {
    var out =
        (try? RegionDefinition.parseGeoJSON(Array(readAll("fixtures/day-24h.regions.geojson"))))?.compactMap {
            try? Region($0)
        } ?? []
    guard !out.isEmpty else { fail("the day fixture's regions did not read") }
    if case .circle(let c, let r) = out[0].shape {
        let ring = [45.0, 135, 225, 315].map { Geodesy.destination(from: c, bearing: $0, distance: r * 1.5) }
        out.append(try! Region(id: "square", ring: ring))
    }
    return out
}()

func readAll(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { fail("cannot open \(path)") }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        out += buffer[0..<n]
    }
    return out
}

func makeRegions(_ count: Int) -> [Region] {
    var out = shared
    let cluster = min(max(0, count - shared.count), 1000)
    for i in 0..<max(0, count - shared.count) {
        let center =
            i < cluster
            ? Geodesy.destination(
                from: start, bearing: Double.random(in: 0..<360, using: &random),
                distance: Double.random(in: 0..<10_000, using: &random))
            : Coordinate(
                latitude: asin(2 * Double.random(in: 0..<1, using: &random) - 1) * 180 / .pi,
                longitude: Double.random(in: -180..<180, using: &random))
        let radius = Double.random(in: 50..<500, using: &random)
        if i % 10 == 9 {
            let ring = (0..<8).map { k in
                Geodesy.destination(from: center, bearing: Double(k) * 45, distance: radius * (k % 2 == 0 ? 1 : 0.7))
            }
            out.append(try! Region(id: "p\(i)", ring: ring))
        } else {
            out.append(try! Region(id: "r\(i)", center: center, radius: radius))
        }
    }
    return out
}

func crossings(_ names: [String]) -> [String] { names.filter { !$0.contains(" r") && !$0.contains(" p") } }

func label(_ e: RegionMonitor.Event) -> String? {
    switch e {
    case .enter(let id, let t): "enter \(id) \(t)"
    case .exit(let id, let t): "exit \(id) \(t)"
    case .dwell(let id, let t): "dwell \(id) \(t)"
    case .state: nil
    }
}

func label(_ e: DeviceEvent) -> String? {
    switch e.kind {
    case .geofenceEnter: "enter \(e.subject!) \(e.time)"
    case .geofenceExit: "exit \(e.subject!) \(e.time)"
    case .geofenceDwell: "dwell \(e.subject!) \(e.time)"
    default: nil
    }
}

func format1(_ v: Double) -> String {
    let tenths = Int((v * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

func group(_ n: Int) -> String {
    let s = String(n)
    var out = ""
    for (i, c) in s.enumerated() {
        if i > 0 && (s.count - i) % 3 == 0 { out += "," }
        out.append(c)
    }
    return out
}

let batch = Int(option("--batch", "100")) ?? 100
let sizes = option("--sizes", "10,10000,100000").split(separator: ",").compactMap { Int($0) }
print(
    "event evaluation per stored location (\(group(locations.count)) locations of the 24-hour fixture, "
        + "best of 3 runs; batches of \(batch))")
print(
    "| geofences | build ms | first location, ms | geofences only, ns | events, ns (batches, state kept) "
        + "| device's monitor, ns | state bytes | state read + written, µs a batch |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
var reference: [String]?
for count in sizes {
    let regions = makeRegions(count)
    let t0 = now()
    let set = GeofenceSet(regions.map { Geofence(region: $0) })
    let build = now() - t0
    // A device's first location settles every geofence new to it.
    var firstLocation = Double.infinity
    for _ in 0..<3 {
        var fresh = GeofenceState()
        let l = locations[0]
        let f0 = now()
        _ = fresh.evaluate(
            latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: l.horizontalAccuracy,
            time: l.timestamp, device: "van-9", in: set)
        firstLocation = min(firstLocation, now() - f0)
    }
    var bestState = Double.infinity, bestEvents = Double.infinity, bestMonitor = Double.infinity
    var bestCodec = Double.infinity
    var stateBytes = 0
    var results: [[String]] = []
    for _ in 0..<3 {
        var state = GeofenceState()
        var fromState: [String] = []
        let a = now()
        for l in locations {
            for e in state.evaluate(
                latitude: l.coordinate.latitude, longitude: l.coordinate.longitude, accuracy: l.horizontalAccuracy,
                time: l.timestamp, device: "van-1", in: set)
            {
                if let s = label(e) { fromState.append(s) }
            }
        }
        bestState = min(bestState, (now() - a) / Double(locations.count) * 1e9)
        // As a store runs it: each batch reads the device's state, evaluates, writes the state.
        var saved: [UInt8] = []
        var rules = EventRules()
        rules.overspeed = OverspeedRule(limit: 14)
        var fromDevice: [String] = []
        var codec = 0.0
        var batches = 0
        let b = now()
        for s in stride(from: 0, to: records.count, by: batch) {
            let c0 = now()
            var device = saved.isEmpty ? DeviceEventState() : try! DeviceEventState(encoded: saved)
            let c1 = now()
            let r = device.evaluate(
                Array(records[s..<min(s + batch, records.count)]), device: "van-1", geofences: set, rules: rules)
            let c2 = now()
            saved = device.encoded()
            codec += (c1 - c0) + (now() - c2)
            batches += 1
            fromDevice += r.events.compactMap(label)
            stateBytes = max(stateBytes, saved.count)
        }
        bestEvents = min(bestEvents, (now() - b) / Double(locations.count) * 1e9)
        bestCodec = min(bestCodec, codec / Double(batches) * 1e6)
        var monitor = RegionMonitor()
        monitor.reserveCapacity(regions.count)
        for r in regions { monitor.add(r) }
        var fromMonitor: [String] = []
        let c = now()
        for l in locations { fromMonitor += monitor.process(l).compactMap(label) }
        bestMonitor = min(bestMonitor, (now() - c) / Double(locations.count) * 1e9)
        results = [fromState, fromDevice, fromMonitor]
    }
    let sorted = results.map { $0.sorted() }
    guard sorted[0] == sorted[2], sorted[1] == sorted[2] else {
        fail("\(count) geofences: the endpoint and the device's monitor disagree")
    }
    let mine = crossings(sorted[2])
    if let reference, reference != mine { fail("\(count) geofences gave other events for the shared regions") }
    reference = mine
    print(
        "| \(group(count)) | \(Int(build * 1000)) | \(format1(firstLocation * 1000)) | \(Int(bestState)) "
            + "| \(Int(bestEvents)) | \(Int(bestMonitor)) "
            + "| \(group(stateBytes)) | \(Int(bestCodec)) |")
}
print("transitions of the shared regions: \(reference?.count ?? 0) (identical for every size and path)")

// Reading the geofences as the routes will: a GeoJSON document of 100,000.
let document = GeofenceDocument.geoJSON(makeRegions(100_000).map { Geofence(region: $0) })
let p0 = now()
guard let parsed = try? GeofenceDocument.parse(document), parsed.count == 100_000 else {
    fail("the 100,000-geofence document did not read back")
}
let parse = now() - p0
// The worst polygon the bounds allow: 10,000 vertices, its ring checked for crossings.
let worst = Geofence(
    region: try! Region(
        id: "worst",
        ring: (0..<10_000).map {
            Geodesy.destination(from: start, bearing: Double($0) * 360 / 10_000, distance: 5_000)
        }))
let w0 = now()
guard (try? GeofenceDocument.parse(GeofenceDocument.geoJSON([worst])))?.count == 1 else {
    fail("the 10,000-vertex polygon did not read back")
}
let worstTime = now() - w0
print(
    "geofence document: 100,000 geofences, \(group(document.count / 1000)) KB read in \(Int(parse * 1000)) ms; "
        + "one polygon of 10,000 vertices read and checked in \(Int(worstTime * 1000)) ms")
