import Geo

/// Visits and the trips between them, from a trail of fixes: CoreLocation's visit service as a value.
///
/// A value type with no I/O and no clock of its own: ``process(_:)`` takes one fix at a time (its
/// time comes with it) and returns what it decides, ``finish(at:)`` says the input is over at a time.
/// The device feeds it live and the endpoint feeds it stored points, and both get the same visits.
/// Its state is a few numbers and the last few fixes: nothing is allocated per fix once its window
/// is full, and a trail of any length costs O(1) memory. The state is `Codable` and `Hashable`: the endpoint stores it per device and takes up a
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
///   first fix to its last inside. A shorter stop (a traffic light, a crossing) is no visit. Until
///   then a stay is also anchored: its fixes must be within the radius (plus that fix's accuracy) of
///   its first fix, not only of their mean, which follows a slow walker along. So the fixes on the way
///   in and out add at most one radius of travel to a stop (about 40 s on foot, 5 s by car): a
///   walker's 100 s wait at a crossing spans under 150 s. The visit's arrival time is where the trip
///   that led there came to rest inside the stay (see trips, below), or the stay's first fix.
/// - **Departure** needs fixes outside the visit's radius for ``Configuration/departureDuration``
///   (60 s) without one back inside. A multipath jump of 20-60 m lasts seconds and ends inside: it
///   ends nothing. One far fix is not trusted alone either (a receiver can be badly wrong for one
///   epoch with a small accuracy), and since the departure is backdated, waiting for a second minute
///   costs only latency, not accuracy. The departure time is the last fix at rest before the device
///   left (see trips, below), or the last fix inside. Reported speeds decide no stay: at a standstill
///   a cheap receiver's speed is not zero.
/// - **Holes.** A hole without fixes shorter than ``Configuration/maximumGap`` (1 hour) changes
///   nothing by itself: the fix after it is inside (the same visit goes on, however long the hole)
///   or outside (a departure, as any fix outside). A stay needs fixes inside it at both ends, so a
///   tunnel, whose exit is far from its entrance, is no visit. A longer hole ends an open visit at its
///   last fix, drops the trip under way, and the fix after it starts afresh.
/// - **Trips** run from a departure to the next arrival. Their distance and speeds come from the
///   trail smoothed by a ``TrackSmoother`` (a constant-velocity Kalman filter weighted by each fix's
///   accuracy, smoothed over four fixes either side), step by step: between two fixes that both
///   report a speed (a receiver's Doppler speed) and are at most
///   ``Configuration/speedIntegrationInterval`` apart, a step is their mean speed times the time
///   between them; otherwise it is the distance between their smoothed positions. A step slower than
///   ``Configuration/restSpeed`` by those speeds, or ``Configuration/smoothedRestSpeed`` by the
///   smoothed velocity, is standing still: it adds no distance (a traffic light, a receiver's drift). So a departure is the last smoothed fix
///   at rest before the device left (not the last fix inside the radius, up to a radius later), and
///   an arrival the first fix at rest inside the new stay (not the stay's first fix, up to a radius
///   earlier); where no fix was at rest, the last fix inside and the stay's first fix, as before.
///   The maximum speed is the fastest step's (the faster reported speed of its two fixes, or its
///   distance over its time); the average the distance over the duration, never above the maximum
///   (every step that adds distance lies inside the trip, at most at the maximum speed). Before the first visit, and after a visit ended by a hole, the movement has no known
///   start: no trip is reported for it.
/// - Fixes with an accuracy worse than ``Configuration/maximumAccuracy`` (200 m), an invalid
///   coordinate or latitude and longitude 0 (no position), or a time not after the last fix's are
///   ignored (a hole). ``add(_:_:)`` first judges
///   each point with an ``OutlierFilter`` (no position, an accuracy worse than that maximum, a jump
///   and back faster than ``Configuration/maximumJumpSpeed``) and leaves the outliers out of
///   everything; ``process(_:)`` takes every fix it is given.
///
/// The state stays small: besides the stays' sums, the last few fixes the smoother needs (nine at
/// most), the outlier filter's last point and held point, and the figures of the trip under way.
/// All of it depends only on the fixes since the last standstill (and the smoother's window), so two
/// detectors that saw the same recent fixes reach the same state.
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
        /// Fixes with a horizontal accuracy worse than this many metres are ignored, and outliers for
        /// ``VisitDetector/add(_:_:)``. The default is 200 (Wi-Fi fixes count, cell-tower fixes do not).
        public var maximumAccuracy: Double = 200
        /// A fix reached from the last one and left for the next one faster than this, in m/s (after
        /// granting both fixes' accuracies), while the next is within it of the last, is an outlier
        /// for ``VisitDetector/add(_:_:)``: a jump and back. The default is 50 (180 km/h).
        public var maximumJumpSpeed: Double = 50
        /// The accuracy in metres assumed for a fix that has none (a point stored without one). The
        /// default is 20.
        public var unknownAccuracy: Double = 20
        /// A step between two fixes whose reported speeds average less than this, in m/s, is standing
        /// still: it adds no distance and marks where a trip ends and the next begins. The default is
        /// 0.5 (a walker makes 1.2-1.5; a receiver at rest reports up to a few tenths).
        public var restSpeed: Double = 0.5
        /// Between fixes without reported speeds, a step whose smoothed velocity is below this, in
        /// m/s, is standing still. Higher than ``restSpeed``: a receiver's wander at a standstill
        /// (metres, over tens of seconds) gives the smoothed velocity a few tenths of m/s. The default
        /// is 0.7 (see `docs/visits.md` for how it was chosen).
        public var smoothedRestSpeed: Double = 0.7
        /// Between two fixes that both report a speed and are at most this many seconds apart, a
        /// trip's distance is their mean speed times the time between them (the receiver's Doppler
        /// speed, which position noise does not reach); between others, the distance between their
        /// smoothed positions. The default is 10.
        public var speedIntegrationInterval: Double = 10
        /// The smoother of trip distances and speeds.
        public var smoothing = TrackSmoother.Configuration()

        /// The default configuration.
        public init() {}

        /// The outlier filter ``VisitDetector/add(_:_:)`` judges points with.
        public var outliers: OutlierFilter.Configuration {
            var c = OutlierFilter.Configuration()
            (c.maximumAccuracy, c.maximumSpeed, c.unknownAccuracy) = (
                maximumAccuracy, maximumJumpSpeed, unknownAccuracy
            )
            return c
        }
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

    /// The settings; a change holds from the next fix (the smoother's and the outlier filter's with it).
    public var configuration: Configuration {
        didSet { configureParts() }
    }
    /// The stay the fixes are in: a visit once ``hasArrived``, a candidate before.
    var stay: Stay?
    var hasArrived = false
    /// Fixes outside ``stay`` since ``outsideSince``, as a stay of their own (the next candidate).
    var outside: Stay?
    var outsideSince: Double?
    /// The trip under way: after a departure; while visiting, from the first fix outside (dropped
    /// when a fix comes back inside).
    var trip: TripProgress?
    /// The movement since the device was last at rest (what a trip starts from when the device leaves).
    var leg: TripProgress?
    /// Smoothed positions of the fixes, a few fixes behind them.
    var smoother: TrackSmoother
    /// Steps and rests along the smoothed positions.
    var motion = Motion()
    /// The outliers ``add(_:_:)`` leaves out.
    var outliers: OutlierFilter
    /// The time of the last fix taken.
    public private(set) var lastTime: Double?

    /// The time of the last point ``add(_:_:)`` took in: the last fix taken, or the point the outlier
    /// filter holds (it arrived too fast; the next point says whether it jumped), whichever is later.
    /// A store that resumes a detector feeds it the points after this time.
    public var lastGiven: Double? {
        guard let held = outliers.held?.sample.time, held.isFinite else { return lastTime }
        return max(lastTime ?? held, held)
    }

    /// Creates a detector with nothing seen.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        smoother = TrackSmoother()
        outliers = OutlierFilter()
        configureParts()
    }

    /// Gives the smoother and the outlier filter their part of ``configuration`` (once per change, not
    /// per fix).
    mutating func configureParts() {
        var smoothing = configuration.smoothing
        smoothing.unsmoothedWithSpeeds = configuration.speedIntegrationInterval
        if smoother.configuration != smoothing { smoother.configuration = smoothing }
        let outlierConfiguration = configuration.outliers
        if outliers.configuration != outlierConfiguration { outliers.configuration = outlierConfiguration }
    }

    /// The visit the device is at (arrived, not departed), as it stands now.
    public var currentVisit: Visit? {
        guard hasArrived, let stay else { return nil }
        return stay.visit(departure: nil)
    }

    /// Judges one point with the outlier filter, then decides what the points that pass mean: what
    /// the device and the endpoint call for each point of a trail.
    ///
    /// A point that passes is usually decided at once; one that arrives too fast (a jump?) waits
    /// for the next point, which says whether it jumped. So `decided` is called for each point that
    /// passes now, in time order (none, one or two), with what it decided.
    ///
    /// - Returns: the point this call marked as an outlier (this one, or the one held before it),
    ///   or `nil`.
    /// - Complexity: O(1), no allocation.
    @discardableResult
    public mutating func add(_ sample: Sample, _ decided: (Decisions) -> Void) -> OutlierFilter.Verdict? {
        let outcome = outliers.add(sample)
        for s in outcome { decided(process(s)) }
        return outcome.verdict
    }

    /// The point the outlier filter holds: it arrived too fast from the last fix taken, and no point
    /// after it says yet whether it jumped (``OutlierFilter/pending``). It is in no stop, trip or
    /// distance until the next point confirms it; the endpoint marks it `pending`.
    public var pending: Sample? { outliers.pending }

    /// Decides what a location means for visits and trips.
    public mutating func process(_ location: Location) -> Decisions {
        process(Sample(location))
    }

    /// Decides what one fix means for visits and trips (no outlier filter: see ``add(_:_:)``).
    ///
    /// - Complexity: O(1), no allocation once the smoother's window is full.
    public mutating func process(_ sample: Sample) -> Decisions {
        let accuracy = sample.horizontalAccuracy >= 0 ? sample.horizontalAccuracy : configuration.unknownAccuracy
        // What the outlier filter marks on the point alone (no position, too inaccurate) is never a fix.
        guard sample.time.isFinite, OutlierFilter.reason(for: sample, configuration: outliers.configuration) == nil
        else {
            return Decisions()
        }
        if let lastTime, sample.time <= lastTime { return Decisions() }
        var out = Decisions()
        if let lastTime, sample.time - lastTime > configuration.maximumGap {
            out.departure = endAfterHole()
        }
        lastTime = sample.time
        decide(sample, accuracy: accuracy, &out)
        // The positions the fix completes, one at a time: following one changes the rest of the state.
        smoother.append(sample)
        while let point = smoother.nextCompleted() { follow(point) }
        return out
    }

    /// The stays' part of ``process(_:)``: arrivals and departures on the fixes as they come.
    mutating func decide(_ sample: Sample, accuracy: Double, _ out: inout Decisions) {
        // The stays are changed in place (not copied out and back: a fix's cost is mostly copies
        // otherwise).
        guard stay != nil else {
            stay = Stay(sample, accuracy: accuracy)
            arriveIfLongEnough(&out)
            return
        }
        if stay!.contains(sample.coordinate, radius: radius(of: stay!), anchored: !hasArrived) {
            if hasArrived { trip = nil }
            stay!.add(sample, accuracy: accuracy)
            outside = nil
            outsideSince = nil
            arriveIfLongEnough(&out)
            return
        }

        // Outside the stay.
        if outsideSince == nil {
            outsideSince = sample.time
            if hasArrived { trip = departingTrip(from: stay!) }
        }
        if outside != nil, outside!.contains(sample.coordinate, radius: radius(of: outside!), anchored: true) {
            outside!.add(sample, accuracy: accuracy)
        } else {
            outside = Stay(sample, accuracy: accuracy)
        }
        if sample.time - outsideSince! >= configuration.departureDuration {
            if hasArrived { out.departure = depart(stay!) }
            stay = outside.take()
            hasArrived = false
            outsideSince = nil
            arriveIfLongEnough(&out)
        }
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
    /// fix, and the movement under way is forgotten (the smoother's window too).
    mutating func endAfterHole() -> Visit? {
        let departed = hasArrived ? stay.map { $0.visit(departure: $0.lastInside) } : nil
        stay = nil
        hasArrived = false
        outside = nil
        outsideSince = nil
        trip = nil
        leg = nil
        smoother.reset()
        motion = Motion()
        return departed
    }

    /// Reports the arrival (and the trip it ends) once the candidate stay is long enough: the trip
    /// ends, and the visit begins, where the device came to rest inside the stay (or, if it was never
    /// at rest there, at the stay's first fix).
    mutating func arriveIfLongEnough(_ out: inout Decisions) {
        guard !hasArrived, stay != nil, stay!.lastInside - stay!.first >= configuration.minimumDuration,
            var current = stay
        else { return }
        hasArrived = true
        if let trip {
            // The trip as it stood where it ended; it starts where the trip under way starts (a
            // departure may have moved that to the last fix inside after the mark was taken).
            var end = current.restMark ?? current.firstMark ?? trip.ended(at: current.first, current.origin)
            if end.end < trip.start { end = trip.ended(at: max(current.first, trip.start), current.origin) }
            (end.start, end.startCoordinate) = (trip.start, trip.startCoordinate)
            current.arrival = end.end
            out.trip = end.trip
        }
        stay = current
        out.arrival = current.visit(departure: nil)
        trip = nil
    }
}
