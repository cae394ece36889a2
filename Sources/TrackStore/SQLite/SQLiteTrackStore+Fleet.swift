import Formats
import Geo
import GRDB

/// Queries across devices: each device's latest position (carried by the devices table, so a fleet
/// of 10,000 costs one scan of 10,000 rows), and who was in a box or near a place (a coarse grid
/// index on the points, then the exact test).
///
/// The grid: a point's `cell` is its latitude band and longitude column of 0.01° (about 1.1 km),
/// `band × 36001 + column`, a generated column (nothing to write at ingest but its index entry). A box
/// is one index seek per cell it touches (`cell IN (...) AND time BETWEEN`), or for a large box one index
/// range per band it spans; the exact bounds and the distance are then checked on each candidate. Cost
/// grows with the points in the box's cells within the time range, not with the store.
extension SQLiteTrackStore: FleetStore {
    /// Cells per degree of the grid.
    static let cellsPerDegree = 100.0
    /// Longitude columns per band (360 × 100 + 1).
    static let columnsPerBand = 36_001
    /// The most cells a box lists one by one (64 × 64: a box of about 70 km).
    static let cellsListedAtMost = 4_096
    static let positionColumns = """
        p.seq, p.kind, p.region, p.time, p.lat, p.lon, p.alt, p.hAcc, p.vAcc, p.speed, p.course, p.valid,
            p.attributes, p.key, p.device, p.span
        """

