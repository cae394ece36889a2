import Formats
import GRDB

/// The endpoint's storage: every record once, whatever the format it came in and however many
/// times it was sent.
///
/// A record's key makes storage idempotent: `id:DEVICE:SEQ` for our JSON batch (the outbox's
/// stable id); for OsmAnd and OwnTracks, which carry no id, `at:DEVICE:KIND:MILLISECONDS:REGION` (a
/// device is in one place at one time). SQLite in WAL mode with `synchronous=NORMAL`.
///
/// A `devices` table keeps each device's point count, first and last time and last reception,
/// updated in the transaction that stores its points: listing devices and finding an unknown one
/// read it, never the points.
public final class TrackStore: Sendable {
    public let path: String
    let pool: DatabasePool

    /// Opens (creating and migrating) the store at `path`.
    public init(path: String) throws {
        self.path = path
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            Self.addFleetFunctions(db)
        }
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
        m.registerMigration("v2-devices-and-pages") { db in
            // Filled once from the points already stored; kept up to date by `insert`.
            try db.execute(sql: """
                CREATE TABLE devices (
                    id TEXT PRIMARY KEY,
                    points INTEGER NOT NULL,
                    first REAL NOT NULL,
                    last REAL NOT NULL,
                    lastReceived REAL NOT NULL
                ) WITHOUT ROWID;
                INSERT INTO devices (id, points, first, last, lastReceived)
                    SELECT device, COUNT(*), MIN(time), MAX(time), MAX(received) FROM points GROUP BY device;
                CREATE INDEX points_page ON points (device, time, seq);
                DROP INDEX points_trail;
                """)
        }
        m.registerMigration("v3-validity-and-attributes") { db in
            // What senders say besides the position (OsmAnd's hdop, batt...), and whether they say
            // the position is valid (kept, and left out of trails by default).
            try db.execute(sql: """
                ALTER TABLE points ADD COLUMN valid INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE points ADD COLUMN attributes TEXT;
                """)
        }
        Self.registerCredentialMigrations(&m)
        Self.registerFleetMigrations(&m)
        try m.migrate(pool)
    }

    /// The record's key: our JSON batch's stable id, or for formats without one (OsmAnd,
    /// OwnTracks) everything that tells records apart: the format, the device (OwnTracks' is
    /// `user/device`), the kind, the time to the millisecond, the region and the position to 1e-7°.
    /// Two senders, or two points of one sender at the same time in different places, never share
    /// a key; the same request sent twice always does.
    static func key(_ r: TrailRecord, format: String) -> String {
        if format == "json" { return "id:\(r.device):\(r.sequence)" }
        let ms = Int64((r.time * 1000).rounded())
        let lat = Int64((r.latitude * 1e7).rounded()), lon = Int64((r.longitude * 1e7).rounded())
        return "at:\(format):\(r.device):\(r.kind.rawValue):\(ms):\(r.region ?? ""):\(lat):\(lon)"
    }

    /// Stores `records` in one transaction; returns how many were new and how many were already
    /// stored.
    public func insert(_ records: [TrailRecord], format: String, received: Double) throws
        -> (accepted: Int, duplicates: Int)
    {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO points
                (key, device, seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, format, received,
                 valid, attributes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            var accepted = 0
            var added: [String: (points: Int, first: Double, last: Double)] = [:]
            var latest: [String: TrailRecord] = [:]
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
                    r.speed, r.course, format, received, r.valid, TrailRecord.attributesJSON(r.attributes),
                ])
                guard db.changesCount > 0 else { continue }
                accepted += 1
                if r.valid, latest[r.device].map({ $0.time <= r.time }) ?? true { latest[r.device] = r }
                if let d = added[r.device] {
                    added[r.device] = (d.points + 1, min(d.first, r.time), max(d.last, r.time))
                } else {
                    added[r.device] = (1, r.time, r.time)
                }
            }
            let device = try db.cachedStatement(sql: """
                INSERT INTO devices (id, points, first, last, lastReceived) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET points = points + excluded.points, first = min(first, excluded.first),
                    last = max(last, excluded.last), lastReceived = max(lastReceived, excluded.lastReceived)
                """)
            for (id, d) in added {
                try device.execute(arguments: [id, d.points, d.first, d.last, received])
                if let r = latest[id] { try Self.noteLatest(db, r) }
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

        public init(id: String, points: Int, first: Double, last: Double, lastReceived: Double) {
            self.id = id
            self.points = points
            self.first = first
            self.last = last
            self.lastReceived = lastReceived
        }
    }

    /// Every device, by id (from the devices table: no scan of the points).
    public func devices() throws -> [Device] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, points, first, last, lastReceived FROM devices ORDER BY id")
                .map { Device(id: $0[0], points: $0[1], first: $0[2], last: $0[3], lastReceived: $0[4]) }
        }
    }

    /// One device, or `nil` when nothing was ever stored for it.
    public func device(_ id: String) throws -> Device? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT id, points, first, last, lastReceived FROM devices WHERE id = ?",
                             arguments: [id])
                .map { Device(id: $0[0], points: $0[1], first: $0[2], last: $0[3], lastReceived: $0[4]) }
        }
    }

    /// Where a page of a trail ends: the last record's time, sequence and key. Its ``token`` is
    /// opaque to clients.
    public struct Cursor: Hashable, Sendable {
        public var time: Double
        public var sequence: Int64?
        public var key: String

        /// The cursor as a URL-safe token (base64url, no padding).
        public var token: String {
            let text = "1|\(String(time.bitPattern, radix: 16))|\(sequence.map(String.init) ?? "")|\(key)"
            return Base64URL.encode(Array(text.utf8))
        }

        /// The cursor a token stands for, or `nil` when it is not one this store gave.
        public init?(token: String) {
            guard let bytes = Base64URL.decode(token), let text = String(validating: bytes, as: UTF8.self) else {
                return nil
            }
            let parts = text.split(separator: "|", maxSplits: 3, omittingEmptySubsequences: false)
            guard parts.count == 4, parts[0] == "1", let bits = UInt64(parts[1], radix: 16) else { return nil }
            time = Double(bitPattern: bits)
            guard time.isFinite else { return nil }
            if parts[2].isEmpty {
                sequence = nil
            } else if let s = Int64(parts[2]) {
                sequence = s
            } else {
                return nil
            }
            key = String(parts[3])
        }

        init(time: Double, sequence: Int64?, key: String) {
            self.time = time
            self.sequence = sequence
            self.key = key
        }
    }

    /// One page of a device's records between `from` and `to` (seconds since 1970), by time, then
    /// sequence, then key, starting after `cursor`; `next` is where the following page starts, or
    /// `nil` on the last page.
    ///
    /// - Complexity: O(`limit` log n) (keyset pagination over the `(device, time, seq)` index, no
    ///   OFFSET).
    public func trail(device: String, from: Double = -.infinity, to: Double = .infinity, after cursor: Cursor?,
                      limit: Int, includeInvalid: Bool = false) throws -> (records: [TrailRecord], next: Cursor?)
    {
        precondition(limit > 0, "a page holds at least one record")
        var sql = """
            SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, valid, attributes, key FROM points
            WHERE device = ? AND time >= ? AND time <= ?\(includeInvalid ? "" : " AND valid = 1")
            """
        var arguments: StatementArguments = [device, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]
        if let cursor {
            // After (time, seq, key) in the order SQLite sorts them (a NULL seq first).
            if let seq = cursor.sequence {
                sql += " AND time >= ? AND (time > ? OR (time = ? AND (seq > ? OR (seq = ? AND key > ?))))"
                arguments += [cursor.time, cursor.time, cursor.time, seq, seq, cursor.key]
            } else {
                sql += " AND time >= ? AND (time > ? OR (time = ? AND (seq IS NOT NULL OR key > ?)))"
                arguments += [cursor.time, cursor.time, cursor.time, cursor.key]
            }
        }
        sql += " ORDER BY time, seq, key LIMIT ?"
        arguments += [limit + 1]
        return try pool.read { db in
            var records: [TrailRecord] = []
            var last: Cursor?
            var more = false
            let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
            while let row = try rows.next() {
                if records.count == limit {
                    more = true
                    break
                }
                records.append(Self.record(row, device: device))
                last = Cursor(time: row[3], sequence: row[0], key: row[13])
            }
            return (records, more ? last : nil)
        }
    }

    /// A device's records between `from` and `to` (seconds since 1970), by time then sequence;
    /// records marked invalid only with `includeInvalid`.
    public func trail(device: String, from: Double = -.infinity, to: Double = .infinity,
                      includeInvalid: Bool = false) throws -> [TrailRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: """
                SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, valid, attributes FROM points
                WHERE device = ? AND time >= ? AND time <= ?\(includeInvalid ? "" : " AND valid = 1")
                ORDER BY time, seq, key
                """, arguments: [device, from.isFinite ? from : -1e18, to.isFinite ? to : 1e18]).map { row in
                Self.record(row, device: device)
            }
        }
    }

    /// A record from a row of `seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course,
    /// valid, attributes`.
    static func record(_ row: Row, device: String) -> TrailRecord {
        var r = TrailRecord(device: device, sequence: row[0] ?? 0, kind: TrailRecord.Kind(rawValue: row[1]) ?? .location,
                            region: row[2], time: row[3], latitude: row[4], longitude: row[5], altitude: row[6],
                            horizontalAccuracy: row[7], verticalAccuracy: row[8], speed: row[9], course: row[10])
        r.valid = row[11]
        r.attributes = TrailRecord.attributes(fromJSON: row[12])
        return r
    }

    /// A record the store refuses to write.
    public struct StoreError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// How many records are stored (the devices table's sum: no scan of the points).
    public func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(points), 0) FROM devices") ?? 0 }
    }
}

/// base64url without padding (RFC 4648 section 5).
enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if i + 1 < bytes.count { out.append(alphabet[Int(n >> 6 & 63)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(n & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt32] = []
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(UInt32(c - UInt8(ascii: "A")))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(UInt32(c - UInt8(ascii: "a")) + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(UInt32(c - UInt8(ascii: "0")) + 52)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (k, v) in chunk.enumerated() { n |= v << (18 - 6 * UInt32(k)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
