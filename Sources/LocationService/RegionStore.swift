import FoundationEssentials
import Geo

/// Monitored regions and their states on disk, so they survive restarts.
///
/// Two JSON files in a directory (the data directory, `$XDG_DATA_HOME/keeptrack` by default):
/// `regions.json` holds the definitions (written by import and remove), `region-states.json` the
/// regions the device is inside (written on every transition; small, whatever the number of
/// regions: every region not listed is outside). Both are replaced atomically (write, then rename).
public struct RegionStore: Sendable {
    public struct Record: Codable, Hashable, Sendable {
        public var id: String
        public var lat: Double?
        public var lon: Double?
        public var radius: Double?
        /// Polygon vertices as [lat, lon] pairs.
        public var ring: [[Double]]?
        public var notifyOnEntry: Bool
        public var notifyOnExit: Bool
        public var dwell: Double?
    }

    struct States: Codable {
        struct Inside: Codable {
            var id: String
            var enteredAt: Double?
            var dwellReported: Bool
        }
        var inside: [Inside]
    }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    /// `$XDG_DATA_HOME/keeptrack`, else `~/.local/share/keeptrack`.
    public static func defaultDirectory(environment: [String: String]) -> String {
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/keeptrack" }
        return (environment["HOME"] ?? ".") + "/.local/share/keeptrack"
    }

    var regionsPath: String { directory + "/regions.json" }
    var statesPath: String { directory + "/region-states.json" }

    /// The stored regions (none when nothing was stored yet).
    public func loadRegions() throws(Failure) -> [Region] {
        guard FileManager.default.fileExists(atPath: regionsPath) else { return [] }
        let records: [Record]
        do {
            records = try JSONDecoder().decode([Record].self, from: Data(contentsOf: URL(fileURLWithPath: regionsPath)))
        } catch {
            throw Failure(description: "cannot read \(regionsPath): \(error)")
        }
        var out: [Region] = []
        for r in records {
            do {
                var region: Region
                if let ring = r.ring {
                    region = try Region(id: r.id, ring: ring.map { Coordinate(latitude: $0[0], longitude: $0[1]) })
                } else if let lat = r.lat, let lon = r.lon, let radius = r.radius {
                    region = try Region(id: r.id, center: Coordinate(latitude: lat, longitude: lon), radius: radius)
                } else {
                    throw Failure(description: "region \(r.id) has neither a centre and radius nor a ring")
                }
                region.notifyOnEntry = r.notifyOnEntry
                region.notifyOnExit = r.notifyOnExit
                region.loiteringDelay = r.dwell
                out.append(region)
            } catch let failure as Failure {
                throw Failure(description: "\(regionsPath): \(failure)")
            } catch {
                throw Failure(description: "\(regionsPath): \(error)")
            }
        }
        return out
    }

    /// Replaces the stored regions.
    public func saveRegions(_ regions: [Region]) throws(Failure) {
        let records = regions.sorted { $0.id < $1.id }.map { r -> Record in
            switch r.shape {
            case .circle(let c, let radius):
                Record(id: r.id, lat: c.latitude, lon: c.longitude, radius: radius, ring: nil,
                       notifyOnEntry: r.notifyOnEntry, notifyOnExit: r.notifyOnExit, dwell: r.loiteringDelay)
            case .polygon(let p):
                Record(id: r.id, lat: nil, lon: nil, radius: nil, ring: p.vertices.map { [$0.latitude, $0.longitude] },
                       notifyOnEntry: r.notifyOnEntry, notifyOnExit: r.notifyOnExit, dwell: r.loiteringDelay)
            }
        }
        try write(records, to: regionsPath)
    }

    /// A monitor with the stored regions and their saved states.
    public func loadMonitor() throws(Failure) -> RegionMonitor {
        var monitor = RegionMonitor()
        let regions = try loadRegions()
        monitor.reserveCapacity(regions.count)
        for r in regions { monitor.add(r) }
        if FileManager.default.fileExists(atPath: statesPath) {
            do {
                let states = try JSONDecoder().decode(States.self, from: Data(contentsOf: URL(fileURLWithPath: statesPath)))
                monitor.restoreStates(inside: states.inside.map { ($0.id, $0.enteredAt, $0.dwellReported) })
            } catch {
                throw Failure(description: "cannot read \(statesPath): \(error)")
            }
        }
        return monitor
    }

    /// Saves which regions the device is inside (call after transitions).
    public func saveStates(of monitor: RegionMonitor) throws(Failure) {
        let inside = monitor.insideRegions.map { States.Inside(id: $0.id, enteredAt: $0.enteredAt, dwellReported: $0.dwellReported) }
        try write(States(inside: inside.sorted { $0.id < $1.id }), to: statesPath)
    }

    private func write<T: Encodable>(_ value: T, to path: String) throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(value).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw Failure(description: "cannot write \(path): \(error)")
        }
    }
}