    static func registerFleetMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v5-fleet") { db in
            // The latest valid position of each device, kept by `insert` (and by retention), filled
            // once from what is stored.
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN latestTime REAL;
                    ALTER TABLE devices ADD COLUMN latestLat REAL;
                    ALTER TABLE devices ADD COLUMN latestLon REAL;
                    ALTER TABLE devices ADD COLUMN latestAlt REAL;
                    ALTER TABLE devices ADD COLUMN latestHAcc REAL;
                    ALTER TABLE devices ADD COLUMN latestSpeed REAL;
                    ALTER TABLE devices ADD COLUMN latestCourse REAL;
                    ALTER TABLE points ADD COLUMN cell INTEGER GENERATED ALWAYS AS
                        (CAST((lat + 90) * 100 AS INTEGER) * 36001 + CAST((lon + 180) * 100 AS INTEGER)) VIRTUAL;
                    CREATE INDEX points_cell ON points (cell, time);
                    """)
            for id in try String.fetchAll(db, sql: "SELECT id FROM devices") {
                try refreshLatest(db, device: id)
            }
        }
    }

    /// A point at 0,0 (a phone's "null island": no position) is never a device's latest position:
    /// the devices whose latest is one get it again from their points.
    static func registerLatestMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v17-latest-not-null-island") { db in
            for id in try String.fetchAll(db, sql: "SELECT id FROM devices WHERE latestLat = 0 AND latestLon = 0") {
                try refreshLatest(db, device: id)
            }
        }
    }

    /// Sets the devices table's latest position of `device` from its points (after a deletion): the
    /// newest valid one not at 0,0.
    static func refreshLatest(_ db: Database, device: String) throws {
        try db.execute(
            sql: """
                UPDATE devices SET (latestTime, latestLat, latestLon, latestAlt, latestHAcc, latestSpeed, latestCourse) =
                    (SELECT time, lat, lon, alt, hAcc, speed, course FROM points
                     WHERE device = ?1 AND valid = 1 AND (lat <> 0 OR lon <> 0) ORDER BY time DESC, seq DESC, key DESC LIMIT 1)
                WHERE id = ?1
                """, arguments: [device])
    }

    /// Records `r` as the latest position of its device when it is no older than the one kept
    /// (called by `insert` once per device and batch, after the device's row is written, with its
    /// newest valid record not at 0,0).
    static func noteLatest(_ db: Database, _ r: TrailRecord) throws {
        try db.cachedStatement(
            sql: """
                UPDATE devices SET latestTime = ?, latestLat = ?, latestLon = ?, latestAlt = ?, latestHAcc = ?,
                    latestSpeed = ?, latestCourse = ?
                WHERE id = ? AND (latestTime IS NULL OR latestTime <= ?)
                """
        ).execute(arguments: [
            r.time, r.latitude, r.longitude, r.altitude, r.horizontalAccuracy, r.speed,
            r.course, r.device, r.time,
        ])
    }

    /// Each device's latest valid position, by device id (devices without one are left out); only
    /// `device`'s when given.
    ///
    /// - Complexity: O(devices): one scan of the devices table, no points read.
    public func latest(device: String?) async throws -> [LatestPosition] {
        try await pool.read { db in
            var sql = """
                SELECT id, latestTime, latestLat, latestLon, latestAlt, latestHAcc, latestSpeed, latestCourse, points,
                    lastReceived FROM devices WHERE latestTime IS NOT NULL
                """
            var arguments: StatementArguments = []
            if let device {
                sql += " AND id = ?"
                arguments += [device]
            }
            sql += " ORDER BY id"
            var out: [LatestPosition] = []
            let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
            while let row = try rows.next() {
                out.append(
                    LatestPosition(
                        device: row[0], time: row[1], latitude: row[2], longitude: row[3], altitude: row[4],
                        horizontalAccuracy: row[5], speed: row[6], course: row[7], points: row[8],
                        lastReceived: row[9]))
            }
            return out
        }
    }

    /// One page of the valid positions in `area` between `from` and `to` (seconds since 1970), of
    /// every device or only `device`, by time then key, starting after `cursor`; `next` is where
    /// the following page starts, or `nil` on the last page.
    ///
    /// - Complexity: proportional to the points stored in the grid cells the area's box touches
    ///   (within the time range: the index is `(cell, time)`), plus a sort of those that match.
    public func positions(
        in area: PositionArea, from: Double, to: Double, device: String?,
        after cursor: TrailCursor?, limit: Int
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        precondition(limit > 0, "a page holds at least one record")
        let b = area.bounds
        let k = Self.cellsPerDegree
        let rows = (Int((b.south + 90) * k), Int((b.north + 90) * k))
        let columns = (Int((b.west + 180) * k), Int((b.east + 180) * k))
        // A small box lists its cells (`cell IN (...)`), so that the index seeks each cell's time range;
        // a large one takes each band's run of cells as one range, with the time checked on each entry.
        // Not a join with a table of cells: SQLite 3.40.1 (Debian 12's) answers that join with a bloom
        // filter on the generated column and finds no rows at all in a store of millions (bench-fleet).
        let count = (rows.1 - rows.0 + 1) * (columns.1 - columns.0 + 1)
        var sql: String
        var arguments: StatementArguments
        if count <= Self.cellsListedAtMost {
            let cells = (rows.0...rows.1).flatMap { row in
                (columns.0...columns.1).map { String(row * Self.columnsPerBand + $0) }
            }
            sql = "SELECT \(Self.positionColumns) FROM points p WHERE p.cell IN (\(cells.joined(separator: ",")))"
            arguments = []
        } else {
            sql = """
                WITH RECURSIVE band(row) AS (SELECT ? UNION ALL SELECT row + 1 FROM band WHERE row < ?)
                SELECT \(Self.positionColumns)
                FROM band CROSS JOIN points p ON p.cell BETWEEN band.row * \(Self.columnsPerBand) + ?
                    AND band.row * \(Self.columnsPerBand) + ?
                WHERE 1
                """
            arguments = [rows.0, rows.1, columns.0, columns.1]
        }
        sql += """
             AND p.lat >= ? AND p.lat <= ? AND p.lon >= ? AND p.lon <= ? AND p.time >= ? AND p.time <= ?
                AND p.valid = 1
            """
        arguments += [b.south, b.north, b.west, b.east, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]
        if case let .near(latitude, longitude, radius) = area {
            sql += " AND keeptrack_distance(p.lat, p.lon, ?, ?) <= ?"
            arguments += [latitude, longitude, radius]
        }
        if let device {
            sql += " AND p.device = ?"
            arguments += [device]
        }
        if let cursor {
            sql += " AND (p.time > ? OR (p.time = ? AND p.key > ?))"
            arguments += [cursor.time, cursor.time, cursor.key]
        }
        sql += " ORDER BY p.time, p.key LIMIT ?"
        arguments += [limit + 1]
        return try await pool.read { [sql, arguments] db in
            try Self.page(db, sql: sql, arguments: arguments, limit: limit) { row in
                (Self.record(row, device: row[14]), TrailCursor(time: row[3], sequence: nil, key: row[13]))
            }
        }
    }

    /// The SQL functions the fleet queries use: `keeptrack_distance(lat1, lon1, lat2, lon2)`, metres
    /// on the mean sphere (``Geodesy/haversineDistance(_:_:)``).
    static func addFleetFunctions(_ db: Database) {
        db.add(
            function: DatabaseFunction("keeptrack_distance", argumentCount: 4, pure: true) { values in
                guard let lat1 = Double.fromDatabaseValue(values[0]), let lon1 = Double.fromDatabaseValue(values[1]),
                    let lat2 = Double.fromDatabaseValue(values[2]), let lon2 = Double.fromDatabaseValue(values[3])
                else { return nil }
                return Geodesy.haversineDistance(
                    Coordinate(latitude: lat1, longitude: lon1),
                    Coordinate(latitude: lat2, longitude: lon2))
            })
    }
}
