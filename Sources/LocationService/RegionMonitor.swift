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
/// for a region whose bounds contain it, so only those are looked up: the last cell's circles are
/// kept in a small array of their own (a device stays in a cell for many fixes), and each gets a
/// cheap planar test before the exact distance, which only the circles the location may be inside
/// need. The few regions that are inside, pending or unknown are always evaluated exactly.
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
        /// The region's state and the rules that move it (the endpoint's geofences apply the same).
        var watch = RegionWatch()
        var isActive = false
        /// The cell (``RegionMonitor/cellEpoch``) whose candidates list this region.
        var cellMark: UInt32 = 0

        var state: RegionState {
            get { watch.state }
            set { watch.state = newValue }
        }
        var pending: RegionState? {
            get { watch.pending }
            set { watch.pending = newValue }
        }
        var enteredAt: Double? {
            get { watch.enteredAt }
            set { watch.enteredAt = newValue }
        }
        var dwellReported: Bool {
            get { watch.dwellReported }
            set { watch.dwellReported = newValue }
        }
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
    private let grid: RegionGrid

    private var tracked: [String: Int32] = [:]
    private var slots: [Tracked?] = []
    private var freeSlots: [Int32] = []
    /// The index: `cell << 32 | slot` words, sorted (a cell's regions in slot order).
    private var index: [UInt64] = []
    /// Words added since the last merge.
    private var newWords: [UInt64] = []
    /// Index words of removed regions, dropped at the next rebuild.
    private var stalePairs = 0
    /// Regions whose state is not a settled "outside" (inside, pending, or unknown), except those
    /// among ``cellCandidates`` (which carry their own flag while their cell is current).
    private var active: [Int32] = []
    /// The cell of the last location (`.max`: none) and its regions, until the index changes or a
    /// region is added, removed or restored.
    private var cachedCell: UInt64 = .max
    private var cellCandidates: [CellCandidate] = []
    /// The south-west corner of ``cachedCell``, and the longitude of its middle.
    private var cellSouth = 0.0
    private var cellWest = 0.0
    private var cellMidLongitude = 0.0
    /// The cell's candidates by sub-cell (``CellCandidate/subCells`` a side): those of sub-cell
    /// `n` are `subIndex[subStart[n]..<subStart[n + 1]]`, in the cell's order.
    private var subStart: [Int32] = []
    private var subIndex: [Int32] = []
    /// The candidates that are active (in the cell's order).
    private var cellActive: [Int32] = []
    /// Counts the cells whose candidates were listed (``Tracked/cellMark``).
    private var cellEpoch: UInt32 = 0
    /// Counts changes to what ``insideRegions`` returns (entries, exits, first states inside,
    /// dwells, restores): a saved copy is current while this has not moved.
    public private(set) var insideVersion: UInt64 = 0

    /// - Parameter cellDegrees: the grid's cell size, at least 0.005 degrees.
    public init(cellDegrees: Double = 0.005) {
        precondition(cellDegrees >= 0.005 && cellDegrees <= 360, "cellDegrees must be within 0.005...360")
        self.cellDegrees = cellDegrees
        grid = RegionGrid(cellDegrees: cellDegrees)
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
        dissolveCell()
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
        dissolveCell()
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
        allActive.compactMap { s in
            guard let e = slots[Int(s)], e.state == .inside else { return nil }
            return (e.region.id, e.enteredAt, e.dwellReported)
        }
    }

    /// Whether every region has a known state (none unknown).
    public var allStatesKnown: Bool {
        !allActive.contains { slots[Int($0)]?.state == .unknown }
    }

    /// Every region that is not settled outside.
    private var allActive: [Int32] {
        active + cellCandidates.lazy.filter(\.isActive).map(\.slot)
    }

    /// Restores states saved from ``insideRegions``: the listed regions are inside, every other
    /// monitored region outside.
    public mutating func restoreStates(inside: [(id: String, enteredAt: Double?, dwellReported: Bool)]) {
        dissolveCell()
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
            dissolveCell()
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
        dissolveCell()
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
        let cell = grid.cellNumber(latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)
        if cell != cachedCell {
            dissolveCell()
            listCandidates(of: cell)
        }
        // The slots are taken out for the round and read in place through a pointer (no copy of
        // an entry per field read), then put back; the same for the cell's candidates.
        var storage: [Tracked?] = []
        var candidates: [CellCandidate] = []
        swap(&storage, &slots)
        swap(&candidates, &cellCandidates)
        defer {
            swap(&storage, &slots)
            swap(&candidates, &cellCandidates)
        }
        return storage.withUnsafeMutableBufferPointer { entries in
            candidates.withUnsafeMutableBufferPointer { cell in
                evaluate(location, entries: entries.baseAddress!, candidates: cell)
            }
        }
    }

    /// Lists the regions of `cell` as the candidates of the locations in it: those whose bounds
    /// touch it (the index) and, for circles, that reach into it (a test on the cell's rectangle
    /// in a local projection, with the allowance of ``CellCandidate``). Their activity moves from
    /// ``active`` to their candidate's flag.
    private mutating func listCandidates(of cell: UInt64) {
        cellEpoch &+= 1
        let epoch = cellEpoch
        let positions = range(of: cell)
        let cd = cellDegrees
        let south = Double(cell / grid.columns) * cd - 90
        let west = Double(cell % grid.columns) * cd - 180
        let midLongitude = west + cd / 2
        let k = Geodesy.meanRadius * .pi / 180
        var out: [CellCandidate] = []
        out.reserveCapacity(positions.count)
        var markedActive = 0
        for i in positions {
            let slot = Int32(truncatingIfNeeded: index[i] & 0xFFFF_FFFF)
            guard let entry = slots[Int(slot)] else { continue }
            // Polygons, and circles the cheap test does not hold for, are evaluated exactly.
            var candidate = CellCandidate(latitude: 0, longitude: 0, radius: -1, slot: slot)
            if case .circle(let c, let r) = entry.region.shape, r <= CellCandidate.planarRadiusLimit,
                abs(c.latitude) <= CellCandidate.planarLatitudeLimit, cd <= CellCandidate.planarCellLimit
            {
                // The centre's longitude within 180° of the cell: no wrapping per location.
                var lon = c.longitude
                if lon - midLongitude > 180 { lon -= 360 } else if lon - midLongitude < -180 { lon += 360 }
                let dy = (c.latitude - min(max(c.latitude, south), south + cd)) * k
                let dx = (lon - min(max(lon, west), west + cd)) * k * cos(c.latitude * .pi / 180)
                let reach = r * 1.01 + 1
                // Out of reach of every location of the cell: not a candidate (active or not, it
                // is then evaluated with the regions elsewhere).
                if dx * dx + dy * dy > reach * reach { continue }
                candidate = CellCandidate(latitude: c.latitude, longitude: lon, radius: r, slot: slot)
                // The sub-cells it reaches, by the same test.
                let n = CellCandidate.subCells, sub = cd / Double(n)
                let kxC = k * cos(c.latitude * .pi / 180)
                var mask: UInt16 = 0
                for row in 0..<n {
                    let s0 = south + Double(row) * sub
                    let dy = (c.latitude - min(max(c.latitude, s0), s0 + sub)) * k
                    for column in 0..<n {
                        let w0 = west + Double(column) * sub
                        let dx = (lon - min(max(lon, w0), w0 + sub)) * kxC
                        if dx * dx + dy * dy <= reach * reach { mask |= 1 << UInt16(row * n + column) }
                    }
                }
                candidate.subCellMask = mask
            }
            candidate.set(isActive: entry.isActive, isQuietInside: Self.isQuietInside(entry))
            if entry.isActive { markedActive += 1 }
            slots[Int(slot)]!.cellMark = epoch
            out.append(candidate)
        }
        if markedActive > 0 {
            active.removeAll { slots[Int($0)]?.cellMark == epoch }
        }
        // The sub-cells' lists, counted then filled (each in the cell's order).
        let subs = CellCandidate.subCells * CellCandidate.subCells
        var start = [Int32](repeating: 0, count: subs + 1)
        cellActive = []
        for (i, c) in out.enumerated() {
            var mask = c.subCellMask
            while mask != 0 {
                start[mask.trailingZeroBitCount + 1] += 1
                mask &= mask - 1
            }
            if c.isActive { cellActive.append(Int32(i)) }
        }
        for s in 0..<subs { start[s + 1] += start[s] }
        var fill = start
        var list = [Int32](repeating: 0, count: Int(start[subs]))
        for (i, c) in out.enumerated() {
            var mask = c.subCellMask
            while mask != 0 {
                let s = mask.trailingZeroBitCount
                list[Int(fill[s])] = Int32(i)
                fill[s] += 1
                mask &= mask - 1
            }
        }
        subStart = start
        subIndex = list
        cellCandidates = out
        cachedCell = cell
        cellSouth = south
        cellWest = west
        cellMidLongitude = midLongitude
    }

    /// Forgets the current cell's candidates, their active regions back in ``active``.
    private mutating func dissolveCell() {
        guard cachedCell != .max else { return }
        for c in cellCandidates where c.isActive { active.append(c.slot) }
        cellCandidates = []
        subStart = []
        subIndex = []
        cellActive = []
        cachedCell = .max
    }

    /// Settled inside with nothing pending and no dwell to report: a location deep inside changes
    /// nothing for it.
    private static func isQuietInside(_ entry: borrowing Tracked) -> Bool {
        entry.watch.isQuietInside(entry.region)
    }

    private mutating func evaluate(
        _ location: Location, entries: UnsafeMutablePointer<Tracked?>,
        candidates: UnsafeMutableBufferPointer<CellCandidate>
    ) -> [Event] {
        var events: [Event] = []
        let t = location.timestamp
        let point = location.coordinate
        let margin = max(location.horizontalAccuracy, minimumMargin)
        let rules = RegionWatch.Rules(
            minimumDuration: minimumDuration, firstStateReportDistance: firstStateReportDistance)
        let lat = point.latitude
        // In the frame of the candidates' longitudes (within 180° of the cell's middle).
        var lon = point.longitude
        if lon - cellMidLongitude > 180 { lon -= 360 } else if lon - cellMidLongitude < -180 { lon += 360 }
        let k = Geodesy.meanRadius * .pi / 180
        let kx = k * cos(lat * .pi / 180)
        var version = insideVersion
        // Candidates: the regions of the location's cell. A location is evidence of *inside* only
        // within `radius - margin` of a circle's centre, of *outside* only beyond `radius + margin`.
        // The cheap test (planar distance in a local projection, with the allowance of
        // ``CellCandidate``) leaves out the circles whose state the location cannot change: one
        // settled outside that it is not inside, one settled inside that it is not outside of.
        // Those are not even read; the others get the exact distance when the planar one leaves
        // their evidence in doubt.
        // Only the candidates that reach the location's sub-cell are tested; one that does not is
        // out of the location's reach, which changes nothing for it unless it is active. Per
        // location, the cheap test of a candidate is one comparison (``CellCandidate/bound``).
        let n = CellCandidate.subCells
        let subDegrees = cellDegrees / Double(n)
        let row = min(n - 1, max(0, Int(((lat - cellSouth) / subDegrees).rounded(.down))))
        let column = min(n - 1, max(0, Int(((lon - cellWest) / subDegrees).rounded(.down))))
        let bit: UInt16 = 1 << UInt16(row * n + column)
        let marginTerm = 0.99 * margin
        let listed = Int(subStart[row * n + column])..<Int(subStart[row * n + column + 1])
        let activityChanged = withUnsafeTemporaryAllocation(of: Int32.self, capacity: listed.count + cellActive.count) {
            buffer -> Bool in
            var count = 0
            subIndex.withUnsafeBufferPointer { subIndex in
                for j in listed {
                    let i = subIndex[j]
                    let c = candidates[Int(i)]
                    let dy = (lat - c.latitude) * k
                    let dx = (lon - c.longitude) * kx
                    if c.sense * (dx * dx + dy * dy).squareRoot() > c.bound - marginTerm { continue }
                    buffer[count] = i
                    count += 1
                }
            }
            for i in cellActive where candidates[Int(i)].subCellMask & bit == 0 {
                buffer[count] = i
                count += 1
            }
            var due = UnsafeMutableBufferPointer(rebasing: buffer[0..<count])
            // In the cell's order, as evaluating every candidate would report them.
            if count > 1 { due.sort() }
            return Self.evaluate(
                due, candidates: candidates, entries: entries, point: point,
                planar: (latitude: lat, longitude: lon, k: k, kx: kx), time: t, margin: margin,
                rules: rules, version: &version, events: &events)
        }
        if activityChanged {
            cellActive.removeAll(keepingCapacity: true)
            for i in candidates.indices where candidates[i].isActive { cellActive.append(Int32(i)) }
        }
        evaluateElsewhere(
            point, entries: entries, time: t, margin: margin, rules: rules, version: &version,
            events: &events)
        insideVersion = version
        return events
    }

    /// Evaluates the candidates `due` (exactly unless the planar distance is certain); returns
    /// whether any became active or settled outside.
    private static func evaluate(
        _ due: UnsafeMutableBufferPointer<Int32>, candidates: UnsafeMutableBufferPointer<CellCandidate>,
        entries: UnsafeMutablePointer<Tracked?>, point: Coordinate,
        planar p: (latitude: Double, longitude: Double, k: Double, kx: Double), time t: Double, margin: Double,
        rules: RegionWatch.Rules, version: inout UInt64, events: inout [Event]
    ) -> Bool {
        var activityChanged = false
        for i32 in due {
            let i = Int(i32)
            let c = candidates[i]
            let slot = Int(c.slot)
            if case .none = entries[slot] { continue }
            let dy = (p.latitude - c.latitude) * p.k
            let dx = (p.longitude - c.longitude) * p.kx
            let planar =
                c.radius >= 0
                ? PlanarEvidence(squaredDistance: dx * dx + dy * dy, radius: c.radius, margin: margin)
                : PlanarEvidence.unsure
            Self.evaluate(
                &entries[slot]!, at: point, planar: planar, time: t, margin: margin, rules: rules,
                version: &version, events: &events)
            let isActive = entries[slot]!.state != .outside || entries[slot]!.pending != nil
            entries[slot]!.isActive = isActive
            let quiet = entries[slot]!.watch.isQuietInside(entries[slot]!.region)
            if isActive != c.isActive { activityChanged = true }
            candidates[i].set(isActive: isActive, isQuietInside: quiet)
        }
        return activityChanged
    }

    /// Active regions (inside, pending, unknown) elsewhere, out of the cell's reach: exactly. Kept
    /// in place: those that settled outside leave the list.
    private mutating func evaluateElsewhere(
        _ point: Coordinate, entries: UnsafeMutablePointer<Tracked?>,
        time t: Double, margin: Double, rules: RegionWatch.Rules, version: inout UInt64,
        events: inout [Event]
    ) {
        var kept = 0
        for i in active.indices {
            let s = active[i]
            let slot = Int(s)
            if case .none = entries[slot] { continue }
            Self.evaluate(
                &entries[slot]!, at: point, planar: .unsure, time: t, margin: margin, rules: rules,
                version: &version, events: &events)
            if entries[slot]!.state != .outside || entries[slot]!.pending != nil {
                active[kept] = s
                kept += 1
            } else {
                entries[slot]!.isActive = false
            }
        }
        active.removeLast(active.count - kept)
    }

    /// What the cheap test tells of a location's evidence for a circle, when it is certain.
    enum PlanarEvidence {
        case inside, outside, band, unsure

        /// From the squared planar distance to the centre, with the allowance of ``CellCandidate``.
        init(squaredDistance d2: Double, radius r: Double, margin m: Double) {
            let inner = (r - m - 1) * 0.99
            let outer = (r + m) * 1.01 + 1
            let bandLow = max(0, r - m) * 1.01 + 1
            let bandHigh = (r + m) * 0.99 - 1
            if inner > 0 && d2 <= inner * inner {
                self = .inside
            } else if d2 >= outer * outer {
                self = .outside
            } else if d2 > bandLow * bandLow && bandHigh > 0 && d2 < bandHigh * bandHigh {
                self = .band
            } else {
                self = .unsure
            }
        }
    }

    /// One region's evidence from a location: the hold-time rule, then dwell. The exact distance
    /// is computed when the cheap test is unsure, or for a first state (its distance decides
    /// whether it is reported).
    private static func evaluate(
        _ entry: inout Tracked, at point: Coordinate, planar: PlanarEvidence, time t: Double,
        margin: Double, rules: RegionWatch.Rules, version: inout UInt64, events: inout [Event]
    ) {
        let d: Double
        switch planar {
        case .inside where entry.state != .unknown: d = -margin
        case .outside where entry.state != .unknown: d = margin
        case .band where entry.state != .unknown: d = 0
        default: d = entry.region.signedDistance(to: point)
        }
        entry.watch.observe(
            signedDistance: d, margin: margin, time: t, region: entry.region,
            rules: rules,
            version: &version, events: &events)
    }
}

