import EndpointEvents
import Formats
import Geo
import LocationService
import Logging
import Synchronization

/// What both stores share of the events facet (``EventStore``): the geofences as evaluated (a
/// ``GeofenceSet`` rebuilt only when the store's generation of geofences moved), the rules, and one
/// device's evaluation from its saved state.
public final class StoredEvents: Sendable {
    struct Cache: Sendable {
        var rules = EventRules()
        var generation: UInt64?
        var set = GeofenceSet()
        /// The devices' own overspeed limits (m/s) as of `limitsGeneration`.
        var limitsGeneration: UInt64?
        var limits: [String: Double] = [:]
    }

    let cache = Mutex(Cache())

    public init() {}

    /// The rules from now on.
    public func setRules(_ rules: EventRules) {
        cache.withLock { $0.rules = rules }
    }

    public var rules: EventRules { cache.withLock { $0.rules } }

    /// The rules `device` is evaluated with: the global ones, its own overspeed limit in place of
    /// the global one when it has one (the global rule's hysteresis and duration kept).
    public func rules(for device: String) -> EventRules {
        cache.withLock { c in
            var rules = c.rules
            if let limit = c.limits[device] {
                var rule = rules.overspeed ?? OverspeedRule(limit: limit)
                rule.limit = limit
                rules.overspeed = rule
            }
            return rules
        }
    }

    /// Whether the limits kept are those of `generation` (the store's count of their changes).
    public func hasLimits(generation: UInt64) -> Bool {
        cache.withLock { $0.limitsGeneration == generation }
    }

    /// Keeps the devices' own overspeed limits of `generation` for the next batches.
    public func keepLimits(_ limits: [String: Double], generation: UInt64) {
        cache.withLock {
            $0.limitsGeneration = generation
            $0.limits = limits
        }
    }

    /// The geofence set of `generation`, or `nil` when the one kept is of another.
    public func set(generation: UInt64) -> GeofenceSet? {
        cache.withLock { $0.generation == generation ? $0.set : nil }
    }

    /// Keeps `set` (of its generation) for the next batches.
    public func keep(_ set: GeofenceSet) {
        cache.withLock {
            $0.generation = set.generation
            $0.set = set
        }
    }

    /// The set of the geofences a store keeps as features (``GeofenceDocument/feature(_:)``) with
    /// their revisions.
    public static func set(features: [(feature: [UInt8], revision: UInt64)], generation: UInt64) throws -> GeofenceSet {
        let geofences = try geofences(features.map(\.feature))
        var revisions: [String: UInt64] = [:]
        for (g, f) in zip(geofences, features) { revisions[g.name] = f.revision }
        return GeofenceSet(
            geofences.map { ($0, min(revisions[$0.name] ?? generation, generation)) }, generation: generation)
    }

    /// The geofences of stored features, in their order.
    public static func geofences(_ features: [[UInt8]]) throws -> [Geofence] {
        guard !features.isEmpty else { return [] }
        var document: [UInt8] = Array("{\"type\":\"FeatureCollection\",\"features\":[".utf8)
        for (i, f) in features.enumerated() {
            if i > 0 { document.append(UInt8(ascii: ",")) }
            document += f
        }
        document += Array("]}".utf8)
        // Each was checked when it was stored; the totals are a document's bounds, which ``putGeofences``
        // keeps for the count: reading them back is never refused for the set's size, so a set
        // grown past them by several documents still evaluates (ingest does not fail on it).
        var limits = GeofenceDocument.Limits()
        limits.bytes = .max
        limits.geofences = .max
        limits.vertices = .max
        do {
            return try GeofenceDocument.parse(document, limits: limits)
        } catch {
            throw TrackStoreError(.corrupt, "the stored geofences do not read back: \(error.message)")
        }
    }

    /// How far back, from its newest record, a device's records are evaluated when it has no state
    /// to go on from (a store upgraded from before events, a state that does not read back): a day.
    public static let freshLookback = 86_400.0

