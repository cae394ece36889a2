import Geo

#if canImport(Glibc)
import Glibc
#endif

/// Where a location is relative to a region.
public enum RegionState: String, Hashable, Sendable, Codable {
    case inside, outside, unknown
}

/// Region monitoring: enter, exit and dwell events for any number of regions, without flapping.
///
/// A value type with no I/O and no clock: ``process(_:)`` takes a location and returns the events
/// it causes. Rules (each tested):
///
/// - **Evidence with a margin.** A location counts as *inside* a region only when it is inside by
///   more than its accuracy (signed distance to the boundary ≤ −max(hAcc, ``minimumMargin``)), and
///   *outside* only when outside by as much. Locations in between — GPS noise at the edge — are
///   no evidence either way and change nothing.
/// - **Held for a minimum time.** A transition happens only after every location for
///   ``minimumDuration`` seconds (20 by default, as iOS), counted on the locations' own timestamps,
///   was evidence for the new state; a location that is not (contrary or in the band) restarts the
///   wait. Exit is symmetric to entry. Its time is when the evidence began.
/// - **First state.** A region starts ``RegionState/unknown``; the first clear evidence settles it
///   at once (there is nothing to flap from) and is reported as ``Event/state(_:_:)``, not as an
///   entry or exit.
/// - **Dwell.** With a loitering delay, staying inside that long after an entry reports
///   ``Event/dwell(_:time:)`` once per visit.
/// - **Replacing.** Adding a region with an existing id replaces it and resets its state.
///
/// A grid index (cells of ``cellDegrees``; each region listed in every cell its bounds touch; kept
/// as one sorted array of 8-byte (cell, slot) words) keeps the cost of a location proportional to
/// the regions near it, not to how many are monitored. A location can only be evidence of *inside*
/// for a region whose bounds contain it, so only those are looked up (the last cell's range is
/// kept: a device stays in a cell for many fixes); the few regions that are inside, pending or
/// unknown are always evaluated exactly.
///
/// First states are reported for the regions the device is inside and, outside, for those whose
/// boundary is within ``firstStateReportDistance``: with a million regions, a million `state`
/// events at start would be noise. Every other region settles silently; ``state(for:)`` answers
/// for any region (CoreLocation's `requestState(for:)`).
public struct RegionMonitor: Sendable {
    public enum Event: Hashable, Sendable {
        case enter(String, time: Double)
        case exit(String, time: Double)
        case dwell(String, time: Double)
        case state(String, RegionState)
    }

    struct Tracked: Sendable {
        var region: Region
        var state: RegionState = .unknown
        var pending: RegionState?
        var pendingSince = 0.0
        var enteredAt: Double?
        var dwellReported = false
        var isActive = false
        /// The `process` round that last evaluated this region as a candidate.
        var visited: UInt32 = 0
    }

    /// Seconds the evidence for a new state must hold. The default is 20.
    public var minimumDuration: Double = 20
    /// The smallest margin in metres, whatever the accuracy. The default is 5.
    public var minimumMargin: Double = 5
    /// A region's first state is reported as a ``Event/state(_:_:)`` event when it is inside, or
    /// outside with its boundary within this many metres; farther regions settle as outside without
    /// an event. The default is 1,000.
    public var firstStateReportDistance: Double = 1000
    /// Grid cell size in degrees. The default is 0.005 (about 550 m north-south).
    public let cellDegrees: Double
    /// The grid: a cell's number is `row * columns + column` (below 2^32).
    private let grid: Grid

    private var tracked: [String: Int32] = [:]
    private var slots: [Tracked?] = []
    private var freeSlots: [Int32] = []
    /// The index: `cell << 32 | slot` words, sorted (a cell's regions in slot order).
    private var index: [UInt64] = []
    /// Words added since the last merge.
    private var newWords: [UInt64] = []
    /// Index words of removed regions, dropped at the next rebuild.
    private var stalePairs = 0
    /// Regions whose state is not a settled "outside" (inside, pending, or unknown).
    private var active: [Int32] = []
    private var round: UInt32 = 0
    /// The cell of the last location and its range in ``index`` (until the index changes).
    private var cachedCell: UInt64 = .max
    private var cachedRange: Range<Int> = 0..<0
    /// Counts changes to what ``insideRegions`` returns (entries, exits, first states inside,
    /// dwells, restores): a saved copy is current while this has not moved.
    public private(set) var insideVersion: UInt64 = 0

    /// - Parameter cellDegrees: the grid's cell size, at least 0.005 degrees.
    public init(cellDegrees: Double = 0.005) {
        precondition(cellDegrees >= 0.005 && cellDegrees <= 360, "cellDegrees must be within 0.005...360")
        self.cellDegrees = cellDegrees
        grid = Grid(cellDegrees: cellDegrees)
    }

