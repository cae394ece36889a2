import ArgumentParser
import FoundationEssentials
import Formats
import GPSInput
import Geo
import LocationService

#if canImport(Glibc)
import Glibc
#endif

extension DesiredAccuracy: ExpressibleByArgument {}

/// The location-service options of `replay` and `track`. Any of them switches the output from
/// fixes to location events.
struct LocationOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Deliver a location only after moving this many metres (standard updates).",
                               valueName: "metres"))
    var distanceFilter: Double?

    @Option(help: ArgumentHelp(
        "best-for-navigation, best (≤5 m), 10m, 100m, 1km or 3km: accuracy a fix needs to be delivered.",
        valueName: "accuracy"))
    var desiredAccuracy: DesiredAccuracy?

    @Flag(help: "Also report significant changes (≥500 m moved, at most one per 5 minutes).")
    var significantChanges = false

    @Option(help: ArgumentHelp("Monitor the regions in this GeoJSON file (Points with a radius property, Polygons).",
                               valueName: "file.geojson"))
    var regions: String?

    @Option(help: ArgumentHelp("Report a dwell after this many seconds inside a region.", valueName: "seconds"))
    var dwell: Double?

    @Flag(help: "Pause standard updates while stationary (25 m for 5 minutes) and resume on movement.")
    var pauseWhenStationary = false

    var wantsEvents: Bool {
        distanceFilter != nil || desiredAccuracy != nil || significantChanges || regions != nil || dwell != nil
            || pauseWhenStationary
    }

    func validate() throws {
        if let d = distanceFilter, !(d >= 0 && d.isFinite) { throw ValidationError("--distance-filter must be 0 or more metres.") }
        if let d = dwell, !(d > 0 && d.isFinite) { throw ValidationError("--dwell must be a positive number of seconds.") }
        if dwell != nil && regions == nil { throw ValidationError("--dwell applies to regions: add --regions FILE.geojson.") }
    }

    var configuration: LocationManager<NMEALogSource>.Configuration {
        var c = LocationManager<NMEALogSource>.Configuration()
        var s = StandardUpdateFilter.Configuration()
        if let distanceFilter { s.distanceFilter = distanceFilter }
        if let desiredAccuracy { s.desiredAccuracy = desiredAccuracy }
        s.pauseWhenStationary = pauseWhenStationary
        c.standardUpdates = s
        if significantChanges { c.significantChanges = SignificantChangeMonitor() }
        return c
    }

    /// The region monitor with the regions of `--regions`, or a usage error naming the problem.
    /// Regions that cannot be monitored (radius ≤ 0, bad coordinates, a polygon that crosses
    /// itself) are left out and listed in `failures`.
    func regionMonitor() throws -> RegionMonitor {
        try regionMonitorAndFailures().monitor
    }

    func regionMonitorAndFailures() throws -> (monitor: RegionMonitor, failures: [String]) {
        var monitor = RegionMonitor()
        var failures: [String] = []
        guard let regions else { return (monitor, failures) }
        let bytes: [UInt8]
        do {
            bytes = try readFile(regions)
        } catch {
            throw ValidationError("cannot read --regions \(regions): \(error)")
        }
        let definitions: [RegionDefinition]
        do {
            definitions = try RegionDefinition.parseGeoJSON(bytes)
        } catch {
            throw ValidationError("--regions \(regions): \(error)")
        }
        for d in definitions {
            do {
                var region: Region
                switch d.shape {
                case .circle(let center, let radius): region = try Region(id: d.id, center: center, radius: radius)
                case .polygon(let ring): region = try Region(id: d.id, ring: ring)
                }
                region.loiteringDelay = d.dwell ?? dwell
                region.notifyOnEntry = d.notifyOnEntry
                region.notifyOnExit = d.notifyOnExit
                monitor.add(region)
            } catch {
                failures.append("\(error)")
            }
        }
        return (monitor, failures)
    }
}

struct ReadError: Error, CustomStringConvertible {
    var description: String
}

func readFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw ReadError(description: String(cString: strerror(errno))) }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw ReadError(description: String(cString: strerror(errno)))
        }
        if n == 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return out
}