/// A region of the current grid cell, with a circle's centre and radius copied out of its slot so
/// the cheap test reads one small contiguous array.
///
/// The cheap tests measure in an equirectangular projection about the location (or, for the cell,
/// about the centre) and allow 1 % + 1 m for its error. That holds for circles of at most
/// ``planarRadiusLimit`` centred at most ``planarLatitudeLimit`` from the equator in cells of at
/// most ``planarCellLimit``: the distances compared are then under 15 km, where the projection
/// errs by about tan(70°) × 15 km / 6,371 km / 2 ≈ 0.3 %. Other regions always get the exact test.
struct CellCandidate: Sendable {
    static let planarRadiusLimit = 10_000.0
    static let planarLatitudeLimit = 70.0
    static let planarCellLimit = 0.05
    /// A cell is divided into this many sub-cells a side, each listing the candidates that reach it.
    static let subCells = 4

    var latitude: Double
    /// The centre's longitude, within 180° of the cell's middle (not wrapped).
    var longitude: Double
    /// The circle's radius in metres; negative for a region that always gets the exact test.
    var radius: Double
    var slot: Int32
    /// Whether the region is not settled outside (inside, pending, unknown): its ``Tracked/isActive``
    /// while the cell is current.
    private(set) var isActive = false
    /// Settled inside with nothing pending and no dwell to report.
    private(set) var isQuietInside = false
    /// The cheap test leaves the candidate out when `sense × distance > bound - 0.99 × margin`
    /// (planar distance to the centre, metres). Settled outside (sense 1, bound 1.01 × radius + 1):
    /// the location is not within `1.01 × (radius - margin) + 1`, so not inside by the margin.
    /// Quiet inside (sense -1, bound -(0.99 × radius - 1)): it is within `0.99 × (radius + margin)
    /// - 1`, so not outside by the margin. Otherwise (sense 0, bound +∞) never left out.
    private(set) var sense = 0.0
    private(set) var bound = Double.infinity
    /// The sub-cells of the cell the circle reaches (bit `row × subCells + column`); all for
    /// regions without the cheap test.
    var subCellMask: UInt16 = .max

