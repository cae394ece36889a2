import Foundation
import Geo
import LocationService

/// A device's statistics by day, week or month in a time zone, from aggregates a store keeps at
/// ingest (``StatisticsStore``), never from its points.
///
/// **The aggregate.** Per device and UTC quarter hour (a *bucket*, ``bucketSeconds``), what the
/// stored trips and visits (``StoredStops``) put in it: metres travelled, seconds moving (in trips),
/// seconds stopped (in visits), the trips that start in it, whether a trip is under way at its start,
/// and the highest maximum speed of the trips that overlap it. A quarter hour because every zone's
/// offset from UTC in use since 1972 is a whole number of quarter hours (India's +5:30, Nepal's
/// +5:45, Chatham's +12:45): a day, week or month of any zone is a whole run of buckets. A year is at
/// most 35,136 buckets per device, a few hundred kilobytes; a bucket holds no row when nothing
/// happened in it.
///
/// **Splitting.** A trip or a visit over a bucket's boundary puts in each bucket its seconds there;
/// a trip's metres are split in proportion to its seconds (the stored trip holds no more: its
/// distance is the detector's, smoothed or not, as `/trips` gives it). A trip's maximum speed counts
/// in every bucket it overlaps.
///
/// **Counting.** A period counts the trips and the visits that overlap it (a trip from 23:50 to 00:20
/// counts on both days); the totals count each once. Trips are counted from the buckets (those that
/// start in the period, plus the one under way at its start: trips never overlap each other); visits
/// and their places from the stored visits of the range, which a statistics query reads (a few a day).
/// Distinct places are the visits' names when they have one (an area of the user's, a reverse
/// geocoder's); visits without one within 50 m of one another are one place (``placeKeys(_:names:)``).
///
/// **Kept true.** The buckets are a function of the stored trips and visits: a store marks the time
/// span of each trip or visit it inserts or deletes (a trigger) and rebuilds the buckets of the span
/// marked, from the trips and visits that overlap it, in the same transaction. A late point that
/// changes what the detector decided, and retention deleting old trips and visits, change the buckets
/// with them (retention leaves no statistics of deleted points: kept statistics and kept points agree).
public enum Statistics {
    /// A bucket's length: a quarter hour.
    public static let bucketSeconds = 900.0

    /// The most periods one answer holds (ten years of days).
    public static let maximumPeriods = 3700

    /// The calendar period of an answer's rows.
    public enum Period: String, Sendable, Hashable, CaseIterable {
        case day, week, month
    }

    /// A bucket's figures, as a store keeps them.
    public struct Bucket: Hashable, Sendable {
        /// The bucket: its start is `index × 900` seconds since 1970.
        public var index: Int64
        /// Metres travelled in trips.
        public var distance: Double = 0
        /// Seconds in trips.
        public var moving: Double = 0
        /// Seconds in (stored) visits.
        public var stopped: Double = 0
        /// The trips that start in it.
        public var tripStarts: Int = 0
        /// Whether a trip started before it and is still under way at its start.
        public var tripCarried = false
        /// The highest maximum speed (m/s) of the trips that overlap it, `nil` for none.
        public var maxSpeed: Double?

        public init(
            index: Int64, distance: Double = 0, moving: Double = 0, stopped: Double = 0, tripStarts: Int = 0,
            tripCarried: Bool = false, maxSpeed: Double? = nil
        ) {
            (self.index, self.distance, self.moving, self.stopped) = (index, distance, moving, stopped)
            (self.tripStarts, self.tripCarried, self.maxSpeed) = (tripStarts, tripCarried, maxSpeed)
        }
    }

    /// A visit of a statistics query: a stored one, or the device's open one (which no bucket holds),
    /// up to its last point.
    public struct VisitSpan: Hashable, Sendable {
        public var arrival: Double
        /// Its departure, or for the open visit the time of its last point.
        public var end: Double
        public var coordinate: Coordinate
        /// Whether it is the open visit (its seconds are not in the buckets).
        public var open: Bool

        public init(arrival: Double, end: Double, coordinate: Coordinate, open: Bool = false) {
            (self.arrival, self.end, self.coordinate, self.open) = (arrival, end, coordinate, open)
        }

