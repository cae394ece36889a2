import Formats
import LocationService

/// The rules the endpoint evaluates a device's locations with.
public struct EventRules: Hashable, Sendable {
    /// The geofences' settings (the device's monitor's).
    public var geofences = GeofenceState.Rules()
    /// The device's speed limit, if any (a per-device limit or the global one: the caller picks).
    public var overspeed: OverspeedRule?
    /// Low battery, if reported. The default reports a fall to 20 %.
    public var battery: BatteryRule? = BatteryRule()
    /// A location up to this many seconds older than the device's newest evaluated one is still
    /// evaluated in its time order (uploads that overtake each other). The default is 30.
    public var reorderWindow = 30.0
    /// The most locations kept for that. The default is 16.
    public var reorderRecords = 16

    public init() {}
}

/// What one device's stored locations have decided so far, kept by the store with each batch
/// (``encoded()``; a few kilobytes at most): the geofences' watches, the overspeed and battery
/// episodes, and the newest locations (the reorder window).
///
/// ``evaluate(_:device:geofences:rules:)`` takes the records a batch stored (new ones only) and
/// returns the events they cause, in a device's time order whatever order they arrived in:
///
/// - The newest locations (``EventRules/reorderWindow`` seconds, at most
///   ``EventRules/reorderRecords``: 30 s and 16 by default) are kept with the state before them. A location that falls
///   among them (an upload overtaken by the next) is put in its place and the window is evaluated
///   again from that state; what was decided and reported already is not reported again: per kind
///   and geofence, only decisions past the number already reported are new events.
/// - A location older than the window (``Evaluation/late``) is stored but not evaluated: the state
///   has moved past its time, and a crossing it would have decided has been decided without it or
///   is lost. The count says how often.
/// - An event is reported once: a batch stored twice gives nothing the second time (its records
///   are not new), and a re-evaluation gives the same ids (derived from the deciding record's key).
///
/// The device's own region, visit and trip records are events as they are (``DeviceEvent/reported(by:)``),
/// in any order.
public struct DeviceEventState: Hashable, Sendable {
    /// What the rules remember, as of a point in the device's time.
    struct Rules: Hashable, Sendable {
        var geofences = GeofenceState()
        var overspeed = OverspeedRule.State()
        var battery = BatteryRule.State()
        /// The time and key of the last location folded in: those that do not come after it are late.
        var time: Double?
        var key: String?
    }

    /// A location of the window.
    struct Located: Hashable, Sendable {
        var key: String
        var time: Double
        var latitude: Double
        var longitude: Double
        var accuracy: Double?
        var speed: Double?
        var battery: Double?

        func precedes(_ other: Located) -> Bool { (time, key) < (other.time, other.key) }
    }

    /// An event reported for a location of the window: its kind, geofence and deciding location.
    struct Reported: Hashable, Sendable {
        var kind: EventKind
        var subject: String?
        var time: Double
        var key: String
    }

    /// The state before the window.
    var settled = Rules()
    /// The newest locations, in time order (then key).
    var window: [Located] = []
    /// The events reported for the window's locations.
    var reported: [Reported] = []

    public init() {}

    /// The time of the newest location folded into the settled state (older than the reorder
    /// window), or `nil` when none: a location at or before it is late. A store that reads a device's
    /// records back to evaluate them reads those from this time on (those of the window again are
    /// recognised by their keys).
    public var settledTime: Double? { settled.time }

    /// What one evaluation found.
    public struct Evaluation: Hashable, Sendable {
        /// The new events, in the device's time order.
        public var events: [DeviceEvent] = []
        /// Locations older than the reorder window: stored, not evaluated.
        public var late = 0
        /// Locations evaluated (taken into the window).
        public var evaluated = 0
    }

    /// The geofences `device` is inside, as of its newest evaluated location.
    public func inside(device: String, geofences: GeofenceSet, rules: EventRules) -> [String] {
        var copy = self
        copy.fold(geofences: geofences, rules: rules, device: device, count: window.count)
        return copy.settled.geofences.inside
    }

    /// Takes the records of `device` a batch stored (new ones only, any order; records of one device
    /// only: a program's error otherwise); returns the events they cause.
    public mutating func evaluate(
        _ records: [KeyedRecord], device: String, geofences: GeofenceSet, rules: EventRules
    ) -> Evaluation {
        var result = Evaluation()
        var reportedByDevice: [DeviceEvent] = []
        var added = false
        for keyed in records {
            let r = keyed.record
            precondition(r.device == device, "a record of another device in a device's evaluation")
            guard r.kind == .location || r.kind == .heartbeat else {
                if let e = DeviceEvent.reported(by: keyed) { reportedByDevice.append(e) }
                continue
            }
            guard r.valid else { continue }
            let located = Located(
                key: keyed.key, time: r.time, latitude: r.latitude, longitude: r.longitude,
                accuracy: r.horizontalAccuracy, speed: r.speed, battery: r.batteryPercent)
            if let t = settled.time, let k = settled.key,
                !Located(key: k, time: t, latitude: 0, longitude: 0).precedes(located)
            {
                result.late += 1
                continue
            }
            let at = window.partitioningIndex { !$0.precedes(located) }
            if at < window.count && window[at].key == located.key { continue }
            window.insert(located, at: at)
            result.evaluated += 1
            added = true
        }
        if added {
            // The locations that leave the window after this batch: the oldest past its size or age.
            let newest = window.last!.time
            var count = max(0, window.count - rules.reorderRecords)
            while count < window.count && window[count].time < newest - rules.reorderWindow { count += 1 }
            result.events = replay(device: device, geofences: geofences, rules: rules, folding: count)
        }
        result.events = (result.events + reportedByDevice).sorted {
            ($0.decidedAt ?? $0.time, $0.kind, $0.subject ?? "") < ($1.decidedAt ?? $1.time, $1.kind, $1.subject ?? "")
        }
        return result
    }