    mutating func set(isActive: Bool, isQuietInside: Bool) {
        self.isActive = isActive
        self.isQuietInside = isQuietInside
        if radius >= 0 && isQuietInside {
            sense = -1
            bound = -(0.99 * radius - 1)
        } else if radius >= 0 && !isActive {
            sense = 1
            bound = 1.01 * radius + 1
        } else {
            sense = 0
            bound = .infinity
        }
    }
}
/// Grid cells of ``RegionMonitor/cellDegrees``, numbered `row * columns + column`: the index the
/// monitor keeps its regions in, and the endpoint its geofences.
public struct RegionGrid: Sendable {
    public let cellDegrees: Double
    public let columns: UInt64

    public init(cellDegrees: Double) {
        self.cellDegrees = cellDegrees
        columns = UInt64((360 / cellDegrees).rounded(.up))
    }

    /// The grid cell of a point.
    public func cellNumber(latitude: Double, longitude: Double) -> UInt64 {
        let row = UInt64(max(0, ((latitude + 90) / cellDegrees).rounded(.down)))
        let lon = Geodesy.normalizeLongitude(longitude)
        let col = UInt64(max(0, ((lon + 180) / cellDegrees).rounded(.down))) % columns
        return row * columns + col
    }

    /// The cells a region's bounds touch: rows by columns, the columns wrapping round the
    /// antimeridian.
    public struct Span: Hashable, Sendable {
        let rows: ClosedRange<Int64>
        let firstColumn: Int64
        let lastColumn: Int64
        let columns: Int64