    /// How many regions are monitored.
    public var count: Int { tracked.count }

    /// The monitored regions, in no particular order.
    public var regions: [Region] { slots.compactMap { $0?.region } }

    /// Whether a region with `id` is monitored.
    public func contains(_ id: String) -> Bool { tracked[id] != nil }

    /// Makes room for `count` regions, so adding many (an import, a restart) does not grow the
    /// storage step by step.
    public mutating func reserveCapacity(_ count: Int) {
        slots.reserveCapacity(count)
        tracked.reserveCapacity(count)
        newWords.reserveCapacity(count * 4)
    }

    /// Starts monitoring `region`, replacing one with the same id.
    public mutating func add(_ region: Region) {
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = Tracked(region: region)
        } else {
            slot = Int32(slots.count)
            slots.append(Tracked(region: region))
        }
        let grid = self.grid
        grid.forEachCell(of: region) { newWords.append($0 << 32 | UInt64(UInt32(slot))) }
        // One hash lookup: a region with the same id is retired in the same step.
        if let old = tracked.updateValue(slot, forKey: region.id) { retire(old) }
        activate(slot)
    }

    /// Stops monitoring the region with `id`. Returns whether there was one.
    @discardableResult
    public mutating func remove(_ id: String) -> Bool {
        guard let slot = tracked.removeValue(forKey: id) else { return false }
        retire(slot)
        return true
    }

    /// Empties a slot whose region was removed or replaced.
    private mutating func retire(_ slot: Int32) {
        guard let entry = slots[Int(slot)] else { return }
        var n = 0
        grid.forEachCell(of: entry.region) { _ in n += 1 }
        stalePairs += n
        if entry.state == .inside { insideVersion &+= 1 }
        slots[Int(slot)] = nil
        // The slot is reused only after a rebuild drops its index pairs.
    }

    /// Regions that are inside (with when they were entered), for persistence. Every other
    /// region whose state is known is outside.
    ///
    /// - Complexity: O(regions inside, pending or unknown), not O(all).
    public var insideRegions: [(id: String, enteredAt: Double?, dwellReported: Bool)] {
        active.compactMap { s in
            guard let e = slots[Int(s)], e.state == .inside else { return nil }
            return (e.region.id, e.enteredAt, e.dwellReported)
        }
    }

    /// Whether every region has a known state (none unknown).
    public var allStatesKnown: Bool {
        !active.contains { slots[Int($0)]?.state == .unknown }
    }

    /// Restores states saved from ``insideRegions``: the listed regions are inside, every other
    /// monitored region outside.
    public mutating func restoreStates(inside: [(id: String, enteredAt: Double?, dwellReported: Bool)]) {
        let insideIDs = Dictionary(inside.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var stillActive: [Int32] = []
        for s in active {
            guard var e = slots[Int(s)] else { continue }
            if let saved = insideIDs[e.region.id] {
                e.state = .inside
                e.enteredAt = saved.enteredAt
                e.dwellReported = saved.dwellReported
                stillActive.append(s)
            } else {
                e.state = .outside
                e.isActive = false
            }
            e.pending = nil
            slots[Int(s)] = e
        }
        active = stillActive
        insideVersion &+= 1
    }

    /// The current state of a region (``RegionState/unknown`` for an unknown id), like
    /// CoreLocation's `requestState(for:)`.
    public func state(for id: String) -> RegionState {
        guard let slot = tracked[id], let entry = slots[Int(slot)] else { return .unknown }
        return entry.state
    }

    private mutating func activate(_ slot: Int32) {
        guard slots[Int(slot)]?.isActive == false else { return }
        slots[Int(slot)]!.isActive = true
        active.append(slot)
    }

    /// Merges new words into the sorted index, dropping removed regions' words when many.
    private mutating func updateIndex() {
        if stalePairs > 0 && stalePairs * 4 > index.count + newWords.count {
            var total = 0
            for entry in slots { if let entry { grid.forEachCell(of: entry.region) { _ in total += 1 } } }
            var words: [UInt64] = []
            words.reserveCapacity(total)
            for (i, entry) in slots.enumerated() {
                guard let entry else { continue }
                grid.forEachCell(of: entry.region) { words.append($0 << 32 | UInt64(i)) }
            }
            index = []
            newWords = []
            words.sort()
            index = words
            stalePairs = 0
            freeSlots = slots.indices.filter { slots[$0] == nil }.map { Int32($0) }.reversed()
            cachedCell = .max
            return
        }
        guard !newWords.isEmpty else { return }
        newWords.sort()
        if index.isEmpty {
            // Exactly the final size: no growth slack left resident.
            index.reserveCapacity(newWords.count)
            index.append(contentsOf: newWords)
        } else {
            // Merge from the back, in place.
            let old = index.count
            index.reserveCapacity(old + newWords.count)
            index.append(contentsOf: repeatElement(0, count: newWords.count))
            var a = old - 1, b = newWords.count - 1, out = index.count - 1
            while b >= 0 {
                if a >= 0 && index[a] > newWords[b] {
                    index[out] = index[a]
                    a -= 1
                } else {
                    index[out] = newWords[b]
                    b -= 1
                }
                out -= 1
            }
        }
        newWords = []
        cachedCell = .max
    }

    /// The index positions of `cell`'s words.
    private func range(of cell: UInt64) -> Range<Int> {
        let key = cell << 32
        var lo = 0, hi = index.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if index[mid] < key { lo = mid + 1 } else { hi = mid }
        }
        var end = lo
        while end < index.count && index[end] >> 32 == cell { end += 1 }
        return lo..<end
    }

    /// The events `location` causes.
    public mutating func process(_ location: Location) -> [Event] {
        guard location.horizontalAccuracy >= 0 else { return [] }
        updateIndex()
        round &+= 1
        let cell = grid.cellNumber(latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)
        if cell != cachedCell {
            cachedRange = range(of: cell)
            cachedCell = cell
        }
        // The slots are taken out for the round and read in place through a pointer (no copy of
        // an entry per field read), then put back.
        var storage: [Tracked?] = []
        swap(&storage, &slots)
        defer { swap(&storage, &slots) }
        return storage.withUnsafeMutableBufferPointer { buffer in
            evaluate(location, entries: buffer.baseAddress!)
        }
    }

    private mutating func evaluate(_ location: Location, entries: UnsafeMutablePointer<Tracked?>) -> [Event] {
        var events: [Event] = []
        let t = location.timestamp
        let margin = max(location.horizontalAccuracy, minimumMargin)
        let rules = Rules(minimumDuration: minimumDuration, reportDistance: firstStateReportDistance)
        let lat = location.coordinate.latitude, lon = location.coordinate.longitude
        let k = Geodesy.meanRadius * .pi / 180
        let kx = k * cos(lat * .pi / 180)
        var version = insideVersion
        // Candidates: the regions indexed in the location's cell.
        for i in cachedRange {
            let slot = Int(truncatingIfNeeded: index[i] & 0xFFFF_FFFF)
            if case .none = entries[slot] { continue }
            entries[slot]!.visited = round
            // Cheap test first: circles clearly outside need no exact distance (squared planar
            // distance in a local projection; the exact one only near the edge).
            var evidence: RegionState?
            var distance = 0.0
            if case .circle(let c, let r) = entries[slot]!.region.shape {
                let dy = (lat - c.latitude) * k
                var dLon = lon - c.longitude
                if dLon > 180 || dLon < -180 { dLon = Geodesy.normalizeLongitude(dLon) }
                let dx = dLon * kx
                let far = r + margin + 1
                let d2 = dx * dx + dy * dy
                if d2 > far * far * 1.0201 {
                    if entries[slot]!.state == .outside && entries[slot]!.pending == nil { continue }
                    let approx = d2.squareRoot()
                    if approx - r > margin + 0.01 * approx + 1 {
                        evidence = .outside
                        distance = approx - r
                    }
                }
            }
            if evidence == nil {
                let d = entries[slot]!.region.signedDistance(to: location.coordinate)
                distance = d
                evidence = d <= -margin ? .inside : (d >= margin ? .outside : nil)
            }
            if let evidence {
                if evidence == .outside && entries[slot]!.state == .outside && entries[slot]!.pending == nil { continue }
                let certain = entries[slot]!.state == .unknown
                events += Self.settle(&entries[slot]!, evidence: evidence, distanceCertain: certain,
                                      distance: distance, time: t, rules: rules, version: &version)
            } else {
                // In the band at the edge: no evidence, and the wait for a transition restarts.
                entries[slot]!.pending = nil
            }
            // Dwell.
            if entries[slot]!.state == .inside, let delay = entries[slot]!.region.loiteringDelay,
               let since = entries[slot]!.enteredAt, !entries[slot]!.dwellReported, t - since >= delay
            {
                entries[slot]!.dwellReported = true
                version &+= 1
                events.append(.dwell(entries[slot]!.region.id, time: t))
            }
            if (entries[slot]!.state != .outside || entries[slot]!.pending != nil) && !entries[slot]!.isActive {
                entries[slot]!.isActive = true
                active.append(Int32(slot))
            }
        }
        // Active regions (inside, pending, unknown) not in this cell: evaluated exactly; the
        // location is outside their bounds, so the evidence is outside or none.
        var stillActive: [Int32] = []
        stillActive.reserveCapacity(active.count)
        for s in active {
            let slot = Int(s)
            if case .none = entries[slot] { continue }
            if entries[slot]!.visited != round {
                let d = entries[slot]!.region.signedDistance(to: location.coordinate)
                if d >= margin {
                    events += Self.settle(&entries[slot]!, evidence: .outside, distanceCertain: true, distance: d,
                                          time: t, rules: rules, version: &version)
                } else {
                    entries[slot]!.pending = nil
                }
            }
            if entries[slot]!.state != .outside || entries[slot]!.pending != nil {
                stillActive.append(s)
            } else {
                entries[slot]!.isActive = false
            }
        }
        active = stillActive
        insideVersion = version
        return events
    }

    struct Rules {
        var minimumDuration: Double
        var reportDistance: Double
    }

    /// Applies one piece of evidence with the hold-time rule; `distance` is the signed distance to
    /// the boundary (or an estimate, far outside).
    private static func settle(_ entry: inout Tracked, evidence: RegionState, distanceCertain: Bool,
                               distance: Double, time t: Double, rules: Rules, version insideVersion: inout UInt64)
        -> [Event]
    {
        if evidence == entry.state {
            entry.pending = nil
            return []
        }
        if entry.state == .unknown && distanceCertain {
            entry.state = evidence
            entry.pending = nil
            if evidence == .inside {
                insideVersion &+= 1
                return [.state(entry.region.id, evidence)]
            }
            return distance <= rules.reportDistance ? [.state(entry.region.id, evidence)] : []
        }
        if entry.pending != evidence {
            entry.pending = evidence
            entry.pendingSince = t
        }
        guard t - entry.pendingSince >= rules.minimumDuration else { return [] }
        let previous = entry.state
        entry.state = evidence
        entry.pending = nil
        if previous == .inside || evidence == .inside { insideVersion &+= 1 }
        let id = entry.region.id
        switch (previous, evidence) {
        case (.unknown, _):
            if evidence == .inside { entry.enteredAt = entry.pendingSince }
            return [.state(id, evidence)]
        case (.outside, .inside):
            // The entry happened when the evidence began, not when it was confirmed.
            entry.enteredAt = entry.pendingSince
            entry.dwellReported = false
            return entry.region.notifyOnEntry ? [.enter(id, time: entry.pendingSince)] : []
        case (.inside, .outside):
            entry.enteredAt = nil
            return entry.region.notifyOnExit ? [.exit(id, time: entry.pendingSince)] : []
        default:
            return []
        }
    }

}

