import Geo
import LocationService
import Logging
import PostgresNIO
import TrackStore

/// The statistics of ``Statistics`` on PostgreSQL: buckets of a quarter hour per device
/// (`stat_buckets`), rebuilt from the stored trips and visits over the spans that row triggers on
/// `stops` and `trips` mark (`stat_dirty`), in the transaction of the stops' catch-up that changed
/// them (which holds the device's `stop_detectors` row) or, for spans marked by retention or an
/// upgrade, before the next statistics query of the device.
extension PostgresTrackStore: StatisticsStore {
    static let statisticsMigration = [
        """
        CREATE TABLE stat_buckets (
            device text COLLATE "C" NOT NULL, bucket bigint NOT NULL, distance float8 NOT NULL,
            moving float8 NOT NULL, stopped float8 NOT NULL, trip_starts integer NOT NULL,
            trip_carried boolean NOT NULL, max_speed float8, PRIMARY KEY (device, bucket)
        )
        """,
        "CREATE TABLE stat_dirty (device text COLLATE \"C\" NOT NULL, lo float8 NOT NULL, hi float8 NOT NULL)",
        "CREATE INDEX stat_dirty_device ON stat_dirty (device)",
        "CREATE INDEX stops_departure ON stops (device, departure)",
        "CREATE INDEX trips_end ON trips (device, trip_end)",
        """
        CREATE FUNCTION keeptrack_stat_stops() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'INSERT' THEN INSERT INTO stat_dirty VALUES (OLD.device, OLD.arrival, OLD.departure); END IF;
            IF TG_OP <> 'DELETE' THEN INSERT INTO stat_dirty VALUES (NEW.device, NEW.arrival, NEW.departure); END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE FUNCTION keeptrack_stat_trips() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'INSERT' THEN INSERT INTO stat_dirty VALUES (OLD.device, OLD.trip_start, OLD.trip_end); END IF;
            IF TG_OP <> 'DELETE' THEN INSERT INTO stat_dirty VALUES (NEW.device, NEW.trip_start, NEW.trip_end); END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER stops_statistics AFTER INSERT OR UPDATE OR DELETE ON stops
            FOR EACH ROW EXECUTE FUNCTION keeptrack_stat_stops()
        """,
        """
        CREATE TRIGGER trips_statistics AFTER INSERT OR UPDATE OR DELETE ON trips
            FOR EACH ROW EXECUTE FUNCTION keeptrack_stat_trips()
        """,
        "INSERT INTO stat_dirty SELECT device, min(arrival), max(departure) FROM stops GROUP BY device",
        "INSERT INTO stat_dirty SELECT device, min(trip_start), max(trip_end) FROM trips GROUP BY device",
    ]

    /// Rebuilds the buckets of the spans marked for `device` and clears its marks, in `c`'s
    /// transaction (which holds the device's `stop_detectors` row).
    static func rebuildStatistics(_ c: PostgresConnection, device: String, logger: Logger) async throws {
        var spans: [(Int64, Int64)] = []
        for try await (lo, hi) in try await c.query(
            "DELETE FROM stat_dirty WHERE device = \(device) RETURNING lo, hi", logger: logger
        ).decode((Double, Double).self) {
            spans.append((Statistics.bucket(lo), Statistics.bucket(hi) + 1))
        }
        try await rebuildBuckets(c, device: device, spans: spans, logger: logger)
    }

    /// ``rebuildStatistics(_:device:logger:)`` for several devices (their rows held): their marks
    /// taken in one statement, then the buckets of each device that had some.
    static func rebuildStatistics(_ c: PostgresConnection, devices: [String], logger: Logger) async throws {
        guard !devices.isEmpty else { return }
        var spans: [String: [(Int64, Int64)]] = [:]
        for try await (device, lo, hi) in try await c.query(
            "DELETE FROM stat_dirty WHERE device = ANY (\(PostgresArray.texts(devices))::text[]) RETURNING device, lo, hi",
            logger: logger
        ).decode((String, Double, Double).self) {
            spans[device, default: []].append((Statistics.bucket(lo), Statistics.bucket(hi) + 1))
        }
        for (device, marked) in spans.sorted(by: { $0.key < $1.key }) {
            try await rebuildBuckets(c, device: device, spans: marked, logger: logger)
        }
    }