        func overlaps(_ start: Double, _ end: Double) -> Bool {
            (arrival < end && self.end > start) || (arrival >= start && arrival < end)
        }
    }

    /// What a store reads for one statistics query, in one snapshot.
    public struct Source: Hashable, Sendable {
        /// The buckets of the range that hold something, by index.
        public var buckets: [Bucket]
        /// The visits that overlap the range, by arrival (the open one last).
        public var visits: [VisitSpan]

        public init(buckets: [Bucket] = [], visits: [VisitSpan] = []) {
            self.buckets = buckets
            self.visits = visits
        }
    }

    /// One period's figures (or the totals').
    public struct Figures: Hashable, Sendable {
        public var start: Double
        public var end: Double
        /// Metres.
        public var distance = 0.0
        /// Seconds in trips.
        public var movingDuration = 0.0
        /// Seconds in visits.
        public var stoppedDuration = 0.0
        /// Trips that overlap it.
        public var trips = 0
        /// Visits that overlap it.
        public var visits = 0
        /// m/s, `nil` without trips.
        public var maxSpeed: Double?
        /// Distinct places of its visits.
        public var places = 0

        public init(start: Double, end: Double) {
            self.start = start
            self.end = end
        }
    }

    /// An answer: its periods and their totals.
    public struct Report: Hashable, Sendable {
        public var periods: [Figures]
        public var totals: Figures

        public init(periods: [Figures], totals: Figures) {
            self.periods = periods
            self.totals = totals
        }
    }

    /// The bucket of time `t`.
    public static func bucket(_ t: Double) -> Int64 {
        Int64((min(max(t, -1e15), 1e15) / bucketSeconds).rounded(.down))
    }

    /// The buckets of indices `range`, from the visits and trips that overlap them: what a store keeps
    /// for them (the empty ones left out), by index.
    ///
    /// - Parameters:
    ///   - visits: stored visits, `(arrival, departure)`.
    ///   - trips: stored trips.
    public static func buckets(
        _ range: Range<Int64>, visits: [(arrival: Double, departure: Double)], trips: [Trip]
    ) -> [Bucket] {
        var out: [Int64: Bucket] = [:]
        /// Calls `body` with each bucket of `range` that `[start, end]` touches and the seconds of it there.
        func spread(_ start: Double, _ end: Double, _ body: (inout Bucket, _ seconds: Double, _ starts: Bool) -> Void) {
            let end = max(start, end)
            let first = max(range.lowerBound, bucket(start)), last = min(range.upperBound - 1, bucket(end))
            guard first <= last else { return }
            for k in first...last {
                let lo = Double(k) * bucketSeconds, hi = lo + bucketSeconds
                let seconds = max(0, min(end, hi) - max(start, lo))
                let starts = start >= lo && start < hi
                // A span ending exactly at the bucket's start touches nothing there.
                guard seconds > 0 || starts else { continue }
                var b = out[k] ?? Bucket(index: k)
                body(&b, seconds, starts)
                out[k] = b
            }
        }
        for v in visits {
            spread(v.arrival, v.departure) { b, seconds, _ in b.stopped += seconds }
        }
        for t in trips {
            let duration = t.end - t.start
            spread(t.start, t.end) { b, seconds, starts in
                b.moving += seconds
                b.distance += duration > 0 ? t.distance * seconds / duration : (starts ? t.distance : 0)
                if starts {
                    b.tripStarts += 1
                } else if Double(b.index) * bucketSeconds > t.start {
                    b.tripCarried = true
                }
                b.maxSpeed = max(b.maxSpeed ?? -.infinity, t.maximumSpeed)
            }
        }
        return out.values.sorted { $0.index < $1.index }
    }

