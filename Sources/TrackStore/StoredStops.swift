import Formats
import Foundation
import Geo
import LocationService
import Logging
import Synchronization

/// Stops and trips kept at ingest: each store runs the device's
/// ``VisitDetector`` over its points as they are stored and keeps, per device, what it decided (the
/// finished stops and trips, each with the time of the point that decided it), its state after the
/// last point, and checkpoints of that state (after a device's first point, after each departure,
/// and at least every ``checkpointInterval`` seconds of its points' time).
///
/// The invariant a store keeps: the detector started in a checkpoint's state and fed the device's
/// stored points after the checkpoint's time decides exactly the stored stops and trips after it.
/// Points that arrive out of time order (a late backlog) break it after their time: the store
/// marks the device dirty from that time (`dirty_from`) and runs the detector again from the
/// latest checkpoint before it, deleting what it had decided after. Retention deleting a device's
/// oldest points deletes the checkpoints, stops and trips before its first remaining point.
///
/// A query (``Query``) runs a fresh detector from its `from`, as the read-time path does, until its
/// state equals a stored checkpoint's at the checkpoint's time: from there on the two detectors
/// decide the same on the same points, so the stored stops and trips are the answer. A query without
/// `from` meets the checkpoint after the device's first point; one from a day meets the checkpoint of
/// the first departure both see. The answer is the read-time detector's, whatever order the points
/// arrived in.
public enum StoredStops {
    /// Seconds of a device's points' time between two checkpoints at most: a query's end, or a late
    /// point, runs the detector again over at most this much (plus the points' own span).
    public static let checkpointInterval = 3600.0

    /// `dirty_from` of a device whose stored stops were never computed (a store upgraded from before
    /// they were kept): the first query computes them all (the store's writer busy that long); ingest
    /// leaves the device to it.
    public static let neverComputed = -1e300

    /// The `outlier` mark of a location the detector holds (``VisitDetector/pending``): it arrived too
    /// fast from the last point that passed, and the next point will say whether it jumped (then it is
    /// marked `jump`, or unmarked). Trails leave it out as they leave outliers out; stops and trips
    /// leave it out because the detector does.
    public static let pendingMark = "pending"

    /// The detector's state as a store keeps it (JSON: exact doubles, a few hundred bytes).
    public static func encode(_ detector: VisitDetector) throws -> String {
        String(decoding: try JSONEncoder().encode(detector), as: UTF8.self)
    }

    /// The state ``encode(_:)`` wrote.
    public static func decode(_ text: String) throws -> VisitDetector {
        try JSONDecoder().decode(VisitDetector.self, from: Data(text.utf8))
    }

    /// The state ``encode(_:)`` wrote of `device` (`at`: a checkpoint's time; `nil`: the state
    /// after its last point), or a ``TrackStoreError/Code/corrupt`` error naming both.
    public static func decode(_ text: String, device: String, at time: Double?) throws(TrackStoreError)
        -> VisitDetector
    {
        do {
            return try decode(text)
        } catch {
            let which = time.map { "checkpoint at \($0)" } ?? "state after its last point"
            throw TrackStoreError(
                .corrupt, "device \(device)'s stops \(which) does not read back", device: device, underlying: error)
        }
    }

    /// The state ``encode(_:)`` wrote of `device`, for a batch to resume from, or `nil` when it does
    /// not read back (a disk's damage, a hand's edit, another version's format): then the store
    /// starts from the checkpoint before (or from the device's first point) and writes it anew,
    /// as it does for a late point, and logs why. The points are what counts; what was derived
    /// from them is derived again, and a batch is never refused for it.
    public static func resumable(_ text: String?, device: String, at time: Double?, logger: Logger) -> VisitDetector? {
        guard let text else { return nil }
        do {
            return try decode(text, device: device, at: time)
        } catch {
            logger.error(
                "\(error.message): its stops and trips are computed again from an earlier point",
                metadata: ["device": "\(device)", "reason": "\(error.underlying.map { "\($0)" } ?? "-")"])
            return nil
        }
    }