    /// Rebuilds `device`'s buckets over the marked `spans` (bucket ranges, their ends excluded).
    static func rebuildBuckets(_ c: PostgresConnection, device: String, spans: [(Int64, Int64)], logger: Logger)
        async throws
    {
        for range in Statistics.merged(spans) {
            let lo = Double(range.lowerBound) * Statistics.bucketSeconds
            let hi = Double(range.upperBound) * Statistics.bucketSeconds
            try await c.query(
                """
                DELETE FROM stat_buckets WHERE device = \(device) AND bucket >= \(range.lowerBound)
                AND bucket < \(range.upperBound)
                """, logger: logger)
            var visits: [(arrival: Double, departure: Double)] = []
            for try await (a, d) in try await c.query(
                "SELECT arrival, departure FROM stops WHERE device = \(device) AND departure >= \(lo) AND arrival < \(hi)",
                logger: logger
            ).decode((Double, Double).self) { visits.append((a, d)) }
            var trips: [Trip] = []
            for try await (s, e, distance, speed) in try await c.query(
                """
                SELECT trip_start, trip_end, distance, max_speed FROM trips
                WHERE device = \(device) AND trip_end >= \(lo) AND trip_start < \(hi)
                """, logger: logger
            ).decode((Double, Double, Double, Double).self) {
                trips.append(
                    Trip(
                        start: s, end: e, startCoordinate: Coordinate(latitude: 0, longitude: 0),
                        endCoordinate: Coordinate(latitude: 0, longitude: 0), distance: distance, maximumSpeed: speed))
            }
            let buckets = Statistics.buckets(range, visits: visits, trips: trips)
            guard !buckets.isEmpty else { continue }
            var binds = PostgresBindings()
            binds.append(device)
            binds.append(PostgresArray.integers(buckets.map { $0.index }))
            binds.append(PostgresArray.doubles(buckets.map { $0.distance }))
            binds.append(PostgresArray.doubles(buckets.map { $0.moving }))
            binds.append(PostgresArray.doubles(buckets.map { $0.stopped }))
            binds.append(PostgresArray.integers(buckets.map { Int64($0.tripStarts) }))
            binds.append(PostgresArray.bools(buckets.map { $0.tripCarried }))
            binds.append(PostgresArray.doubles(buckets.map { $0.maxSpeed }))
            try await c.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO stat_buckets (device, bucket, distance, moving, stopped, trip_starts, trip_carried,
                            max_speed)
                        SELECT $1, * FROM unnest($2::int8[], $3::float8[], $4::float8[], $5::float8[], $6::int8[],
                            $7::bool[], $8::float8[])
                        """, binds: binds), logger: logger)
        }
    }

    public func statisticsSource(device: String, from: Double, to: Double) async throws -> Statistics.Source {
        guard !device.utf8.contains(0) else { return Statistics.Source() }
        if try await stopsMarked(device: device) {
            _ = try await retryingConflicts { try await self.advanceStoredStops(device: device, computingAll: true) }
        }
        var marked = false
        for try await _ in try await liveQuery(
            "SELECT 1 FROM stat_dirty WHERE device = \(device) LIMIT 1", logger: logger
        ).decode(Int32.self) { marked = true }
        if marked {
            try await retryingConflicts {
                try await self.withLiveConnection { connection in
                    try await connection.withTransaction(logger: self.logger) { c in
                        try await c.query(
                            "SELECT 1 FROM stop_detectors WHERE device = \(device) FOR UPDATE", logger: self.logger)
                        try await Self.rebuildStatistics(c, device: device, logger: self.logger)
                    }
                }
            }
        }
        return try await withLiveConnection { c in
            try await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: self.logger)
            do {
                let source = try await self.statisticsSource(c, device: device, from: from, to: to)
                try await c.query("COMMIT", logger: self.logger)
                return source
            } catch {
                _ = try? await c.query("ROLLBACK", logger: self.logger)
                throw error
            }
        }
    }

    func statisticsSource(_ c: PostgresConnection, device: String, from: Double, to: Double) async throws
        -> Statistics.Source
    {
        var source = Statistics.Source()
        let first = Statistics.bucket(from), past = Statistics.bucket(to)
        for try await (k, distance, moving, stopped, starts, carried, speed) in try await c.query(
            """
            SELECT bucket, distance, moving, stopped, trip_starts, trip_carried, max_speed FROM stat_buckets
            WHERE device = \(device) AND bucket >= \(first) AND bucket < \(past) ORDER BY bucket
            """, logger: logger
        ).decode((Int64, Double, Double, Double, Int32, Bool, Double?).self) {
            source.buckets.append(
                Statistics.Bucket(
                    index: k, distance: distance, moving: moving, stopped: stopped, tripStarts: Int(starts),
                    tripCarried: carried, maxSpeed: speed))
        }
        let lo = max(from, -1e300), hi = min(to, 1e300)
        for try await (a, d, lat, lon) in try await c.query(
            """
            SELECT arrival, departure, lat, lon FROM stops
            WHERE device = \(device) AND departure >= \(lo) AND arrival < \(hi) ORDER BY arrival
            """, logger: logger
        ).decode((Double, Double, Double, Double).self) {
            source.visits.append(
                Statistics.VisitSpan(arrival: a, end: d, coordinate: Coordinate(latitude: lat, longitude: lon)))
        }
        for try await text in try await c.query(
            "SELECT state FROM stop_detectors WHERE device = \(device)", logger: logger
        ).decode(String?.self) {
            if let text,
                let open = Statistics.openVisit(
                    try StoredStops.decode(text, device: device, at: nil), from: from, to: to)
            {
                source.visits.append(open)
            }
        }
        return source
    }
}
