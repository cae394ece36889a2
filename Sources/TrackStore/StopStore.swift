import Formats
import Geo
import LocationService

/// A device's stops and trips over a time range, as ``VisitDetector`` finds them in its stored points.
public struct StopsReport: Hashable, Sendable {
    /// The visits, by arrival; the last one may still be open (``Visit/departure`` `nil`).
    public var stops: [Visit]
    /// The trips between them, by start.
    public var trips: [Trip]
    /// The points the detector was given (from stops kept at ingest: the points read before the query
    /// met a checkpoint, see ``StoredStops``).
    public var points: Int

    /// Creates a report.
    public init(stops: [Visit] = [], trips: [Trip] = [], points: Int = 0) {
        self.stops = stops
        self.trips = trips
        self.points = points
    }
}

/// Feeds stored points to a ``VisitDetector`` one at a time and collects what it decides: the state
/// of one stops query. A few numbers and the (short) lists of stops and trips: a query over millions
/// of points costs the memory of its answer, not of its points.
public struct StopsAccumulator: Sendable {
    var detector: VisitDetector
    var report = StopsReport()

    /// Creates an accumulator with nothing seen.
    public init(configuration: VisitDetector.Configuration = VisitDetector.Configuration()) {
        detector = VisitDetector(configuration: configuration)
    }

    /// Takes the next point (in time order; one not after the last is ignored, as the detector does)
    /// through the detector's outlier filter (``VisitDetector/add(_:_:)``): an outlier is left out.
    ///
    /// - Parameters:
    ///   - accuracy: metres, `nil` when the point has none.
    ///   - speed: m/s, `nil` when the point has none.
    /// - Returns: the point this one marked as an outlier (itself, or the one before it: a jump).
    @inline(__always)
    @discardableResult
    public mutating func add(time: Double, latitude: Double, longitude: Double, accuracy: Double?, speed: Double?)
        -> OutlierFilter.Verdict?
    {
        report.points += 1
        return detector.add(
            VisitDetector.Sample(
                time: time, coordinate: Coordinate(latitude: latitude, longitude: longitude),
                horizontalAccuracy: accuracy ?? -1, speed: speed ?? -1)
        ) { decisions in
            guard !decisions.isEmpty else { return }
            if let v = decisions.departure { report.stops.append(v) }
            if let t = decisions.trip { report.trips.append(t) }
        }
    }

    /// The stops and trips, once the points up to `end` are in: a point the outlier filter still
    /// holds stays out (pending: ``VisitDetector/pending``, as on the device); a visit with no fix
    /// for longer than the detector's maximum gap before `end` ends at its last fix; one with recent
    /// fixes is listed open.
    public mutating func finish(at end: Double) -> StopsReport {
        var out = report
        if let v = detector.finish(at: end).departure { out.stops.append(v) }
        if let open = detector.currentVisit { out.stops.append(open) }
        return out
    }
}

/// The stops and trips facet of a store: ``VisitDetector``'s stops and trips in each device's stored
/// locations, kept at ingest (``StoredStops``: the detector's state per device, checkpoints, the
/// finished stops and trips), and the read-time path over the points as the reference the kept ones
/// are tested against (``StopStore/readTimeStops(device:from:to:configuration:)``).
public protocol StopStore: RecordStore {
    /// The stops and trips the store found in the points it stored, after each commit.
    var stopEvents: StopEventFeed { get }

    /// The outlier marks the store's detectors changed (newly marked, cleared), after each commit.
    var outlierMarks: OutlierMarkFeed { get }

    /// The stops and trips of `device` between `from` and `to` from the stored ones (the store's
    /// configuration, ``stopsConfiguration``), computing first what was never computed.
    func storedStops(device: String, from: Double, to: Double) async throws -> StopsReport

    /// The detector's configuration the store keeps stops and trips with, and judges outliers with at
    /// ingest: the default but for the outlier threshold (``setMaximumAccuracy(_:)``).
    var stopsConfiguration: VisitDetector.Configuration { get }

    /// Sets the horizontal accuracy, in metres, worse than which a location stored from now on is an
    /// outlier (`inaccurate`): `keeptrack serve --max-accuracy`. The default is 200.
    ///
    /// Each device's stored detector state (and each checkpoint of it) keeps the configuration it
    /// judged with. A new threshold holds from the next point the store runs the detector over:
    /// points already stored keep their marks, except those after the checkpoint a late point makes
    /// the detector run again from (at most ``StoredStops/checkpointInterval`` of points, judged again
    /// with the threshold in force). A query starts its detector with the threshold of the first
    /// checkpoint in its range, so its answer is the stored one.
    func setMaximumAccuracy(_ metres: Double)

