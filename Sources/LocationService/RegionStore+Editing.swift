import Formats
import Geo

/// What `keeptrack regions` does to the stored set, as library calls: import a GeoJSON file,
/// remove ids, and write the set or one state as JSON Lines.
extension RegionStore {
    /// What an import did.
    public struct ImportResult: Sendable, Equatable {
        /// Regions read from the file.
        public var imported: Int
        /// Of those, ids the store did not have.
        public var added: Int
        /// Regions stored after the import.
        public var total: Int
    }

    /// Adds the regions of a GeoJSON file (Points with a `radius` property, Polygons); a region
    /// whose id is already stored replaces it in place, new ids are appended in the file's order.
    /// Definitions go straight from the bytes to the store's file: no monitor, no index (a million
    /// regions in a few seconds).
    ///
    /// - Throws: ``LocationError`` naming the file and every invalid region (an id that an earlier
    ///   feature of the file has is one); nothing is imported then.
    public func importGeoJSON(file: String) throws(LocationError) -> ImportResult {
        let bytes: [UInt8]
        do throws(LocationError) {
            bytes = try RegionStore.readWholeFile(file)
        } catch {
            throw LocationError(.unreadable, path: file, errno: error.errno, underlying: error)
        }
        var incoming: [Region] = []
        var failures: [LocationError] = []
        var ids = RegionIDs()
        do throws(FormatsError) {
            try RegionDefinition.parseGeoJSON(bytes) { d in
                do throws(LocationError) {
                    try ids.add(d.id)
                    incoming.append(try Region(d))
                } catch {
                    failures.append(error)
                }
            }
        } catch {
            throw LocationError(.invalidFile, path: file, underlying: error)
        }
        if !failures.isEmpty { throw LocationError(.invalidFile, path: file, failures: failures) }
        var merged = try loadRegions()
        let before = merged.count
        var position: [String: Int] = [:]
        position.reserveCapacity(merged.count + incoming.count)
        for (k, r) in merged.enumerated() { position[r.id] = k }
        for r in incoming {
            if let k = position[r.id] {
                merged[k] = r
            } else {
                position[r.id] = merged.count
                merged.append(r)
            }
        }
        try saveRegions(merged)
        return ImportResult(imported: incoming.count, added: merged.count - before, total: merged.count)
    }

    /// Stops monitoring `ids`; returns how many regions remain.
    ///
    /// - Throws: ``LocationError`` naming the ids the store does not have (nothing is removed then).
    public func remove(ids: [String]) throws(LocationError) -> Int {
        var regions = try loadRegions()
        let stored = Set(regions.map(\.id))
        let unknown = ids.filter { !stored.contains($0) }
        if !unknown.isEmpty {
            throw LocationError(.unknownRegion, regions: unknown)
        }
        let removed = Set(ids)
        regions.removeAll { removed.contains($0.id) }
        try saveRegions(regions)
        return regions.count
    }

    /// Writes every stored region, sorted by id, with its last saved state, one JSON object per
    /// line: `{"region":ID,"shape":"circle","lat":...,"lon":...,"radius":...,"state":...}` or
    /// `{"region":ID,"shape":"polygon","vertices":N,"state":...}`, handed to `write` in blocks of
    /// about 64 KiB, so a million regions are never held as text at once.
    public func writeList(_ write: ([UInt8]) throws -> Void) throws {
        let monitor = try loadMonitor()
        var out: [UInt8] = []
        out.reserveCapacity(80 * 1024)
        for r in monitor.regions.sorted(by: { $0.id < $1.id }) {
            ByteWriting.appendStatic("{\"region\":", to: &out)
            ByteWriting.appendJSONString(r.id, to: &out)
            switch r.shape {
            case .circle(let c, let radius):
                ByteWriting.appendStatic(",\"shape\":\"circle\",\"lat\":", to: &out)
                ByteWriting.appendFixed(c.latitude, decimals: 9, to: &out)
                ByteWriting.appendStatic(",\"lon\":", to: &out)
                ByteWriting.appendFixed(c.longitude, decimals: 9, to: &out)
                ByteWriting.appendStatic(",\"radius\":", to: &out)
                ByteWriting.appendFixed(radius, decimals: 1, to: &out)
            case .polygon(let p):
                ByteWriting.appendStatic(",\"shape\":\"polygon\",\"vertices\":", to: &out)
                ByteWriting.appendInt(Int64(p.vertices.count), to: &out)
            }
            ByteWriting.appendStatic(",\"state\":", to: &out)
            ByteWriting.appendJSONString(monitor.state(for: r.id).rawValue, to: &out)
            ByteWriting.appendStatic("}\n", to: &out)
            if out.count >= 64 * 1024 {
                try write(out)
                out.removeAll(keepingCapacity: true)
            }
        }
        if !out.isEmpty { try write(out) }
    }

    /// A stored region's saved state as one JSON line, `{"region":ID,"state":"inside"}`.
    ///
    /// - Throws: ``LocationError`` when the store has no region `id`.
    public func stateLine(of id: String) throws(LocationError) -> [UInt8] {
        guard let state = try savedState(of: id) else {
            throw LocationError(.unknownRegion, regions: [id])
        }
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"region\":", to: &out)
        ByteWriting.appendJSONString(id, to: &out)
        ByteWriting.appendStatic(",\"state\":", to: &out)
        ByteWriting.appendJSONString(state.rawValue, to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
        return out
    }
}

/// The ids of one regions file, by feature: an id is unique within a file (the endpoint's
/// geofence documents say the same), though a file's region replaces a stored one of its id.
public struct RegionIDs: Sendable {
    private var first: [String: Int] = [:]
    private var feature = 0

    public init() {}

    /// Takes the next feature's id.
    ///
    /// - Throws: ``LocationError/Code/invalidRegion`` when an earlier feature has the id.
    public mutating func add(_ id: String) throws(LocationError) {
        feature += 1
        if let earlier = first[id] {
            throw LocationError(
                .invalidRegion, "feature \(feature) has the id of feature \(earlier) (an id is one region)", region: id)
        }
        first[id] = feature
    }
}