/// Writes location events as JSON Lines (schema in README, "location events").
struct EventOutput {
    var out = OutputBuffer()
    var lineBuffered: Bool

    static func time(_ seconds: Double) -> GNSSTime {
        GNSSTime(nanosecondsSince1970: Int64((seconds * 1000).rounded()) * 1_000_000, fractionDigits: 3)
    }

    mutating func location(_ kind: StaticString, _ l: Location) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out.bytes)
        ByteWriting.appendStatic(kind, to: &out.bytes)
        ByteWriting.appendStatic("\",\"time\":\"", to: &out.bytes)
        Self.time(l.timestamp).appendISO8601(to: &out.bytes)
        ByteWriting.appendStatic("\",\"lat\":", to: &out.bytes)
        ByteWriting.appendFixed(l.coordinate.latitude, decimals: 9, to: &out.bytes)
        ByteWriting.appendStatic(",\"lon\":", to: &out.bytes)
        ByteWriting.appendFixed(l.coordinate.longitude, decimals: 9, to: &out.bytes)
        ByteWriting.appendStatic(",\"hAcc\":", to: &out.bytes)
        ByteWriting.appendFixed(l.horizontalAccuracy, decimals: 2, to: &out.bytes)
        ByteWriting.appendStatic(",\"alt\":", to: &out.bytes)
        if l.verticalAccuracy >= 0 { ByteWriting.appendFixed(l.altitude, decimals: 3, to: &out.bytes) } else {
            ByteWriting.appendStatic("null", to: &out.bytes)
        }
        ByteWriting.appendStatic(",\"speed\":", to: &out.bytes)
        ByteWriting.appendFixed(l.speed, decimals: 3, nullText: "null", to: &out.bytes)
        ByteWriting.appendStatic(",\"course\":", to: &out.bytes)
        if l.course >= 0 { ByteWriting.appendFixed(l.course, decimals: 2, to: &out.bytes) } else {
            ByteWriting.appendStatic("null", to: &out.bytes)
        }
        ByteWriting.appendStatic("}\n", to: &out.bytes)
    }

    mutating func write(_ event: LocationEvent) throws(OutputError) {
        switch event {
        case .location(let l): location("location", l)
        case .significantChange(let l): location("significant-change", l)
        case .paused(let l): simple("updates-paused", time: l.timestamp)
        case .resumed(let l): simple("updates-resumed", time: l.timestamp)
        case .region(let e):
            switch e {
            case .enter(let id, let t): regionLine("enter", id, time: t)
            case .exit(let id, let t): regionLine("exit", id, time: t)
            case .dwell(let id, let t): regionLine("dwell", id, time: t)
            case .state(let id, let state):
                out.appendStringObject(["event": "state", "region": id, "state": state.rawValue])
            }
        case .error(let e):
            out.appendStringObject(["event": "error", "code": e.code.rawValue, "reason": e.reason])
        }
        try out.endRecord(lineBuffered: lineBuffered)
    }

    mutating func simple(_ kind: StaticString, time: Double) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out.bytes)
        ByteWriting.appendStatic(kind, to: &out.bytes)
        ByteWriting.appendStatic("\",\"time\":\"", to: &out.bytes)
        Self.time(time).appendISO8601(to: &out.bytes)
        ByteWriting.appendStatic("\"}\n", to: &out.bytes)
    }

    mutating func regionLine(_ kind: StaticString, _ id: String, time: Double) {
        ByteWriting.appendStatic("{\"event\":\"", to: &out.bytes)
        ByteWriting.appendStatic(kind, to: &out.bytes)
        ByteWriting.appendStatic("\",\"region\":", to: &out.bytes)
        ByteWriting.appendJSONString(id, to: &out.bytes)
        ByteWriting.appendStatic(",\"time\":\"", to: &out.bytes)
        Self.time(time).appendISO8601(to: &out.bytes)
        ByteWriting.appendStatic("\"}\n", to: &out.bytes)
    }
}

/// Wall-clock seconds since 1970, for live sources.
@Sendable func wallClockSeconds() -> Double { WallClock.seconds() }