    /// Returns once the stops and trips of every batch stored so far are kept and their events
    /// published (a store that runs its detectors after the batch's answer, in the background).
    func storedStopsSettled() async

    /// Feeds `accumulator` the valid locations of `device` stored between `from` and `to`
    /// (inclusive), by time; returns it.
    func streamLocations(device: String, from: Double, to: Double, into accumulator: StopsAccumulator) async throws
        -> StopsAccumulator
}

extension StopStore {
    /// A store that runs its detectors in the batch's own transaction is always settled.
    public func storedStopsSettled() async {}

    /// The stops and trips of `device` between `from` and `to`, found by ``VisitDetector`` in its
    /// stored locations (valid ones only; region transitions, visits and trips a device sent are not
    /// points), however they arrived: the same code finds them on the device.
    ///
    /// For the store's configuration (`nil`, the default: ``stopsConfiguration``) the answer is the
    /// stops and trips kept at ingest (``storedStops(device:from:to:)``): the same answer
    /// (``StoredStops``).
    ///
    /// - Complexity: stored: the stored stops and trips of the range, and the points from `from` to
    ///   the first checkpoint the detector meets (none without `from`) and from the last checkpoint
    ///   before `to` (at most ``StoredStops/checkpointInterval`` of them). Otherwise
    ///   (``readTimeStops(device:from:to:configuration:)``) O(n) in the points of the range. O(1) memory
    ///   besides the answer: points are streamed from the store.
    public func stops(
        device: String, from: Double = -.infinity, to: Double = .infinity,
        configuration: VisitDetector.Configuration? = nil
    ) async throws
        -> StopsReport
    {
        let configuration = configuration ?? stopsConfiguration
        if configuration == stopsConfiguration {
            return try await storedStops(device: device, from: from, to: to)
        }
        return try await readTimeStops(device: device, from: from, to: to, configuration: configuration)
    }

    /// The stops and trips of `device` between `from` and `to`, found by ``VisitDetector`` in its
    /// stored locations at each call (the reference the stored ones are tested against), with
    /// `configuration` (`nil`, the default: the store's, ``stopsConfiguration``).
    ///
    /// - Complexity: O(n) in the points of the range, O(1) memory besides the answer: the points
    ///   are streamed from the store.
    public func readTimeStops(
        device: String, from: Double = -.infinity, to: Double = .infinity,
        configuration: VisitDetector.Configuration? = nil
    ) async throws
        -> StopsReport
    {
        var accumulator = try await streamLocations(
            device: device, from: from, to: to,
            into: StopsAccumulator(configuration: configuration ?? stopsConfiguration))
        // The query's end, or (for an open range) the device's last point: a visit is "still there"
        // only when its last fix is recent.
        let end = to.isFinite ? to : (try await self.device(device)?.last ?? -.infinity)
        return accumulator.finish(at: end)
    }

    /// The valid locations of `device` in `trip`'s time span, by time: the trip's track.
    public func track(device: String, of trip: Trip) async throws -> [TrailRecord] {
        try await trail(device: device, from: trip.start, to: trip.end).filter { $0.kind == .location }
    }
}

extension StopsReport {
    /// The visits and trips as an SVG draws them.
    public var marks: TrailSVG.Marks {
        TrailSVG.Marks(
            visits: stops.map {
                TrailSVG.Marks.Visit(
                    center: $0.coordinate, radius: $0.horizontalAccuracy, arrival: $0.arrival,
                    departure: $0.departure)
            },
            trips: trips.map { TrailSVG.Marks.Trip(start: $0.start, end: $0.end, distance: $0.distance) })
    }

    /// GPX with one track per trip, cut from `records` (the trail the report was found in).
    public func tripsGPX(device: String, records: [TrailRecord]) -> [UInt8] {
        let locations = records.filter { $0.kind == .location && $0.valid }
        let tracks = trips.map { trip in
            TrailExport.TripTrack(
                start: trip.start, end: trip.end, distance: trip.distance,
                locations: locations.filter { $0.time >= trip.start && $0.time <= trip.end })
        }
        return TrailExport.gpx(device: device, trips: tracks)
    }
}