/// Grid cells of ``RegionMonitor/cellDegrees``, numbered `row * columns + column`.
struct Grid: Sendable {
    let cellDegrees: Double
    let columns: UInt64

    init(cellDegrees: Double) {
        self.cellDegrees = cellDegrees
        columns = UInt64((360 / cellDegrees).rounded(.up))
    }

    /// The grid cell of a point.
    func cellNumber(latitude: Double, longitude: Double) -> UInt64 {
        let row = UInt64(max(0, ((latitude + 90) / cellDegrees).rounded(.down)))
        let lon = Geodesy.normalizeLongitude(longitude)
        let col = UInt64(max(0, ((lon + 180) / cellDegrees).rounded(.down))) % columns
        return row * columns + col
    }

    /// Calls `body` with each grid cell `region`'s bounds touch.
    func forEachCell(of region: Region, _ body: (UInt64) -> Void) {
        let raw = region.bounds
        // A hair wider than the bounds, for rounding at cell edges.
        let grow = 1e-7
        let b = (south: raw.south - grow, west: raw.west - grow, north: raw.north + grow, east: raw.east + grow)
        let columns = Int64(self.columns)
        let r0 = Int64(((max(-90, b.south) + 90) / cellDegrees).rounded(.down))
        let r1 = Int64(((min(90, b.north) + 90) / cellDegrees).rounded(.down))
        let c0 = Int64(((b.west + 180) / cellDegrees).rounded(.down))
        let c1 = Int64(((b.east + 180) / cellDegrees).rounded(.down))
        // A region near a pole can span every column: list it once per column, not more.
        let cEnd = min(max(c0, c1), c0 + columns - 1)
        for r in r0...r1 {
            for c in c0...cEnd {
                let wrapped = ((c % columns) + columns) % columns
                body(UInt64(r) * UInt64(columns) + UInt64(wrapped))
            }
        }
    }
}
