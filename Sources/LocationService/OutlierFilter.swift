import Geo

/// Which points of a trail are outliers: points a phone or a receiver sent that are not where the
/// device was. A value with no I/O and no clock: ``add(_:)`` takes one point at a time and says which
/// points pass and which are marked. A marked point is not dropped (the store keeps it as received,
/// with its mark): it is only left out of stops, trips and distances.
///
/// Three kinds, each a ``Reason``:
///
/// - **No position** (``Reason/noPosition``): latitude and longitude both 0 (what phones send for a
///   location they do not have: "null island"), or a coordinate that is not one.
/// - **Inaccurate** (``Reason/inaccurate``): a horizontal accuracy worse than
///   ``Configuration/maximumAccuracy`` (a cell-tower fix of 1,500 m).
/// - **A jump and back** (``Reason/jump``): a point that the last point that passed could only have
///   reached faster than ``Configuration/maximumSpeed``, and from which the next point could only be
///   reached as fast, while the next point is within that speed of the last one: the device went
///   nowhere, one fix did. Speeds grant both points their accuracy (a speed is the distance less
///   both accuracies, over the time between them). A fast device is no jump: a train at 300 km/h
///   reaches the next point from the suspect as fast as from the one before it.
///
/// The first two are judged on the point alone, at once. A jump needs the next point: a point that
/// arrives too fast is held (``Outcome/released`` does not give it) until the next point that is not
/// itself marked for the first two reasons; then it is either marked (``Outcome/verdict`` names its
/// time) or released before that next point. Until then it is **pending** (``pending``): provisionally
/// an outlier, by the speed that it implies from the last point that passed. The device's visit
/// detector and the endpoint's leave a pending point out of stops, trips and distances, and the
/// endpoint marks it `pending` (out of the map's line) until the next point says what it was: a
/// jump at the very end of a trail is never drawn or counted, and a real fast move (a train's next
/// fix, a trail resumed far away after a hole) is counted as soon as the next point confirms it.
/// ``finish()`` releases a held point, for a caller that knows the trail is over and would rather
/// keep it.
///
/// Points not after the last point that passed (a repeat, a late one) are not judged: they pass, and
/// the visit detector ignores them as it ignores any point out of time order.
///
/// The state is the last point that passed and the held one: it does not grow with the trail.
public struct OutlierFilter: Sendable, Hashable, Codable {
    /// The filter's settings.
    public struct Configuration: Sendable, Hashable, Codable {
        /// Points with a horizontal accuracy worse than this many metres are outliers. The default is
        /// 200 (Wi-Fi fixes pass, cell-tower fixes do not).
        public var maximumAccuracy: Double = 200
        /// A point reached from the last one and left for the next one faster than this, in metres per
        /// second (after granting both points' accuracies), while the next one is within it of the
        /// last, is a jump. The default is 50 (180 km/h): a walker's or a car's single fix 300 km/h
        /// away and back is one, a train at 300 km/h is not (it does not come back).
        public var maximumSpeed: Double = 50
        /// The accuracy in metres assumed for a point that has none. The default is 20.
        public var unknownAccuracy: Double = 20

        /// The default configuration.
        public init() {}
    }

    /// Why a point is an outlier.
    public enum Reason: String, Sendable, Hashable, Codable, CaseIterable {
        /// Latitude and longitude 0, or no valid coordinate.
        case noPosition = "no-position"
        /// A horizontal accuracy worse than ``Configuration/maximumAccuracy``.
        case inaccurate
        /// One point far away and the next one back: see ``OutlierFilter``.
        case jump
    }

    /// A point marked as an outlier: the time of the point (seconds since 1970) and why.
    public struct Verdict: Hashable, Sendable {
        /// The time of the marked point.
        public var time: Double
        /// Why it is an outlier.
        public var reason: Reason

        /// Creates a verdict.
        public init(time: Double, reason: Reason) {
            self.time = time
            self.reason = reason
        }
    }

    /// What one point decided: at most one point marked, and the points that pass now, in time order
    /// (none, this one, or a held one then this one).
    public struct Outcome: Hashable, Sendable, Sequence {
        /// The point marked by this call: the one given (no position, inaccurate) or the one held
        /// before it (a jump).
        public var verdict: Verdict?
        var first: VisitDetector.Sample?
        var second: VisitDetector.Sample?

        /// Creates an outcome.
        init(verdict: Verdict? = nil, first: VisitDetector.Sample? = nil, second: VisitDetector.Sample? = nil) {
            self.verdict = verdict
            self.first = first
            self.second = second
        }

        /// The points that pass, in order.
        public var released: [VisitDetector.Sample] { Array(self) }

