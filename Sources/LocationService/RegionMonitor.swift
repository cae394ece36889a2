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
/// as a sorted array of 12-byte pairs) keeps the cost of a location proportional to the regions
/// near it, not to how many are monitored. A location can only be evidence of *inside* for a
/// region whose bounds contain it, so only those are looked up; the few regions that are inside,
/// pending or unknown are always evaluated exactly.
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
    /// Grid cell size in degrees. The default is 0.005 (about 550 m north-south).
    public let cellDegrees: Double

    private var tracked: [String: Int32] = [:]
    private var slots: [Tracked?] = []
    private var freeSlots: [Int32] = []
    /// The index: (cell, slot) pairs sorted by cell, as two parallel arrays (12 bytes a pair).
    private var indexKeys: [Int64] = []
    private var indexSlots: [Int32] = []
    /// Pairs added since the last merge.
    private var newKeys: [Int64] = []
    private var newSlots: [Int32] = []
    /// Index pairs of removed regions, dropped at the next rebuild.
    private var stalePairs = 0
    /// Regions whose state is not a settled "outside" (inside, pending, or unknown).
    private var active: [Int32] = []
    private var round: UInt32 = 0

    public init(cellDegrees: Double = 0.005) {
        self.cellDegrees = cellDegrees
    }

    /// How many regions are monitored.
    public var count: Int { tracked.count }

    /// The monitored regions, in no particular order.
    public var regions: [Region] { slots.compactMap { $0?.region } }

    /// Makes room for `count` regions, so adding many (an import, a restart) does not grow the
    /// storage step by step.
    public mutating func reserveCapacity(_ count: Int) {
        slots.reserveCapacity(count)
        tracked.reserveCapacity(count)
        newKeys.reserveCapacity(count * 2)
        newSlots.reserveCapacity(count * 2)
    }

    /// Starts monitoring `region`, replacing one with the same id.
    public mutating func add(_ region: Region) {
        remove(region.id)
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = Tracked(region: region)
        } else {
            slot = Int32(slots.count)
            slots.append(Tracked(region: region))
        }
        for key in cellKeys(for: region) {
            newKeys.append(key)
            newSlots.append(slot)
        }
        tracked[region.id] = slot
        activate(slot)
    }

    /// Stops monitoring the region with `id`. Returns whether there was one.
    @discardableResult
    public mutating func remove(_ id: String) -> Bool {
        guard let slot = tracked.removeValue(forKey: id), let entry = slots[Int(slot)] else { return false }
        stalePairs += cellKeys(for: entry.region).count
        slots[Int(slot)] = nil
        // The slot is reused only after a rebuild drops its index pairs.
        return true
    }

    /// Regions that are inside (with when they were entered), for persistence. Every other
    /// region whose state is known is outside.
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

    /// Merges new pairs into the sorted index, dropping removed regions' pairs when many.
    private mutating func updateIndex() {
        if stalePairs > 0 && stalePairs * 4 > indexKeys.count + newKeys.count {
            var keys: [Int64] = []
            var owners: [Int32] = []
            for (i, entry) in slots.enumerated() {
                guard let entry else { continue }
                for key in cellKeys(for: entry.region) {
                    keys.append(key)
                    owners.append(Int32(i))
                }
            }
            indexKeys = keys
            indexSlots = owners
            newKeys = []
            newSlots = []
            stalePairs = 0
            freeSlots = slots.indices.filter { slots[$0] == nil }.map { Int32($0) }.reversed()
            sortIndex()
            return
        }
        guard !newKeys.isEmpty else { return }
        indexKeys += newKeys
        indexSlots += newSlots
        newKeys = []
        newSlots = []
        sortIndex()
    }

    private mutating func sortIndex() {
        // Stable by (cell, slot): a cell's regions come out in the order they were added.
        let order = indexKeys.indices.sorted {
            indexKeys[$0] != indexKeys[$1] ? indexKeys[$0] < indexKeys[$1] : indexSlots[$0] < indexSlots[$1]
        }
        indexKeys = order.map { indexKeys[$0] }
        indexSlots = order.map { indexSlots[$0] }
    }

    /// The first index position whose cell is not below `key`.
    private func lowerBound(_ key: Int64) -> Int {
        var lo = 0, hi = indexKeys.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if indexKeys[mid] < key { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The events `location` causes.
    public mutating func process(_ location: Location) -> [Event] {
        var events: [Event] = []
        let t = location.timestamp
        guard location.horizontalAccuracy >= 0 else { return [] }
        updateIndex()
        round &+= 1
        let margin = max(location.horizontalAccuracy, minimumMargin)
        let lat = location.coordinate.latitude, lon = location.coordinate.longitude
        let k = Geodesy.meanRadius * .pi / 180
        let kx = k * cos(lat * .pi / 180)
        // Candidates: the regions indexed in the location's cell.
        let key = cellKey(latitude: lat, longitude: lon)
        var i = lowerBound(key)
        while i < indexKeys.count && indexKeys[i] == key {
            let slot = Int(indexSlots[i])
            i += 1
            guard slots[slot] != nil else { continue }
            slots[slot]!.visited = round
            // Cheap test first: circles clearly outside need no exact distance.
            var evidence: RegionState?
            if case .circle(let c, let r) = slots[slot]!.region.shape {
                let dy = (lat - c.latitude) * k
                let dx = Geodesy.normalizeLongitude(lon - c.longitude) * kx
                let approx = (dx * dx + dy * dy).squareRoot()
                if approx - r > margin + 0.01 * approx + 1 { evidence = .outside }
            }
            if evidence == nil {
                let d = slots[slot]!.region.signedDistance(to: location.coordinate)
                evidence = d <= -margin ? .inside : (d >= margin ? .outside : nil)
            }
            if let evidence {
                if evidence == .outside && slots[slot]!.state == .outside && slots[slot]!.pending == nil { continue }
                let certain = slots[slot]!.state == .unknown
                events += Self.settle(&slots[slot]!, evidence: evidence, distanceCertain: certain, time: t,
                                      minimumDuration: minimumDuration)
            } else {
                // In the band at the edge: no evidence, and the wait for a transition restarts.
                slots[slot]!.pending = nil
            }
            // Dwell.
            if slots[slot]!.state == .inside, let delay = slots[slot]!.region.loiteringDelay,
               let since = slots[slot]!.enteredAt, !slots[slot]!.dwellReported, t - since >= delay
            {
                slots[slot]!.dwellReported = true
                events.append(.dwell(slots[slot]!.region.id, time: t))
            }
            if slots[slot]!.state != .outside || slots[slot]!.pending != nil { activate(Int32(slot)) }
        }
        // Active regions (inside, pending, unknown) not in this cell: evaluated exactly; the
        // location is outside their bounds, so the evidence is outside or none.
        var stillActive: [Int32] = []
        stillActive.reserveCapacity(active.count)
        for s in active {
            let slot = Int(s)
            guard slots[slot] != nil else { continue }
            if slots[slot]!.visited != round {
                let d = slots[slot]!.region.signedDistance(to: location.coordinate)
                if d >= margin {
                    events += Self.settle(&slots[slot]!, evidence: .outside, distanceCertain: true, time: t,
                                          minimumDuration: minimumDuration)
                } else {
                    slots[slot]!.pending = nil
                }
            }
            if slots[slot]!.state != .outside || slots[slot]!.pending != nil {
                stillActive.append(s)
            } else {
                slots[slot]!.isActive = false
            }
        }
        active = stillActive
        return events
    }

    /// Applies one piece of evidence with the hold-time rule.
    private static func settle(_ entry: inout Tracked, evidence: RegionState, distanceCertain: Bool, time t: Double,
                               minimumDuration: Double) -> [Event]
    {
        if evidence == entry.state {
            entry.pending = nil
            return []
        }
        if entry.state == .unknown && distanceCertain {
            entry.state = evidence
            entry.pending = nil
            return [.state(entry.region.id, evidence)]
        }
        if entry.pending != evidence {
            entry.pending = evidence
            entry.pendingSince = t
        }
        guard t - entry.pendingSince >= minimumDuration else { return [] }
        let previous = entry.state
        entry.state = evidence
        entry.pending = nil
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

    func cellKey(latitude: Double, longitude: Double) -> Int64 {
        let row = Int64(((latitude + 90) / cellDegrees).rounded(.down))
        let lon = Geodesy.normalizeLongitude(longitude)
        let col = Int64(((lon + 180) / cellDegrees).rounded(.down))
        return row << 32 | col
    }

    func cellKeys(for region: Region) -> [Int64] {
        let raw = region.bounds
        // A hair wider than the bounds, for rounding at cell edges.
        let grow = 1e-7
        let b = (south: raw.south - grow, west: raw.west - grow, north: raw.north + grow, east: raw.east + grow)
        let columns = Int64((360 / cellDegrees).rounded(.up))
        let r0 = Int64(((max(-90, b.south) + 90) / cellDegrees).rounded(.down))
        let r1 = Int64(((min(90, b.north) + 90) / cellDegrees).rounded(.down))
        let c0 = Int64(((b.west + 180) / cellDegrees).rounded(.down))
        let c1 = Int64(((b.east + 180) / cellDegrees).rounded(.down))
        var keys: [Int64] = []
        // A region near a pole can span every column: list it once per column, not more.
        let cEnd = min(max(c0, c1), c0 + columns - 1)
        for r in r0...r1 {
            for c in c0...cEnd {
                let wrapped = ((c % columns) + columns) % columns
                keys.append(r << 32 | wrapped)
            }
        }
        return keys
    }
}