    /// Evaluates the window from the settled state; returns the decisions not reported yet, and
    /// records them as reported; then the first `count` locations leave the window, the state after
    /// them the settled one.
    private mutating func replay(device: String, geofences: GeofenceSet, rules: EventRules, folding count: Int)
        -> [DeviceEvent]
    {
        var state = settled
        var folded = settled
        var decided: [(Reported, DeviceEvent)] = []
        for (i, located) in window.enumerated() {
            decided += Self.apply(located, to: &state, device: device, geofences: geofences, rules: rules)
            if i == count - 1 { folded = state }
        }
        // Per kind and geofence, the first as many decisions as were reported are those; the rest are new.
        var already: [String: Int] = [:]
        for r in reported { already[Self.group(r), default: 0] += 1 }
        var new: [DeviceEvent] = []
        var kept: [Reported] = []
        for (mark, event) in decided {
            let g = Self.group(mark)
            if let n = already[g], n > 0 {
                already[g] = n - 1
            } else {
                new.append(event)
            }
            kept.append(mark)
        }
        // Reported decisions the window no longer makes stay reported (they were delivered): a later
        // decision of their kind and geofence is matched with them, not told again.
        var leftover = already
        for r in reported where (leftover[Self.group(r)] ?? 0) > 0 {
            leftover[Self.group(r)]! -= 1
            kept.append(r)
        }
        reported = kept
        if count > 0 {
            settled = folded
            forget(count)
        }
        return new
    }

    /// Drops the first `count` locations of the window (their state folded in) and what was
    /// reported for them.
    private mutating func forget(_ count: Int) {
        let last = window[count - 1]
        window.removeFirst(count)
        reported.removeAll { !last.precedes(Located(key: $0.key, time: $0.time, latitude: 0, longitude: 0)) }
    }

    /// Moves the first `count` locations of the window into the settled state.
    private mutating func fold(geofences: GeofenceSet, rules: EventRules, device: String, count: Int) {
        guard count > 0 else { return }
        for located in window.prefix(count) {
            _ = Self.apply(located, to: &settled, device: device, geofences: geofences, rules: rules)
        }
        forget(count)
    }

    static func group(_ r: Reported) -> String { r.kind.rawValue + "\u{0}" + (r.subject ?? "") }

    /// One location through every rule.
    static func apply(
        _ l: Located, to state: inout Rules, device: String, geofences: GeofenceSet, rules: EventRules
    ) -> [(Reported, DeviceEvent)] {
        var out: [(Reported, DeviceEvent)] = []
        func add(_ kind: EventKind, _ subject: String?, time: Double, _ details: DeviceEvent.Details) {
            let event = DeviceEvent(
                id: EventID.make(device: device, kind: kind, subject: subject, cause: l.key), device: device,
                kind: kind,
                time: time, decidedAt: l.time > time ? l.time : nil, latitude: l.latitude, longitude: l.longitude,
                details: details)
            out.append((Reported(kind: kind, subject: subject, time: l.time, key: l.key), event))
        }
        for e in state.geofences.evaluate(
            latitude: l.latitude, longitude: l.longitude, accuracy: l.accuracy, time: l.time, device: device,
            in: geofences, rules: rules.geofences)
        {
            switch e {
            case .enter(let name, let t): add(.geofenceEnter, name, time: t, .geofence(name))
            case .exit(let name, let t): add(.geofenceExit, name, time: t, .geofence(name))
            case .dwell(let name, let t): add(.geofenceDwell, name, time: t, .geofence(name))
            case .state: break
            }
        }
        if let rule = rules.overspeed, let speed = rule.evaluate(speed: l.speed, time: l.time, state: &state.overspeed)
        {
            add(.overspeed, nil, time: l.time, .overspeed(speed: speed, limit: rule.limit))
        }
        if let rule = rules.battery, let level = rule.evaluate(level: l.battery, state: &state.battery) {
            add(.lowBattery, nil, time: l.time, .battery(level: level, threshold: rule.threshold))
        }
        state.time = l.time
        state.key = l.key
        return out
    }
}

extension Array {
    /// The first index whose element satisfies `belongs` (all after it do too), or `count`.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var lo = 0, hi = count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if belongs(self[mid]) { hi = mid } else { lo = mid + 1 }
        }
        return lo
    }
}