        /// The points that pass, in order (no allocation).
        public func makeIterator() -> Iterator { Iterator(outcome: self) }

        /// The points that pass, one by one.
        public struct Iterator: IteratorProtocol {
            let outcome: Outcome
            var step = 0

            /// The next point that passes, or `nil` after the last.
            public mutating func next() -> VisitDetector.Sample? {
                while step < 2 {
                    step += 1
                    if step == 1, let s = outcome.first { return s }
                    if step == 2, let s = outcome.second { return s }
                }
                return nil
            }
        }
    }

    /// A point as the filter keeps it.
    struct Kept: Sendable, Hashable, Codable {
        var sample: VisitDetector.Sample
        var accuracy: Double
    }

    /// The settings; a change holds from the next point.
    public var configuration: Configuration
    /// The last point that passed.
    var last: Kept?
    /// A point that arrived too fast from ``last``, waiting for the next one.
    var held: Kept?

    /// Creates a filter with nothing seen.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Why `sample` is an outlier on its own (no position, inaccurate), or `nil`: what a store can
    /// judge without the points around it.
    public static func reason(for sample: VisitDetector.Sample, configuration: Configuration) -> Reason? {
        let c = sample.coordinate
        guard c.isValid, c.latitude != 0 || c.longitude != 0 else { return .noPosition }
        let accuracy = sample.horizontalAccuracy >= 0 ? sample.horizontalAccuracy : configuration.unknownAccuracy
        return accuracy > configuration.maximumAccuracy || !accuracy.isFinite ? .inaccurate : nil
    }

    /// Judges the next point.
    ///
    /// - Complexity: O(1), no allocation.
    public mutating func add(_ sample: VisitDetector.Sample) -> Outcome {
        if let reason = Self.reason(for: sample, configuration: configuration) {
            return Outcome(verdict: Verdict(time: sample.time, reason: reason))
        }
        let point = Kept(
            sample: sample,
            accuracy: sample.horizontalAccuracy >= 0 ? sample.horizontalAccuracy : configuration.unknownAccuracy)
        guard sample.time.isFinite, let before = last, sample.time > before.sample.time else {
            // Nothing to judge it by (the first point), or out of time order: it passes as it is.
            if last == nil || !sample.time.isFinite { last = point }
            return Outcome(first: sample)
        }
        if let suspect = held {
            guard sample.time > suspect.sample.time else { return Outcome(first: sample) }
            held = nil
            if tooFast(suspect, point) && !tooFast(before, point) {
                // Away and back: the held point jumped; this one is judged from the one before it.
                last = point
                return Outcome(verdict: Verdict(time: suspect.sample.time, reason: .jump), first: sample)
            }
            // The device did go there: the held point passes, then this one, judged from it.
            last = suspect
            if tooFast(suspect, point) {
                held = point
                return Outcome(first: suspect.sample)
            }
            last = point
            return Outcome(first: suspect.sample, second: sample)
        }
        if tooFast(before, point) {
            held = point
            return Outcome()
        }
        last = point
        return Outcome(first: sample)
    }

    /// The point held because it arrived too fast from the last one that passed, until the next
    /// point says whether it jumped: provisionally an outlier (see ``OutlierFilter``).
    public var pending: VisitDetector.Sample? { held?.sample }

    /// Says the input is over for good: a held point passes (nothing after it says it jumped).
    public mutating func finish() -> VisitDetector.Sample? {
        guard let suspect = held else { return nil }
        held = nil
        last = suspect
        return suspect.sample
    }

    /// Whether going from `a` to `b` needs more than the maximum speed, after granting both their
    /// accuracy.
    func tooFast(_ a: Kept, _ b: Kept) -> Bool {
        let seconds = b.sample.time - a.sample.time
        guard seconds > 0 else { return false }
        let allowed = configuration.maximumSpeed * seconds + a.accuracy + b.accuracy
        // Most points are close: no trigonometry when the degrees apart (a longitude's degree is never
        // longer than a latitude's) cannot make the distance allowed.
        var dLon = abs(b.sample.coordinate.longitude - a.sample.coordinate.longitude)
        if dLon > 180 { dLon = 360 - dLon }
        let dLat = b.sample.coordinate.latitude - a.sample.coordinate.latitude
        let bound = (dLat * dLat + dLon * dLon).squareRoot() * Self.metresPerDegree
        guard bound > allowed else { return false }
        return Geodesy.haversineDistance(a.sample.coordinate, b.sample.coordinate) > allowed
    }

    /// Metres per degree of latitude on the mean-radius sphere (haversine's).
    static let metresPerDegree = Geodesy.meanRadius * .pi / 180
}
