import Geo

/// Visits and the trips between them, from a trail of fixes: CoreLocation's visit service as a value.
///
/// A value type with no I/O and no clock of its own: ``process(_:)`` takes one fix at a time (its
/// time comes with it) and returns what it decides, ``finish(at:)`` says the input is over at a time.
/// The device feeds it live and the endpoint feeds it stored points, and both get the same visits.
/// Its state is a few numbers: nothing is allocated per fix, and a trail of any length costs O(1)
/// memory. The state is `Codable` and `Hashable`: the endpoint stores it per device and takes up a
/// stored one where it left off, and two detectors in equal states decide the same from there on.
///
/// Rules (each tested on its own):
///
/// - **A stay** is a run of fixes within ``Configuration/radius`` of their centre (the mean of the
///   fixes, weighted by the inverse square of their accuracy). The radius adapts to the fixes: the
///   larger of ``Configuration/minimumRadius`` (50 m) and ``Configuration/accuracyFactor`` (2) ×
///   the stay's mean accuracy. With per-axis noise of hAcc/√2, 98 % of a still receiver's fixes fall
///   within 2 × hAcc, so the radius follows a phone's 65 m Wi-Fi fixes as well as a receiver's 5 m
///   ones; the 50 m floor keeps a good receiver's slow wander (metres, correlated over tens of
///   seconds) and a parking manoeuvre inside one stay.
/// - **Arrival** is reported once a stay spans ``Configuration/minimumDuration`` (180 s), from its
///   first fix to its last inside; the visit's arrival time is that first fix. A shorter stop (a
///   traffic light, a crossing) is no visit. Until then a stay is also anchored: its fixes must be
///   within the radius (plus that fix's accuracy) of its first fix, not only of their mean, which
///   follows a slow walker along. So the fixes on the way in and out add at most one radius of
///   travel to a stop (about 40 s on foot, 5 s by car): a walker's 100 s wait at a crossing spans
///   under 150 s, and an arrival is backdated to at most one radius before the place.
/// - **Departure** needs fixes outside the visit's radius for ``Configuration/departureDuration``
///   (60 s) without one back inside; the departure time is the last fix inside. A multipath jump of
///   20-60 m lasts seconds and ends inside: it ends nothing. One far fix is not trusted alone either
///   (a receiver can be badly wrong for one epoch with a small accuracy), and since the departure is
///   backdated, waiting for a second minute costs only latency, not accuracy. Reported speeds play no
///   part in any decision: at a standstill a cheap receiver's speed is not zero.
/// - **Holes.** A hole without fixes shorter than ``Configuration/maximumGap`` (1 hour) changes
///   nothing by itself: the fix after it is inside (the same visit goes on, however long the hole)
///   or outside (a departure, as any fix outside). A stay needs fixes inside it at both ends, so a
///   tunnel, whose exit is far from its entrance, is no visit. A longer hole ends an open visit at its
///   last fix, drops the trip under way, and the fix after it starts afresh.
/// - **Trips** run from a departure to the next arrival, along the fixes in between (the outside
///   fixes that confirmed the departure and the short stops on the way included). The distance is
///   measured between fixes at least their accuracy apart, so that 1 Hz noise does not add up on a
///   slow walk. Before the first
///   visit, and after a visit ended by a hole, the movement has no known start: no trip is reported
///   for it.
/// - Fixes with an accuracy worse than ``Configuration/maximumAccuracy``, an invalid coordinate, or
///   a time not after the last fix's are ignored (a hole).
public struct VisitDetector: Sendable, Hashable, Codable {
    /// The detector's settings.
    public struct Configuration: Sendable, Hashable, Codable {
        /// Seconds a stay must span before it is a visit. The default is 180 (3 minutes).
        public var minimumDuration: Double = 180
        /// A fixed radius in metres for every stay; `nil` adapts it to the fixes' accuracy (see
        /// ``minimumRadius`` and ``accuracyFactor``). The default is `nil`.
        public var radius: Double?
        /// The adaptive radius's floor, in metres. The default is 50.
        public var minimumRadius: Double = 50
        /// The adaptive radius is this many times the stay's mean accuracy (when above
        /// ``minimumRadius``). The default is 2.
        public var accuracyFactor: Double = 2
        /// Seconds of fixes outside without one inside before a visit is left. The default is 60.
        public var departureDuration: Double = 60
        /// A hole longer than this many seconds ends an open visit at its last fix. The default is
        /// 3600 (1 hour).
        public var maximumGap: Double = 3600
        /// Fixes with a horizontal accuracy worse than this many metres are ignored. The default is 100.
        public var maximumAccuracy: Double = 100
        /// The accuracy in metres assumed for a fix that has none (a point stored without one). The
        /// default is 20.
        public var unknownAccuracy: Double = 20