    /// The figures of each period and the totals of all.
    ///
    /// - Parameters:
    ///   - periods: whole buckets each (starts and ends multiples of ``bucketSeconds``), in order,
    ///     each ending where the next starts.
    ///   - names: the name of each of `source.visits` (`nil`: none); a visit without one is its cell.
    /// - Complexity: O(b + v × p') for b buckets, v visits and the p' periods each overlaps.
    public static func report(_ source: Source, periods: [(start: Double, end: Double)], names: [String?]) -> Report {
        precondition(names.count == source.visits.count, "a name (or nil) per visit")
        let keys = placeKeys(source.visits.map(\.coordinate), names: names)
        let buckets = source.buckets
        /// The first bucket at or after index `k`.
        func position(_ k: Int64) -> Int {
            var lo = 0, hi = buckets.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if buckets[mid].index < k { lo = mid + 1 } else { hi = mid }
            }
            return lo
        }
        func figures(_ start: Double, _ end: Double) -> Figures {
            var f = Figures(start: start, end: end)
            let first = bucket(start), past = bucket(end)
            var i = position(first)
            if i < buckets.count, buckets[i].index == first, buckets[i].tripCarried { f.trips += 1 }
            while i < buckets.count, buckets[i].index < past {
                let b = buckets[i]
                f.distance += b.distance
                f.movingDuration += b.moving
                f.stoppedDuration += b.stopped
                f.trips += b.tripStarts
                if let s = b.maxSpeed { f.maxSpeed = max(f.maxSpeed ?? s, s) }
                i += 1
            }
            var places = Set<String>()
            for (k, v) in source.visits.enumerated() where v.overlaps(start, end) {
                f.visits += 1
                places.insert(keys[k])
                if v.open { f.stoppedDuration += max(0, min(v.end, end) - max(v.arrival, start)) }
            }
            f.places = places.count
            return f
        }
        let rows = periods.map { figures($0.start, $0.end) }
        let totals =
            periods.isEmpty ? Figures(start: 0, end: 0) : figures(periods.first!.start, periods.last!.end)
        return Report(periods: rows, totals: totals)
    }

    /// Visits without a name this close to one another, in metres, are one place (the visit
    /// detector's smallest radius: two stays closer than that are one spot).
    public static let placeRadius = 50.0

    /// The place of each visit at `coordinates`, to count distinct ones: its name when it has one;
    /// else the unnamed visits within ``placeRadius`` of one another, through chains of them, are
    /// one place (keyed by its first visit). Fixed cells would split two visits 2 m apart that
    /// straddle a cell's edge.
    ///
    /// - Complexity: O(v log v) for v visits, and the pairs within ``placeRadius`` north-south.
    static func placeKeys(_ coordinates: [Coordinate], names: [String?]) -> [String] {
        var parent = Array(coordinates.indices)
        func root(_ i: Int) -> Int {
            var i = i
            while parent[i] != i {
                parent[i] = parent[parent[i]]
                i = parent[i]
            }
            return i
        }
        // By latitude: a pair farther apart north-south than the radius is never compared.
        let unnamed = coordinates.indices.filter { names[$0] == nil }.sorted {
            coordinates[$0].latitude < coordinates[$1].latitude
        }
        let degrees = placeRadius / (Geodesy.meanRadius * .pi / 180)
        for (n, i) in unnamed.enumerated() {
            for j in unnamed[(n + 1)...] {
                guard coordinates[j].latitude - coordinates[i].latitude <= degrees else { break }
                guard Geodesy.distance(coordinates[i], coordinates[j]) <= placeRadius else { continue }
                let (a, b) = (root(i), root(j))
                if a != b { parent[max(a, b)] = min(a, b) }
            }
        }
        return coordinates.indices.map { names[$0] ?? "\u{0}\(root($0))" }
    }

    /// The ranges of bucket indices `spans` cover, overlapping and touching ones merged, in order.
    public static func merged(_ spans: [(Int64, Int64)]) -> [Range<Int64>] {
        var out: [Range<Int64>] = []
        for (lo, hi) in spans.sorted(by: { $0.0 < $1.0 }) where lo < hi {
            if let last = out.last, lo <= last.upperBound {
                out[out.count - 1] = last.lowerBound..<max(last.upperBound, hi)
            } else {
                out.append(lo..<hi)
            }
        }
        return out
    }

    /// The device's open visit as its stored detector holds it (up to its last point), when it
    /// overlaps `[from, to)`.
    public static func openVisit(_ detector: VisitDetector, from: Double, to: Double) -> VisitSpan? {
        guard let v = detector.currentVisit, let last = detector.lastTime else { return nil }
        let span = VisitSpan(arrival: v.arrival, end: max(v.arrival, last), coordinate: v.coordinate, open: true)
        return span.overlaps(from, to) ? span : nil
    }

    /// About how many periods of `by` overlap `[from, to)` (by their nominal lengths: a day of 24 hours,
    /// a month of 28 days): an answer far larger than ``maximumPeriods`` is refused before its calendar
    /// is walked (the periods walked are counted again).
    public static func leastPeriodCount(from: Double, to: Double, by: Period) -> Double {
        let length: Double =
            switch by {
            case .day: 86_400
            case .week: 604_800
            case .month: 2_419_200
            }
        return max(0, (to - from) / length - 1)
    }

    /// The start of the period of `by` in `zone` that holds `t`, to the nearest quarter hour.
    public static func periodStart(containing t: Double, by: Period, zone: TimeZone) -> Double {
        interval(containing: t, by: by, zone: zone)?.start ?? (t / bucketSeconds).rounded(.down) * bucketSeconds
    }

    /// The end of the period of `by` in `zone` that holds `t`, to the nearest quarter hour.
    public static func periodEnd(containing t: Double, by: Period, zone: TimeZone) -> Double {
        interval(containing: t, by: by, zone: zone)?.end ?? ((t / bucketSeconds).rounded(.down) + 1) * bucketSeconds
    }

    static func calendar(_ zone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        calendar.firstWeekday = 2
        calendar.minimumDaysInFirstWeek = 4
        return calendar
    }

    static func component(_ by: Period) -> Calendar.Component {
        switch by {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
    }

    static func interval(containing t: Double, by: Period, zone: TimeZone) -> (start: Double, end: Double)? {
        guard let i = calendar(zone).dateInterval(of: component(by), for: Date(timeIntervalSince1970: t)) else {
            return nil
        }
        func quarter(_ t: Double) -> Double { (t / bucketSeconds).rounded() * bucketSeconds }
        return (quarter(i.start.timeIntervalSince1970), quarter(i.end.timeIntervalSince1970))
    }

    /// The periods of `by` in `zone` (weeks start on Monday) that overlap `[from, to)`, cut to it;
    /// `from` taken up and `to` down to a quarter hour, and every boundary to the nearest quarter hour
    /// (a zone's offsets before 1972 were not always whole quarter hours).
    ///
    /// - Precondition: ``leastPeriodCount(from:to:by:)`` at most ``maximumPeriods``, `from` and `to` finite.
    public static func periods(from: Double, to: Double, by: Period, zone: TimeZone) -> [(start: Double, end: Double)] {
        precondition(from.isFinite && to.isFinite, "a finite range")
        let lo = (from / bucketSeconds).rounded(.up) * bucketSeconds
        let hi = (to / bucketSeconds).rounded(.down) * bucketSeconds
        guard lo < hi else { return [] }
        let calendar = calendar(zone)
        let component = component(by)
        func quarter(_ t: Double) -> Double { (t / bucketSeconds).rounded() * bucketSeconds }
        var out: [(Double, Double)] = []
        var cursor = lo
        while cursor < hi {
            guard let interval = calendar.dateInterval(of: component, for: Date(timeIntervalSince1970: cursor))
            else { break }
            var end = quarter(interval.end.timeIntervalSince1970)
            // A boundary rounded back to the cursor (or before it) would never move on.
            if end <= cursor { end = cursor + bucketSeconds }
            out.append((cursor, min(end, hi)))
            cursor = end
        }
        return out
    }
}

/// The statistics facet of a store: the aggregates of ``Statistics``, kept at ingest from the stored
/// trips and visits (in the batch's transaction on SQLite, by the stops' catch-up on PostgreSQL).
public protocol StatisticsStore: StopStore {
    /// The buckets of `device` between `from` and `to` (multiples of ``Statistics/bucketSeconds``),
    /// and the visits that overlap them (its open visit too), read in one snapshot, computing first
    /// what was never computed.
    ///
    /// - Complexity: the buckets of the range (at most 96 a day) and its visits; no point is read
    ///   (but a device's never computed stops, once, as a stops query computes them).
    func statisticsSource(device: String, from: Double, to: Double) async throws -> Statistics.Source
}