    /// Where a fresh state's evaluation of a device whose records span `first` to `last` begins:
    /// ``freshLookback`` before `last`, or `nil` (all of them) when they span less.
    public static func freshSince(first: Double, last: Double) -> Double? {
        first < last - freshLookback ? last - freshLookback : nil
    }

    /// The event state a store saved of `device`, for its next records, or `nil` when it does not
    /// read back (a disk's damage, a hand's edit, another version's format): then the store
    /// evaluates the device's records of its last day (``freshLookback``) from a fresh state, as
    /// for a device that has none, and logs why. Events keep their ids (derived from the records
    /// that decide them), so those decided again are not stored or delivered twice; a batch is never
    /// refused for it.
    public static func resumable(_ bytes: [UInt8], device: String, logger: Logger) -> DeviceEventState? {
        do {
            return try DeviceEventState(encoded: bytes)
        } catch {
            logger.error(
                "device \(device)'s saved event state does not read back: its records of the last day are evaluated again",
                metadata: ["device": "\(device)", "reason": "\(error)"])
            return nil
        }
    }

    /// One device's evaluation: its saved state (`nil`: none, or none that reads back), the records
    /// of it to evaluate (those a batch stored, or more), and the stops and trips its detector found;
    /// returns the new state and the events.
    public static func evaluate(
        state: DeviceEventState?, records: [KeyedRecord], stops: [StopEvent], device: String,
        geofences: GeofenceSet, rules: EventRules
    ) -> (state: [UInt8], events: [DeviceEvent], late: Int) {
        var s = state ?? DeviceEventState()
        let evaluation = s.evaluate(records, device: device, geofences: geofences, rules: rules)
        var events = evaluation.events
        for stop in stops { events += stop.deviceEvents }
        return (s.encoded(), events, evaluation.late)
    }
}

extension StopEvent {
    /// The events of a stop or trip the detector found: a departure is `stopEnd`; a trip ended by an
    /// arrival is `tripEnd` and the `stopStart` of the stop it arrived at.
    public var deviceEvents: [DeviceEvent] {
        switch kind {
        case .stop(let visit):
            return [DeviceEvent.stopEnd(device: device, visit: visit, decided: decided)]
        case .trip(let trip):
            let arrival = Visit(
                coordinate: trip.endCoordinate, horizontalAccuracy: 0, arrival: trip.end, departure: nil, fixCount: 0)
            var start = DeviceEvent.stopStart(device: device, visit: arrival, decided: decided)
            start.details = .stay(DeviceEvent.Stay(start: trip.end, end: nil, radius: nil, fixes: nil))
            return [DeviceEvent.tripEnd(device: device, trip: trip, decided: decided), start]
        }
    }
}

extension StoredEvents {
    /// The refusal of a put that would leave the store holding more geofences than a document may
    /// have (``GeofenceDocument/Limits/geofences``).
    public static func tooManyGeofences(_ count: Int) -> EventsError {
        EventsError(
            .tooLarge,
            "the endpoint would hold \(count) geofences, more than \(GeofenceDocument.Limits().geofences): "
                + "remove some first (nothing was stored)")
    }
}

extension StoredEvents {
    /// Seconds within which a device's stop event (`stopStart`, `stopEnd`, `tripEnd`) is the same
    /// stop as one of the same kind already told: half the stop detector's shortest stay (180 s),
    /// as two stops of a device begin, and end, a stay and a trip apart. Points that arrive out of
    /// order move a stop's arrival (and its id) as the detector runs again over them: the stop is
    /// told once, as first found, not again a few seconds earlier.
    public static let sameStopWithin = 90.0

    /// The kinds told once per stop whatever the detector decides again (``sameStopWithin``).
    public static let stopKinds: Set<EventKind> = [.stopStart, .stopEnd, .tripEnd]
}
