import Geo
import LocationService

/// One device's geofences: the ``RegionWatch`` of each geofence it is not settled outside of
/// (inside, with evidence pending, or unknown), and the set's generation it last saw. Every other
/// geofence that applies to the device is settled outside. Small whatever the number of geofences
/// (a handful of watches); a store keeps it with each batch (in ``DeviceEventState/encoded()``).
///
/// Fed a device's locations in time order, it applies to each geofence exactly the rules a device's
/// ``RegionMonitor`` applies to its regions (the same ``RegionWatch``): the same trail gives the
/// same entries, exits and dwells at the same times. As in the monitor, a geofence starts unknown
/// for a device (one added, or replaced, later too) and its first clear evidence settles it without
/// an event: a device first seen inside a geofence has not entered it.
public struct GeofenceState: Hashable, Sendable {
    struct Watched: Hashable, Sendable {
        var name: String
        /// The geofence's revision the watch is about: a replaced geofence starts again unknown.
        var revision: UInt64
        /// Its slot in the set last evaluated against (checked by name before use).
        var slot: Int32
        var watch: RegionWatch
    }

    /// The set's generation this state was last evaluated against (0: never).
    public private(set) var generation: UInt64 = 0
    /// The geofences not settled outside (a handful).
    var watches: [Watched] = []

    public init() {}

    init(generation: UInt64, watches: [Watched]) {
        self.generation = generation
        self.watches = watches
    }

    /// The geofences the device is inside, by name.
    public var inside: [String] {
        watches.filter { $0.watch.state == .inside }.map(\.name).sorted()
    }

    /// The geofences the state keeps a watch for (inside, pending or unknown).
    public var watchedCount: Int { watches.count }

    /// The settings of the rules (the device's monitor's defaults).
    public struct Rules: Hashable, Sendable, Codable {
        /// Seconds the evidence for a new state must hold. The default is 20, as the device's.
        public var minimumDuration = 20.0
        /// The smallest margin in metres, whatever the accuracy. The default is 5, as the device's.
        public var minimumMargin = 5.0

        public init() {}
    }

    /// Evaluates one location of `device` (at `time`, with its horizontal accuracy in metres when
    /// known: the margin is the larger of it and ``Rules/minimumMargin``) against `set`; returns the
    /// entries, exits and dwells it decides (by geofence name, then kind), as the device's monitor
    /// reports them (an entry's time is when its evidence began).
    ///
    /// - Complexity: O(watches + the geofences the location's grid cell lists), plus, after the set
    ///   changed, O(the geofences new to the device).
    public mutating func evaluate(
        latitude: Double, longitude: Double, accuracy: Double?, time: Double, device: String, in set: GeofenceSet,
        rules: Rules = Rules()
    ) -> [RegionMonitor.Event] {
        let point = Coordinate(latitude: latitude, longitude: longitude)
        let margin = max(accuracy ?? 0, rules.minimumMargin)
        let watchRules = RegionWatch.Rules(minimumDuration: rules.minimumDuration, firstStateReportDistance: -1)
        var events: [RegionMonitor.Event] = []
        var version: UInt64 = 0
        let changed = generation != set.generation
        if changed {
            // Gone, replaced or no longer for this device: forgotten (a replaced one is new below).
            watches.removeAll { w in
                guard let slot = set.byName[w.name] else { return true }
                let s = set.slots[Int(slot)]
                return s.revision != w.revision || !s.geofence.applies(to: device)
            }
        }
        // The geofences the device is not settled outside of: each evaluated exactly.
        var i = 0
        while i < watches.count {
            let slot = Self.slot(of: watches[i], in: set)
            watches[i].slot = slot
            let region = set.slots[Int(slot)].geofence.region
            watches[i].watch.observe(
                signedDistance: region.signedDistance(to: point), margin: margin, time: time, region: region,
                rules: watchRules, version: &version, events: &events)
            if watches[i].watch.isSettledOutside {
                watches.remove(at: i)
            } else {
                i += 1
            }
        }
        let known = generation
        // Those settled outside that the cell lists: only evidence of inside changes them, and only
        // a location that may be inside one (the cheap test) gets its exact distance.
        let location = GeofenceSet.Probe.Location(latitude: latitude, longitude: longitude)
        set.probes.withUnsafeBufferPointer { probes in
            set.forEachCandidate(at: point) { slot in
                let probe = probes[Int(slot)]
                guard probe.mayBeInside(location, margin: margin) else { return }
                let s = set.slots[Int(slot)]
                guard s.revision <= known || !changed, probe.everyDevice || s.geofence.applies(to: device),
                    !watches.contains(where: { $0.slot == slot && $0.name == s.geofence.name })
                else { return }
                let d = s.geofence.region.signedDistance(to: point)
                guard d <= -margin else { return }
                var watch = RegionWatch(state: .outside)
                watch.observe(
                    signedDistance: d, margin: margin, time: time, region: s.geofence.region, rules: watchRules,
                    version: &version, events: &events)
                if !watch.isSettledOutside {
                    watches.append(Watched(name: s.geofence.name, revision: s.revision, slot: slot, watch: watch))
                }
            }
        }
        if changed {
            // The geofences new to the device (added or replaced since it last saw the set): unknown,
            // settled by this first location as the monitor settles a region it was just given.
            for i in set.slots(after: known) {
                let s = set.slots[i]
                guard s.geofence.applies(to: device), !watches.contains(where: { $0.name == s.geofence.name })
                else { continue }
                var watch = RegionWatch()
                watch.observe(
                    signedDistance: s.geofence.region.signedDistance(to: point), margin: margin, time: time,
                    region: s.geofence.region, rules: watchRules, version: &version, events: &events)
                if !watch.isSettledOutside {
                    watches.append(
                        Watched(name: s.geofence.name, revision: s.revision, slot: Int32(i), watch: watch))
                }
            }
            generation = set.generation
        }
        guard !events.isEmpty else { return events }
        return
            events
            .filter {
                if case .state = $0 { return false }
                return true
            }
            .sorted { Self.order($0) < Self.order($1) }
    }

    /// The watch's slot in `set`: the one it keeps when that slot still holds its geofence.
    static func slot(of w: Watched, in set: GeofenceSet) -> Int32 {
        if Int(w.slot) < set.slots.count && w.slot >= 0 && set.slots[Int(w.slot)].geofence.name == w.name {
            return w.slot
        }
        return set.byName[w.name]!
    }

    static func order(_ e: RegionMonitor.Event) -> (String, Int) {
        switch e {
        case .enter(let id, _): (id, 0)
        case .dwell(let id, _): (id, 1)
        case .exit(let id, _): (id, 2)
        case .state(let id, _): (id, 3)
        }
    }
}

extension RegionWatch {
    /// Settled outside with nothing pending: a state the endpoint keeps no watch for.
    var isSettledOutside: Bool { state == .outside && pending == nil }
}