    /// The detector advanced over a device's points, in time order, from a stored state: what a store
    /// writes after a batch (the stops, trips and checkpoints it decided, and the new state).
    public struct Advance: Sendable {
        /// The state after the last point given.
        public private(set) var detector: VisitDetector
        /// The time of the latest checkpoint (given or taken).
        public private(set) var checkpointed: Double
        /// The departures decided, with the time of the point that decided each.
        public private(set) var stops: [(decided: Double, visit: Visit)] = []
        /// The trips decided (each with the arrival that ended it), with the time of that point.
        public private(set) var trips: [(decided: Double, trip: Trip)] = []
        /// The checkpoints taken: the state after the point at `time`.
        public private(set) var checkpoints: [(time: Double, state: VisitDetector)] = []
        /// The points the outlier filter marked, in the order it marked them: the store marks them in its
        /// `outlier` column. The coordinate is the point's when it was the point given (no position,
        /// inaccurate), `nil` for a jump (the point held before it: its time names it).
        public private(set) var outliers: [(time: Double, reason: OutlierFilter.Reason, coordinate: Coordinate?)] = []
        /// The point the detector held when it started (pending: the store marked it so).
        public let startPending: VisitDetector.Sample?
        /// The point the detector holds now (``VisitDetector/pending``): the store marks it
        /// ``StoredStops/pendingMark`` until the next point says whether it jumped. By its time and
        /// position: other points at the same time (another format's copy, a burst) are not it.
        public var pending: VisitDetector.Sample? { detector.pending }

        /// Starts from `state` (a fresh detector when `nil`), whose latest checkpoint was at
        /// `checkpointed` (`-infinity`: none), with `configuration` from the next point on (the
        /// store's: a state judged with another outlier threshold keeps its marks, and the points
        /// after it are judged with this one).
        public init(from state: VisitDetector?, checkpointed: Double, configuration: VisitDetector.Configuration) {
            detector = state ?? VisitDetector(configuration: configuration)
            detector.configuration = configuration
            self.checkpointed = checkpointed
            startPending = detector.pending
        }

        /// Takes the next stored point (in the store's time order).
        public mutating func add(time: Double, latitude: Double, longitude: Double, accuracy: Double?, speed: Double?) {
            let before = detector.lastGiven
            var departed = false
            // At most two points pass at once (a held one, then this one): no array for them.
            var first = VisitDetector.Decisions()
            var second = VisitDetector.Decisions()
            let coordinate = Coordinate(latitude: latitude, longitude: longitude)
            let verdict = detector.add(
                VisitDetector.Sample(
                    time: time, coordinate: coordinate, horizontalAccuracy: accuracy ?? -1, speed: speed ?? -1)
            ) { decisions in
                if first.isEmpty { first = decisions } else { second = decisions }
            }
            if let verdict {
                outliers.append((verdict.time, verdict.reason, verdict.reason == .jump ? nil : coordinate))
            }
            guard let t = detector.lastGiven, t != before else { return }
            for i in 0..<2 {
                let decisions = i == 0 ? first : second
                if let v = decisions.departure {
                    stops.append((t, v))
                    departed = true
                }
                if let trip = decisions.trip { trips.append((t, trip)) }
            }
            if before == nil || departed || t - checkpointed >= StoredStops.checkpointInterval {
                checkpoints.append((t, detector))
                checkpointed = t
            }
        }

        /// What was decided at or after `time`, as events of `device`, in order.
        public func events(device: String, since time: Double) -> [StopEvent] {
            var out: [StopEvent] = []
            out += stops.filter { $0.decided >= time }.map {
                StopEvent(device: device, decided: $0.decided, .stop($0.visit))
            }
            out += trips.filter { $0.decided >= time }.map {
                StopEvent(device: device, decided: $0.decided, .trip($0.trip))
            }
            return out.sorted { ($0.decided, $0.isStop ? 0 : 1) < ($1.decided, $1.isStop ? 0 : 1) }
        }
    }