        /// The default configuration.
        public init() {}
    }

    /// One fix as the detector needs it: what a device's location and a stored point both have.
    public struct Sample: Hashable, Sendable, Codable {
        /// Seconds since 1970.
        public var time: Double
        /// Where the fix puts the device.
        public var coordinate: Coordinate
        /// Metres; negative when unknown (see ``Configuration/unknownAccuracy``).
        public var horizontalAccuracy: Double
        /// Metres per second; negative when unknown.
        public var speed: Double

        /// Creates a sample.
        public init(time: Double, coordinate: Coordinate, horizontalAccuracy: Double, speed: Double = -1) {
            self.time = time
            self.coordinate = coordinate
            self.horizontalAccuracy = horizontalAccuracy
            self.speed = speed
        }

        /// The sample a location gives.
        public init(_ location: Location) {
            self.init(
                time: location.timestamp, coordinate: location.coordinate,
                horizontalAccuracy: location.horizontalAccuracy, speed: location.speed)
        }
    }

    /// One decision.
    public enum Decision: Hashable, Sendable {
        /// The device has stayed: the visit with its arrival time and no departure.
        case arrival(Visit)
        /// The device has left: the visit with both times.
        case departure(Visit)
        /// The movement that an arrival ended.
        case trip(Trip)
    }

    /// What one call decided, in the order it happened: a departure, then a trip and the arrival that
    /// ends it. Mostly empty; no storage of its own.
    public struct Decisions: Hashable, Sendable, Sequence {
        /// The visit left (with both times), first.
        public var departure: Visit?
        /// The trip the arrival ends.
        public var trip: Trip?
        /// The visit arrived at (without a departure), last.
        public var arrival: Visit?

        /// Creates decisions.
        public init(departure: Visit? = nil, trip: Trip? = nil, arrival: Visit? = nil) {
            self.departure = departure
            self.trip = trip
            self.arrival = arrival
        }

        /// Whether nothing was decided.
        public var isEmpty: Bool { departure == nil && trip == nil && arrival == nil }

        /// The decisions one by one, in order.
        public func makeIterator() -> Iterator { Iterator(decisions: self) }

        /// The decisions in order.
        public struct Iterator: IteratorProtocol {
            let decisions: Decisions
            var step = 0

            /// The next decision, or `nil` after the last.
            public mutating func next() -> Decision? {
                while step < 3 {
                    step += 1
                    switch step {
                    case 1: if let v = decisions.departure { return .departure(v) }
                    case 2: if let t = decisions.trip { return .trip(t) }
                    default: if let v = decisions.arrival { return .arrival(v) }
                    }
                }
                return nil
            }
        }
    }

    /// The settings; a change holds from the next fix.
    public var configuration: Configuration
    /// The stay the fixes are in: a visit once ``hasArrived``, a candidate before.
    var stay: Stay?
    var hasArrived = false
    /// Fixes outside ``stay`` since ``outsideSince``, as a stay of their own (the next candidate).
    var outside: Stay?
    var outsideSince: Double?
    /// The trip under way: after a departure; while visiting, from the first fix outside (dropped
    /// when a fix comes back inside).
    var trip: TripProgress?
    /// The time of the last fix taken.
    public private(set) var lastTime: Double?