        /// How many cells.
        public var count: Int { rows.count * Int(lastColumn - firstColumn + 1) }

        /// Whether `cell` is one of them.
        public func contains(_ cell: UInt64) -> Bool {
            let row = Int64(cell / UInt64(columns)), column = Int64(cell % UInt64(columns))
            guard rows.contains(row) else { return false }
            let offset = (((column - firstColumn) % columns) + columns) % columns
            return offset <= lastColumn - firstColumn
        }
    }

    /// The cells `region`'s bounds touch (a hair wider, for rounding at cell edges).
    public func span(of region: Region) -> Span {
        let raw = region.bounds
        let grow = 1e-7
        let b = (south: raw.south - grow, west: raw.west - grow, north: raw.north + grow, east: raw.east + grow)
        let columns = Int64(self.columns)
        let r0 = Int64(((max(-90, b.south) + 90) / cellDegrees).rounded(.down))
        let r1 = Int64(((min(90, b.north) + 90) / cellDegrees).rounded(.down))
        let c0 = Int64(((b.west + 180) / cellDegrees).rounded(.down))
        let c1 = Int64(((b.east + 180) / cellDegrees).rounded(.down))
        // A region near a pole can span every column: list it once per column, not more.
        let cEnd = min(max(c0, c1), c0 + columns - 1)
        return Span(rows: r0...max(r0, r1), firstColumn: c0, lastColumn: cEnd, columns: columns)
    }

    /// Calls `body` with each grid cell `region`'s bounds touch.
    public func forEachCell(of region: Region, _ body: (UInt64) -> Void) {
        let span = span(of: region)
        let columns = span.columns
        for r in span.rows {
            for c in span.firstColumn...span.lastColumn {
                let wrapped = ((c % columns) + columns) % columns
                body(UInt64(r) * UInt64(columns) + UInt64(wrapped))
            }
        }
    }
}
