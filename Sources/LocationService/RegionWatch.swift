/// One region as a monitor watches it for one device: its state, the evidence pending, when it was
/// entered and whether its dwell was reported, with the rules that move them (``observe(signedDistance:margin:time:region:rules:version:events:)``).
///
/// ``RegionMonitor`` keeps one per region it monitors; the endpoint's geofences keep one per device
/// for the regions a device is not settled outside of. Both apply exactly these rules, so a trail
/// gives the same entries, exits and dwells on the device and on the server.
///
/// A value with no I/O and no clock: the time is the location's own.
public struct RegionWatch: Hashable, Sendable, Codable {
    /// What the region is for this device.
    public internal(set) var state: RegionState = .unknown
    /// The state the evidence points to, while it has not held for the minimum time.
    public internal(set) var pending: RegionState?
    /// When the pending evidence began (seconds since 1970); meaningful while ``pending`` is set.
    public internal(set) var pendingSince = 0.0
    /// When the device entered (the evidence's start), while inside.
    public internal(set) var enteredAt: Double?
    /// Whether the dwell of this visit was reported.
    public internal(set) var dwellReported = false

    /// A region never observed (``RegionState/unknown``).
    public init() {}

    /// A watch as saved: what ``RegionMonitor/restoreStates(inside:)`` and a store restore.
    public init(
        state: RegionState, pending: RegionState? = nil, pendingSince: Double = 0, enteredAt: Double? = nil,
        dwellReported: Bool = false
    ) {
        self.state = state
        self.pending = pending
        self.pendingSince = pendingSince
        self.enteredAt = enteredAt
        self.dwellReported = dwellReported
    }

    /// The monitor's settings the rules read.
    public struct Rules: Hashable, Sendable {
        /// Seconds the evidence for a new state must hold (``RegionMonitor/minimumDuration``).
        public var minimumDuration: Double
        /// A first state outside is reported within this many metres of the boundary
        /// (``RegionMonitor/firstStateReportDistance``).
        public var firstStateReportDistance: Double

        public init(minimumDuration: Double = 20, firstStateReportDistance: Double = 1000) {
            self.minimumDuration = minimumDuration
            self.firstStateReportDistance = firstStateReportDistance
        }
    }

    /// Whether a location deep inside changes nothing: settled inside with nothing pending and no
    /// dwell left to report for `region`.
    public func isQuietInside(_ region: borrowing Region) -> Bool {
        state == .inside && pending == nil && (region.loiteringDelay == nil || dwellReported)
    }

    /// Applies one location's evidence: inside when `signedDistance` (metres to the boundary,
    /// negative inside) is at most `-margin`, outside when at least `margin`, none in between (the
    /// wait for a transition restarts); then the dwell.
    ///
    /// - Parameters:
    ///   - margin: the location's accuracy, at least the monitor's minimum margin.
    ///   - time: the location's time, in seconds since 1970.
    ///   - region: the region watched (its id, notifications and loitering delay).
    ///   - version: counts changes to the inside set (``RegionMonitor/insideVersion``).
    ///   - events: where the events it causes are appended.
    public mutating func observe(
        signedDistance d: Double, margin: Double, time t: Double, region: borrowing Region, rules: Rules,
        version: inout UInt64, events: inout [RegionMonitor.Event]
    ) {
        if d <= -margin {
            settle(
                evidence: .inside, distance: d, time: t, region: region, rules: rules, version: &version,
                events: &events)
        } else if d >= margin {
            if state != .outside || pending != nil {
                settle(
                    evidence: .outside, distance: d, time: t, region: region, rules: rules, version: &version,
                    events: &events)
            }
        } else {
            // In the band at the edge: no evidence, and the wait for a transition restarts.
            pending = nil
        }
        checkDwell(time: t, region: region, version: &version, events: &events)
    }

    /// Reports a dwell once per visit, when inside for the region's loitering delay.
    private mutating func checkDwell(
        time t: Double, region: borrowing Region, version: inout UInt64, events: inout [RegionMonitor.Event]
    ) {
        if state == .inside, let delay = region.loiteringDelay, let since = enteredAt, !dwellReported,
            t - since >= delay
        {
            dwellReported = true
            version &+= 1
            events.append(.dwell(region.id, time: t))
        }
    }

    /// Applies one piece of evidence with the hold-time rule; `distance` is the signed distance to
    /// the boundary.
    private mutating func settle(
        evidence: RegionState, distance: Double, time t: Double, region: borrowing Region, rules: Rules,
        version insideVersion: inout UInt64, events: inout [RegionMonitor.Event]
    ) {
        if evidence == state {
            pending = nil
            return
        }
        if state == .unknown {
            // The first evidence settles the state at once; it is reported inside or nearby.
            state = evidence
            pending = nil
            if evidence == .inside {
                insideVersion &+= 1
                events.append(.state(region.id, evidence))
            } else if distance <= rules.firstStateReportDistance {
                events.append(.state(region.id, evidence))
            }
            return
        }
        if pending != evidence {
            pending = evidence
            pendingSince = t
        }
        guard t - pendingSince >= rules.minimumDuration else { return }
        let previous = state
        state = evidence
        pending = nil
        insideVersion &+= 1
        switch (previous, evidence) {
        case (.outside, .inside):
            // The entry happened when the evidence began, not when it was confirmed.
            enteredAt = pendingSince
            dwellReported = false
            if region.notifyOnEntry { events.append(.enter(region.id, time: pendingSince)) }
        case (.inside, .outside):
            enteredAt = nil
            if region.notifyOnExit { events.append(.exit(region.id, time: pendingSince)) }
        default:
            preconditionFailure("a settled region moves between inside and outside only")
        }
    }
}