    /// Creates a detector with nothing seen.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The visit the device is at (arrived, not departed), as it stands now.
    public var currentVisit: Visit? {
        guard hasArrived, let stay else { return nil }
        return stay.visit(departed: false)
    }

    /// Decides what a location means for visits and trips.
    public mutating func process(_ location: Location) -> Decisions {
        process(Sample(location))
    }

    /// Decides what one fix means for visits and trips.
    ///
    /// - Complexity: O(1), no allocation.
    public mutating func process(_ sample: Sample) -> Decisions {
        let c = configuration
        let accuracy = sample.horizontalAccuracy >= 0 ? sample.horizontalAccuracy : c.unknownAccuracy
        guard sample.coordinate.isValid, sample.time.isFinite, accuracy <= c.maximumAccuracy else {
            return Decisions()
        }
        if let lastTime, sample.time <= lastTime { return Decisions() }
        var out = Decisions()
        if let lastTime, sample.time - lastTime > c.maximumGap {
            out.departure = endAfterHole()
        }
        lastTime = sample.time

        guard var current = stay else {
            trip?.add(sample, accuracy: accuracy)
            stay = Stay(sample, accuracy: accuracy, tripToHere: trip)
            arriveIfLongEnough(&out)
            return out
        }
        if current.contains(sample.coordinate, radius: radius(of: current), anchored: !hasArrived) {
            if hasArrived { trip = nil } else { trip?.add(sample, accuracy: accuracy) }
            current.add(sample, accuracy: accuracy)
            stay = current
            outside = nil
            outsideSince = nil
            arriveIfLongEnough(&out)
            return out
        }

        // Outside the stay.
        if outsideSince == nil {
            outsideSince = sample.time
            if hasArrived { trip = TripProgress(start: current.lastInside, at: current.lastInsideCoordinate) }
        }
        trip?.add(sample, accuracy: accuracy)
        if var o = outside, o.contains(sample.coordinate, radius: radius(of: o), anchored: true) {
            o.add(sample, accuracy: accuracy)
            outside = o
        } else {
            outside = Stay(sample, accuracy: accuracy, tripToHere: trip)
        }
        if sample.time - outsideSince! >= c.departureDuration {
            if hasArrived { out.departure = current.visit(departed: true) }
            stay = outside
            hasArrived = false
            outside = nil
            outsideSince = nil
            arriveIfLongEnough(&out)
        }
        return out
    }

    /// Says the input is over at `time` (a log's end, a query's end): an open visit whose last fix is
    /// more than ``Configuration/maximumGap`` before it ends there, as a hole would end it. A visit
    /// with recent fixes stays open (the device is still there).
    public mutating func finish(at time: Double) -> Decisions {
        guard let lastTime, time - lastTime > configuration.maximumGap else { return Decisions() }
        return Decisions(departure: endAfterHole())
    }

    /// The radius of a stay.
    func radius(of stay: Stay) -> Double {
        configuration.radius ?? max(configuration.minimumRadius, configuration.accuracyFactor * stay.meanAccuracy)
    }

    /// Ends everything after a hole longer than the maximum gap: an open visit departs at its last
    /// fix, and the movement under way is forgotten.
    mutating func endAfterHole() -> Visit? {
        let departed = hasArrived ? stay?.visit(departed: true) : nil
        stay = nil
        hasArrived = false
        outside = nil
        outsideSince = nil
        trip = nil
        return departed
    }

    /// Reports the arrival (and the trip it ends) once the candidate stay is long enough.
    mutating func arriveIfLongEnough(_ out: inout Decisions) {
        guard !hasArrived, let stay, stay.lastInside - stay.first >= configuration.minimumDuration else { return }
        hasArrived = true
        out.trip = stay.tripToHere?.trip
        out.arrival = stay.visit(departed: false)
        trip = nil
    }
}
