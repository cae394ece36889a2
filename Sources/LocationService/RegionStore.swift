#if canImport(Glibc)
    import Glibc
#endif
import Formats
import Geo
import SystemIO

/// Monitored regions and their states on disk, so they survive restarts.
///
/// Two JSON files in a directory (the data directory, `$XDG_DATA_HOME/keeptrack` by default):
/// `regions.json` holds the definitions (written by import and remove), `region-states.json` the
/// regions the device is inside (written after transitions, at most once a second: small, whatever
/// the number of regions, as every region not listed is outside). Both are replaced atomically
/// (write, then rename), and both are read and written in one pass over their bytes (a million
/// regions load in about a second).
public struct RegionStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    var regionsPath: String { DataDirectory(directory).regions }
    var statesPath: String { DataDirectory(directory).regionStates }

    /// When the region definitions were last stored (`keeptrack regions import` or remove), in
    /// seconds since 1970, or `nil` when none are: what OwnTracks calls a waypoint's creation time.
    public func definitionsStoredAt() -> Double? {
        var info = stat()
        guard stat(regionsPath, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec)
    }

    /// The stored regions (none when nothing was stored yet), in stored order.
    public func loadRegions() throws(LocationError) -> [Region] {
        var out: [Region] = []
        try forEachRegion { out.append($0) }
        return out
    }

    /// Hands each stored region to `body`, in stored order, without keeping them.
    ///
    /// - Throws: ``LocationError`` naming the file and the record when it can't be read.
    public func forEachRegion(_ body: (Region) -> Void) throws(LocationError) {
        guard let bytes = try Self.readBytes(regionsPath) else { return }
        try forEachRegion(in: bytes, body)
    }

    private func forEachRegion(in bytes: [UInt8], _ body: (Region) -> Void) throws(LocationError) {
        var invalid: LocationError?
        do throws(FormatsError) {
            try RegionDefinition.parseStoreRecords(bytes) { d in
                guard invalid == nil else { return }
                do throws(LocationError) {
                    body(try Region(d))
                } catch {
                    invalid = error
                }
            }
        } catch {
            throw LocationError(.invalidFile, path: regionsPath, underlying: error)
        }
        if let invalid { throw LocationError(.invalidFile, path: regionsPath, underlying: invalid) }
    }

    /// Replaces the stored regions (kept in the order given).
    public func saveRegions(_ regions: [Region]) throws(LocationError) {
        try writeFile(regionsPath) { out, flush throws(LocationError) in
            out.append(UInt8(ascii: "["))
            for (k, r) in regions.enumerated() {
                out.append(contentsOf: k == 0 ? [0x0A] : [UInt8(ascii: ","), 0x0A])
                RegionDefinition(r).appendStoreRecord(to: &out)
                if out.count >= 1 << 20 { try flush(&out) }
            }
            out.append(contentsOf: [0x0A, UInt8(ascii: "]"), 0x0A])
        }
    }

    /// A monitor with the stored regions and their saved states.
    public func loadMonitor() throws(LocationError) -> RegionMonitor {
        var monitor = RegionMonitor()
        if let bytes = try Self.readBytes(regionsPath) {
            // saveRegions writes one record a line: the line count sizes the monitor at once.
            monitor.reserveCapacity(bytes.withUnsafeBufferPointer { b in b.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 } })
            try forEachRegion(in: bytes) { monitor.add($0) }
        }
        if let saved = try loadInside() { monitor.restoreStates(inside: saved) }
        return monitor
    }

    /// The saved inside set (`nil` when no states were saved).
    func loadInside() throws(LocationError) -> [(id: String, enteredAt: Double?, dwellReported: Bool)]? {
        guard let bytes = try Self.readBytes(statesPath) else { return nil }
        do throws(FormatsError) {
            return try RegionDefinition.parseSavedStates(bytes)
        } catch {
            throw LocationError(.unreadable, path: statesPath, underlying: error)
        }
    }

    /// The state of the stored region `id` as last saved (CoreLocation's `requestState(for:)` for
    /// a tracker that is not running, or at most a second behind one that is): `inside` when the
    /// saved states list it, `outside` when they don't, `unknown` when no states were saved; `nil`
    /// when no stored region has that id.
    public func savedState(of id: String) throws(LocationError) -> RegionState? {
        var found = false
        try forEachRegion { if $0.id == id { found = true } }
        guard found else { return nil }
        guard let inside = try loadInside() else { return .unknown }
        return inside.contains { $0.id == id } ? .inside : .outside
    }

    /// Saves which regions the device is inside (call after transitions; see
    /// ``RegionStateSaving`` for how often).
    ///
    /// - Complexity: O(regions inside, pending or unknown): never O(all regions).
    public func saveStates(of monitor: borrowing RegionMonitor) throws(LocationError) {
        let inside = monitor.insideRegions.sorted { $0.id < $1.id }
        try writeFile(statesPath) { out, _ throws(LocationError) in
            RegionDefinition.appendSavedStates(inside, to: &out)
        }
    }

    /// The whole file, or `nil` when it does not exist.
    static func readBytes(_ path: String) throws(LocationError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw LocationError(.unreadable, path: path, errno: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw LocationError(.unreadable, path: path, errno: errno)
        }
        // Exactly the file's size: no growth slack for a file of a million regions.
        var out = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while true {
            if done == out.count { out.append(contentsOf: [UInt8](repeating: 0, count: 65536)) }
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw LocationError(.unreadable, path: path, errno: errno)
            }
            if n == 0 { break }
            done += n
        }
        out.removeLast(out.count - done)
        return out
    }

    /// Writes a file through a temporary one and a rename, in chunks: `produce` appends to the
    /// buffer and may call `flush` to write what it holds.
    private func writeFile(
        _ path: String,
        _ produce: (inout [UInt8], (inout [UInt8]) throws(LocationError) -> Void) throws(LocationError) -> Void
    ) throws(LocationError) {
        makeDirectories(directory, mode: 0o755)
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LocationError(.unwritable, path: path, errno: errno) }
        func flush(_ bytes: inout [UInt8]) throws(LocationError) {
            var done = 0
            while done < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw LocationError(.unwritable, path: path, errno: errno)
                }
                done += n
            }
            bytes.removeAll(keepingCapacity: true)
        }
        var buffer: [UInt8] = []
        do {
            try produce(&buffer, flush)
            try flush(&buffer)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            throw LocationError(.unwritable, path: path, errno: errno)
        }
    }
}

