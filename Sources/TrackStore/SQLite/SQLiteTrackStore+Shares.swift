import GRDB

/// Share links (``ShareStore``): one row each, the token's digest unique.
extension SQLiteTrackStore: ShareStore {
    static func registerShareMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v12-shares") { db in
            try db.execute(
                sql: """
                    CREATE TABLE shares (
                        id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, device TEXT NOT NULL, created REAL NOT NULL,
                        expires REAL NOT NULL, from_time REAL, to_time REAL, revoked REAL
                    );
                    """)
        }
    }

    static let shareColumns = "id, device, created, expires, from_time, to_time, revoked"

    static func share(_ row: Row) -> Share {
        Share(
            id: row[0], device: row[1], created: row[2], expires: row[3], from: row[4], to: row[5], revoked: row[6])
    }

    public func addShare(_ share: Share, digest: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO shares (\(Self.shareColumns), digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [
                    share.id, share.device, share.created, share.expires, share.from, share.to, share.revoked, digest,
                ])
        }
    }

    public func shares(device: String?) async throws -> [Share] {
        try await pool.read { db in
            if let device {
                return try Row.fetchAll(
                    db, sql: "SELECT \(Self.shareColumns) FROM shares WHERE device = ? ORDER BY created, id",
                    arguments: [device]
                ).map(Self.share)
            }
            return try Row.fetchAll(db, sql: "SELECT \(Self.shareColumns) FROM shares ORDER BY created, id")
                .map(Self.share)
        }
    }

    public func share(digest: String) async throws -> Share? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.shareColumns) FROM shares WHERE digest = ?", arguments: [digest]
            ).map(Self.share)
        }
    }

    public func revokeShare(id: String, at time: Double) async throws -> Share? {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE shares SET revoked = coalesce(revoked, ?) WHERE id = ?", arguments: [time, id])
            return try Row.fetchOne(db, sql: "SELECT \(Self.shareColumns) FROM shares WHERE id = ?", arguments: [id])
                .map(Self.share)
        }
    }
}