    /// One stops query over stored points and stored decisions: the read-time detector from `from`
    /// until it meets a stored checkpoint.
    public struct Query: Sendable {
        /// The read-time detector from the query's `from` and what it decided before meeting a checkpoint.
        public var accumulator: StopsAccumulator
        let checkpointTimes: [Double]
        var next = 0
        var compared: Double?

        /// - Parameters:
        ///   - checkpointTimes: the times of the device's valid checkpoints in the query's range, in
        ///     order.
        ///   - configuration: the detector's: the first of those checkpoints' (the outlier threshold
        ///     it judged with), or the store's when there is none.
        public init(checkpointTimes: [Double], configuration: VisitDetector.Configuration) {
            accumulator = StopsAccumulator(configuration: configuration)
            self.checkpointTimes = checkpointTimes
        }

        /// Takes the next point of the range; returns a checkpoint's time when the detector has just
        /// taken the point at it: the caller compares the checkpoint's state (``meets(_:)``).
        public mutating func add(time: Double, latitude: Double, longitude: Double, accuracy: Double?, speed: Double?)
            -> Double?
        {
            accumulator.add(time: time, latitude: latitude, longitude: longitude, accuracy: accuracy, speed: speed)
            guard let t = accumulator.detector.lastGiven, t != compared else { return nil }
            while next < checkpointTimes.count && checkpointTimes[next] < t { next += 1 }
            guard next < checkpointTimes.count, checkpointTimes[next] == t else { return nil }
            compared = t
            return t
        }

        /// Whether the detector's state is `checkpoint`'s: then the stored decisions after it are the
        /// detector's own on the points after it.
        public func meets(_ checkpoint: VisitDetector) -> Bool { accumulator.detector == checkpoint }

        /// Says the detector did not meet `checkpoint` (``meets(_:)`` was false): it goes on with the
        /// checkpoint's configuration, as ingest did after it (the outlier threshold may have changed
        /// between two checkpoints: a restart with another `--max-accuracy`).
        public mutating func missed(_ checkpoint: VisitDetector) {
            accumulator.detector.configuration = checkpoint.configuration
        }

        /// The answer, once the detector met a checkpoint: what it decided until then, the stored
        /// stops and trips after the checkpoint up to the query's end, and the stored detector's
        /// state at the query's end (`final`), finished at `end` as the read-time path finishes.
        public func report(stops: [Visit], trips: [Trip], final: VisitDetector, end: Double) -> StopsReport {
            var a = accumulator
            a.report.stops += stops
            a.report.trips += trips
            a.detector = final
            return a.finish(at: end)
        }
    }
}

/// A finished stop or trip a store found in points it just stored: what the live stream publishes
/// as `{"type":"event","device":ID,"event":{"kind":"stop"|"trip",...}}`.
public struct StopEvent: Hashable, Sendable {
    /// A stop (a visit with its departure) or a trip.
    public enum Kind: Hashable, Sendable {
        case stop(Visit)
        case trip(Trip)
    }

    /// The device.
    public var device: String
    /// The time of the point that decided it (the departure confirmed, or the arrival that ended the
    /// trip), in seconds since 1970.
    public var decided: Double
    /// What was found.
    public var kind: Kind

    /// Creates an event.
    public init(device: String, decided: Double, _ kind: Kind) {
        self.device = device
        self.decided = decided
        self.kind = kind
    }

    var isStop: Bool {
        if case .stop = kind { return true }
        return false
    }
}

/// Where a store tells the stops and trips it found at ingest, batch by batch after each commit (this
/// process's ingest only: each instance sharing a PostgreSQL database tells what it stored). A late
/// point that changes what was decided after its time tells the new stops and trips again.
///
/// Handlers run on the thread that committed: they must return quickly and never wait.
public typealias StopEventFeed = Feed<StopEvent>