extension Region {
    /// A region from a definition (a GeoJSON feature or a stored record).
    ///
    /// - Throws: ``LocationError`` when it can't be monitored (see the shapes' initializers).
    public init(_ d: RegionDefinition) throws(LocationError) {
        switch d.shape {
        case .circle(let center, let radius): self = try Region(id: d.id, center: center, radius: radius)
        case .polygon(let ring): self = try Region(id: d.id, ring: ring)
        }
        loiteringDelay = d.dwell
        notifyOnEntry = d.notifyOnEntry
        notifyOnExit = d.notifyOnExit
    }
}

extension RegionDefinition {
    /// The definition of a region, as stored.
    public init(_ r: Region) {
        let shape: Shape =
            switch r.shape {
            case .circle(let c, let radius): .circle(center: c, radius: radius)
            case .polygon(let p): .polygon(p.vertices)
            }
        self.init(
            id: r.id, shape: shape, dwell: r.loiteringDelay, notifyOnEntry: r.notifyOnEntry,
            notifyOnExit: r.notifyOnExit)
    }
}

extension RegionStore {
    /// The whole file at `path`, read into exactly its size (a 154 MB GeoJSON file takes 154 MB,
    /// not the doubling of a growing buffer).
    public static func readWholeFile(_ path: String) throws(LocationError) -> [UInt8] {
        guard let bytes = try readBytes(path) else {
            throw LocationError(.unreadable, path: path, errno: ENOENT)
        }
        return bytes
    }
}
