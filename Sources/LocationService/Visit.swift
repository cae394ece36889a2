import Geo

/// A stay at one place, like CoreLocation's `CLVisit`: where, how precisely, from when until when.
///
/// A ``VisitDetector`` reports a visit twice: at arrival, with ``departure`` `nil` (the device is
/// still there, CLVisit's `distantFuture`), and at departure, with both times.
public struct Visit: Hashable, Sendable {
    /// The centre of the stay: the mean of its fixes, each weighted by the inverse square of its
    /// horizontal accuracy.
    public var coordinate: Coordinate
    /// How far the stay's fixes spread about ``coordinate``, in metres: the root mean square of their
    /// distances from it, weighted as the centre is (CLVisit's `horizontalAccuracy`).
    public var horizontalAccuracy: Double
    /// When the device came to the place, in seconds since 1970: the time of the first fix at rest
    /// inside the stay after the trip that led there (the stay's first fix, without such a trip).
    public var arrival: Double
    /// When it left, in seconds since 1970: the time of the last fix at rest inside the stay before the
    /// trip that left it (or of the last fix inside); `nil` while the device is still there.
    public var departure: Double?
    /// How many fixes the stay had inside it.
    public var fixCount: Int

    /// Creates a visit.
    public init(
        coordinate: Coordinate, horizontalAccuracy: Double, arrival: Double, departure: Double?,
        fixCount: Int
    ) {
        self.coordinate = coordinate
        self.horizontalAccuracy = horizontalAccuracy
        self.arrival = arrival
        self.departure = departure
        self.fixCount = fixCount
    }

    /// Seconds from arrival to departure; `nil` while the device is still there.
    public var duration: Double? { departure.map { $0 - arrival } }
}

extension Visit: CustomStringConvertible {
    /// Without the coordinate: places people stay at are personal data.
    public var description: String {
        "Visit(arrival: \(arrival), departure: \(departure.map { "\($0)" } ?? "nil"), "
            + "hAcc: \(horizontalAccuracy), fixes: \(fixCount), <coordinate redacted>)"
    }
}

/// The movement between two visits: from the departure of one to the arrival at the next.
///
/// Its figures come from the trail smoothed by ``TrackSmoother``, step by step (see
/// ``VisitDetector``): standing still adds no distance, and the average speed is never above the
/// maximum.
public struct Trip: Hashable, Sendable {
    /// The departure: the last (smoothed) fix at rest in the visit left, in seconds since 1970 (the
    /// visit's ``Visit/departure``).
    public var start: Double
    /// The arrival: the first fix at rest in the next visit, in seconds since 1970 (its
    /// ``Visit/arrival``).
    public var end: Double
    /// Where the trip began: the smoothed position at ``start``.
    public var startCoordinate: Coordinate
    /// Where the trip ended: the smoothed position at ``end``.
    public var endCoordinate: Coordinate
    /// Metres along the way: each step between two fixes that both report a speed is their mean speed
    /// times the time between them, each other step the distance between their smoothed positions;
    /// steps standing still count nothing.
    public var distance: Double
    /// The highest speed of the trip in m/s: the fastest step's (a fix's reported speed, or a step's
    /// distance between smoothed positions over its time; never below ``averageSpeed``).
    public var maximumSpeed: Double

    /// Creates a trip.
    public init(
        start: Double, end: Double, startCoordinate: Coordinate, endCoordinate: Coordinate,
        distance: Double, maximumSpeed: Double
    ) {
        self.start = start
        self.end = end
        self.startCoordinate = startCoordinate
        self.endCoordinate = endCoordinate
        self.distance = distance
        self.maximumSpeed = maximumSpeed
    }

    /// Seconds from start to end.
    public var duration: Double { end - start }

    /// The distance over the duration, in m/s; 0 for a trip without duration.
    public var averageSpeed: Double { duration > 0 ? distance / duration : 0 }
}

extension Trip: CustomStringConvertible {
    /// Without the coordinates: where people go is personal data.
    public var description: String {
        "Trip(start: \(start), end: \(end), distance: \(distance), maxSpeed: \(maximumSpeed), "
            + "<coordinates redacted>)"
    }
}
