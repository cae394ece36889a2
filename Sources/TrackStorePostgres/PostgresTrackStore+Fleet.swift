import Formats
import Logging
import PostgresNIO
import TrackStore

/// The fleet facet of the PostgreSQL store (``FleetStore``): the latest position kept in `devices` by
/// the insert statement, positions by box or distance through the GiST index on `positions.position`.
extension PostgresTrackStore: FleetStore {
    /// Migration `v2-fleet`: the credentials table and each device's latest valid position.
    static let fleetMigration: [String] = [
        """
        CREATE TABLE credentials (
            device text COLLATE "C" PRIMARY KEY,
            digest text NOT NULL UNIQUE,
            created timestamptz NOT NULL
        )
        """,
        """
        ALTER TABLE devices ADD COLUMN latest_time timestamptz, ADD COLUMN latest_lat double precision,
            ADD COLUMN latest_lon double precision, ADD COLUMN latest_alt double precision,
            ADD COLUMN latest_h_acc double precision, ADD COLUMN latest_speed double precision,
            ADD COLUMN latest_course double precision
        """,
        refreshLatestSQL(where: "TRUE"),
    ]

    /// Sets the latest position of the devices `condition` selects from their points: the newest
    /// valid one not at 0,0 (``positionSQL``).
    static func refreshLatestSQL(where condition: String) -> String {
        """
        UPDATE devices d SET (latest_time, latest_lat, latest_lon, latest_alt, latest_h_acc, latest_speed, latest_course) =
            (SELECT time, ST_Y(position::geometry), ST_X(position::geometry), alt, h_acc, speed, course FROM positions p
             WHERE p.device = d.id AND p.valid AND \(positionSQL) ORDER BY time DESC, seq DESC NULLS LAST, key DESC LIMIT 1)
        WHERE \(condition)
        """
    }

    public func latest(device: String?) async throws -> [LatestPosition] {
        var sql = """
            SELECT id, extract(epoch FROM latest_time)::float8, latest_lat, latest_lon, latest_alt, latest_h_acc,
                   latest_speed, latest_course, points, extract(epoch FROM last_received)::float8
            FROM devices WHERE latest_time IS NOT NULL
            """
        var binds = PostgresBindings()
        if let device {
            guard !device.utf8.contains(0) else { return [] }
            binds.append(device)
            sql += " AND id = $1"
        }
        sql += " ORDER BY id"
        var out: [LatestPosition] = []
        let rows = try await liveQuery(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        for try await row in rows {
            let (id, time, lat, lon, alt, hAcc, speed, course, points, received) = try row.decode(
                (String, Double, Double, Double, Double?, Double?, Double?, Double?, Int64, Double).self)
            out.append(
                LatestPosition(
                    device: id, time: time, latitude: lat, longitude: lon, altitude: alt,
                    horizontalAccuracy: hAcc, speed: speed, course: course, points: Int(points),
                    lastReceived: received))
        }
        return out
    }

    /// The GiST index is on `geography`, whose polygon edges are great circles, not parallels: the
    /// box the index is asked for is the area's box widened by 0.001° with its edges cut every 0.1°
    /// (a great circle strays from a parallel by under 3 m × tan(latitude) over 0.1°); the exact
    /// bounds are then checked on latitude and longitude, and a circle with `ST_DWithin` on the
    /// sphere (as SQLite's haversine).
    public func positions(
        in area: PositionArea, from: Double, to: Double, device: String?,
        after cursor: TrailCursor?, limit: Int
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        precondition(limit > 0, "a page holds at least one record")
        if let device, device.utf8.contains(0) { return ([], nil) }
        let b = area.bounds
        let pad = 0.001
        var binds = PostgresBindings()
        var bound = 0
        func parameter(_ value: some PostgresNonThrowingEncodable) -> String {
            binds.append(value)
            bound += 1
            return "$\(bound)"
        }
        let envelope =
            "ST_Segmentize(ST_MakeEnvelope(\(parameter(max(-180, b.west - pad))), "
            + "\(parameter(max(-90, b.south - pad))), \(parameter(min(180, b.east + pad))), "
            + "\(parameter(min(90, b.north + pad))), 4326), 0.1)::geography"
        var sql = """
            SELECT seq, kind, region, extract(epoch FROM time)::float8, ST_Y(position::geometry) AS lat,
                   ST_X(position::geometry) AS lon, alt, h_acc, v_acc, speed, course, valid, attributes::text, key, device,
                   span
            FROM positions WHERE position && \(envelope) AND valid
            """
        sql += " AND ST_Y(position::geometry) BETWEEN \(parameter(b.south)) AND \(parameter(b.north))"
        sql += " AND ST_X(position::geometry) BETWEEN \(parameter(b.west)) AND \(parameter(b.east))"
        if case let .near(latitude, longitude, radius) = area {
            sql +=
                " AND ST_DWithin(position, ST_SetSRID(ST_MakePoint(\(parameter(longitude)), \(parameter(latitude))), 4326)::geography, "
                + "\(parameter(radius)), false)"
        }
        if from.isFinite { sql += " AND time >= to_timestamp(\(parameter(from)))" }
        if to.isFinite { sql += " AND time <= to_timestamp(\(parameter(to)))" }
        if let device { sql += " AND device = \(parameter(device))" }
        if let cursor {
            let t = "to_timestamp(\(parameter(cursor.time)))"
            sql += " AND (time > \(t) OR (time = \(t) AND key > \(parameter(cursor.key))))"
        }
        sql += " ORDER BY time, key LIMIT \(parameter(Int64(limit + 1)))"
        return try await page(PostgresQuery(unsafeSQL: sql, binds: binds), limit: limit, cursorSequence: false)
    }
}
