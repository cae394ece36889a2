import Geo

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
/// A grid index (cells of ``cellDegrees``; each region listed in every cell its bounds, widened by
/// ``indexMargin``, touch) keeps the cost of a location proportional to the regions near it, not to
/// how many are monitored. Locations less accurate than ``indexMargin`` (500 m) are no evidence for
/// any region.
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
        var cells: [Int64] = []
    }

    /// Seconds the evidence for a new state must hold. The default is 20.
    public var minimumDuration: Double = 20
    /// The smallest margin in metres, whatever the accuracy. The default is 5.
    public var minimumMargin: Double = 5
    /// Grid cell size in degrees. The default is 0.05 (about 5.5 km north-south).
    public let cellDegrees: Double
    /// How far beyond its bounds a region is indexed, in metres; also the worst accuracy used as
    /// evidence. 500.
    public static let indexMargin: Double = 500

    private var tracked: [String: Int] = [:]
    private var slots: [Tracked?] = []
    private var freeSlots: [Int] = []
    private var cells: [Int64: [Int32]] = [:]
    /// Regions whose state is not a settled "outside" (inside, pending or unknown near a fix).
    private var active: Set<Int> = []
    private var lastTimestamp: Double?

    public init(cellDegrees: Double = 0.05) {
        self.cellDegrees = cellDegrees
    }

    /// How many regions are monitored.
    public var count: Int { tracked.count }

    /// The monitored regions, in no particular order.
    public var regions: [Region] { slots.compactMap { $0?.region } }

    /// Starts monitoring `region`, replacing one with the same id.
    public mutating func add(_ region: Region) {
        remove(region.id)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = slots.count
            slots.append(nil)
        }
        var entry = Tracked(region: region)
        entry.cells = cellKeys(for: region)
        for key in entry.cells { cells[key, default: []].append(Int32(slot)) }
        slots[slot] = entry
        tracked[region.id] = slot
        active.insert(slot)
    }

    /// Stops monitoring the region with `id`. Returns whether there was one.
    @discardableResult
    public mutating func remove(_ id: String) -> Bool {
        guard let slot = tracked.removeValue(forKey: id), let entry = slots[slot] else { return false }
        for key in entry.cells {
            cells[key]?.removeAll { $0 == Int32(slot) }
            if cells[key]?.isEmpty == true { cells[key] = nil }
        }
        slots[slot] = nil
        freeSlots.append(slot)
        active.remove(slot)
        return true
    }

    /// The current state of a region (``RegionState/unknown`` for an unknown id), like
    /// CoreLocation's `requestState(for:)`.
    public func state(for id: String) -> RegionState {
        guard let slot = tracked[id], let entry = slots[slot] else { return .unknown }
        return entry.state
    }

    /// The events `location` causes.
    public mutating func process(_ location: Location) -> [Event] {
        var events: [Event] = []
        let t = location.timestamp
        guard location.horizontalAccuracy >= 0, location.horizontalAccuracy <= Self.indexMargin else { return [] }
        let margin = max(location.horizontalAccuracy, minimumMargin)
        // Candidates: regions in the location's cell (indexed by every cell their bounds touch),
        // plus every region not settled outside.
        var candidates = Set<Int>()
        if let near = cells[cellKey(latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)] {
            for s in near { candidates.insert(Int(s)) }
        }
        // Sorted: the same location always yields its events in the same order.
        let far = active.subtracting(candidates).sorted()
        for slot in far {
            // Not in this cell: outside by more than any margin that matters here.
            guard var entry = slots[slot] else { continue }
            events += settle(&entry, evidence: .outside, distanceCertain: true, time: t)
            slots[slot] = entry
            if entry.state == .outside && entry.pending == nil { active.remove(slot) }
        }
        for slot in candidates.sorted() {
            guard var entry = slots[slot] else { continue }
            let d = entry.region.signedDistance(to: location.coordinate)
            let evidence: RegionState? = d <= -margin ? .inside : (d >= margin ? .outside : nil)
            if let evidence {
                events += settle(&entry, evidence: evidence, distanceCertain: entry.state == .unknown, time: t)
            } else {
                // In the band at the edge: no evidence, and the wait for a transition restarts.
                entry.pending = nil
            }
            // Dwell.
            if entry.state == .inside, let delay = entry.region.loiteringDelay, let since = entry.enteredAt,
               !entry.dwellReported, t - since >= delay
            {
                entry.dwellReported = true
                events.append(.dwell(entry.region.id, time: t))
            }
            slots[slot] = entry
            if entry.state == .outside && entry.pending == nil { active.remove(slot) } else { active.insert(slot) }
        }
        lastTimestamp = t
        return events
    }

    /// Applies one piece of evidence with the hold-time rule.
    private func settle(_ entry: inout Tracked, evidence: RegionState, distanceCertain: Bool, time t: Double)
        -> [Event]
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
        let grow = Self.indexMargin / Geodesy.meanRadius * 180 / .pi
        let b = (south: raw.south - grow, west: raw.west - grow * 3, north: raw.north + grow, east: raw.east + grow * 3)
        let columns = Int64((360 / cellDegrees).rounded(.up))
        let r0 = Int64(((max(-90, b.south) + 90) / cellDegrees).rounded(.down))
        let r1 = Int64(((min(90, b.north) + 90) / cellDegrees).rounded(.down))
        let c0 = Int64(((b.west + 180) / cellDegrees).rounded(.down))
        let c1 = Int64(((b.east + 180) / cellDegrees).rounded(.down))
        var keys: [Int64] = []
        for r in r0...r1 {
            for c in c0...max(c0, c1) {
                let wrapped = ((c % columns) + columns) % columns
                keys.append(r << 32 | wrapped)
            }
        }
        return keys
    }
}
