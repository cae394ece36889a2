import Formats
import GRDB

/// The endpoint's storage: every record once, whatever the format it came in and however many
/// times it was sent.
///
/// A record's key makes storage idempotent: `id:DEVICE:SEQ` for our JSON batch (the outbox's
/// stable id); for OsmAnd and OwnTracks, which carry no id, `at:DEVICE:KIND:MILLISECONDS:REGION` (a
/// device is in one place at one time). SQLite in WAL mode with `synchronous=NORMAL`.
public final class TrackStore: Sendable {
    public let path: String
    let pool: DatabasePool

    /// Opens (creating and migrating) the store at `path`.
    public init(path: String) throws {
        self.path = path
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        pool = try DatabasePool(path: path, configuration: config)
        var m = DatabaseMigrator()
        m.registerMigration("v1-points") { db in
            try db.execute(sql: """
                CREATE TABLE points (
                    key TEXT PRIMARY KEY,
                    device TEXT NOT NULL,
                    seq INTEGER,
                    kind TEXT NOT NULL,
                    region TEXT,
                    time REAL NOT NULL,
                    lat REAL NOT NULL,
                    lon REAL NOT NULL,
                    alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                    format TEXT NOT NULL,
                    received REAL NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX points_trail ON points (device, time);
                """)
        }
        try m.migrate(pool)
    }

    static func key(_ r: TrailRecord, format: String) -> String {
        format == "json"
            ? "id:\(r.device):\(r.sequence)"
            : "at:\(r.device):\(r.kind.rawValue):\(Int64((r.time * 1000).rounded())):\(r.region ?? "")"
    }

    /// Stores `records` in one transaction; returns how many were new and how many were already
    /// stored.
    public func insert(_ records: [TrailRecord], format: String, received: Double) throws
        -> (accepted: Int, duplicates: Int)
    {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO points
                (key, device, seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, format, received)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            var accepted = 0
            for r in records {
                // GRDB binds text NUL-terminated (sqlite3_bind_text with -1): a NUL would cut the key
                // short and make distinct records one. Readers refuse control characters in ids; this
                // is the store's own guard, whoever calls it.
                guard !r.device.utf8.contains(0), !(r.region?.utf8.contains(0) ?? false) else {
                    throw StoreError(message: "refusing to store an id with a NUL byte")
                }
                try statement.execute(arguments: [
                    Self.key(r, format: format), r.device, format == "json" ? r.sequence : nil, r.kind.rawValue,
                    r.region, r.time, r.latitude, r.longitude, r.altitude, r.horizontalAccuracy, r.verticalAccuracy,
                    r.speed, r.course, format, received,
                ])
                accepted += db.changesCount
            }
            return (accepted, records.count - accepted)
        }
    }

    public struct Device: Hashable, Sendable {
        public var id: String
        public var points: Int
        public var first: Double
        public var last: Double
        public var lastReceived: Double
    }

    public func devices() throws -> [Device] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT device, COUNT(*), MIN(time), MAX(time), MAX(received) FROM points GROUP BY device ORDER BY device
                """).map { Device(id: $0[0], points: $0[1], first: $0[2], last: $0[3], lastReceived: $0[4]) }
        }
    }

    /// A device's records between `from` and `to` (seconds since 1970), by time then sequence.
    public func trail(device: String, from: Double = -.infinity, to: Double = .infinity) throws -> [TrailRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course FROM points
                WHERE device = ? AND time >= ? AND time <= ? ORDER BY time, seq
                """, arguments: [device, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]).map { row in
                TrailRecord(device: device, sequence: row[0] ?? 0, kind: TrailRecord.Kind(rawValue: row[1]) ?? .location,
                            region: row[2], time: row[3], latitude: row[4], longitude: row[5], altitude: row[6],
                            horizontalAccuracy: row[7], verticalAccuracy: row[8], speed: row[9], course: row[10])
            }
        }
    }

    /// A record the store refuses to write.
    public struct StoreError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// How many records are stored.
    public func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM points") ?? 0 }
    }
}
