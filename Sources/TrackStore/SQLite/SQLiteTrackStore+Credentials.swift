import GRDB

/// Per-device credentials (`keeptrack serve devices add|list|revoke`): one token per device, stored
/// as its SHA-256 digest. A token is 32 random bytes (256 bits from the system's generator), so a
/// plain digest is as hard to invert as the token is to guess; no salt or stretching is needed, and
/// a request's token is found by its digest alone.
extension SQLiteTrackStore: CredentialStore {
    static func registerCredentialMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v4-credentials") { db in
            try db.execute(
                sql: """
                    CREATE TABLE credentials (
                        device TEXT PRIMARY KEY,
                        digest TEXT NOT NULL UNIQUE,
                        created REAL NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
    }

    /// Gives `device` a new token and returns it: the only time it is seen, the store keeps its
    /// digest.
    ///
    /// - Throws: ``TrackStoreError`` when the id is not usable or the device has a token already
    ///   (revoke it first).
    public func addCredential(device: String, now: Double) async throws -> String {
        if let problem = DeviceTokens.problem(device: device) { throw problem }
        let token = DeviceTokens.newToken()
        try await pool.write { db in
            if try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM credentials WHERE device = ?)",
                arguments: [device]) == true
            {
                let why = "device '\(device)' has a token already; revoke it first"
                throw TrackStoreError(.tokenExists, why, device: device)
            }
            try db.execute(
                sql: "INSERT INTO credentials (device, digest, created) VALUES (?, ?, ?)",
                arguments: [device, DeviceTokens.digest(token: token), now])
        }
        return token
    }

    /// Every device with a token, by id.
    public func credentials() async throws -> [DeviceCredential] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT device, created FROM credentials ORDER BY device")
                .map { DeviceCredential(device: $0[0], created: $0[1]) }
        }
    }

    public func revokeCredential(device: String, at time: Double) async throws -> Int? {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM credentials WHERE device = ?", arguments: [device])
            guard db.changesCount > 0 else { return nil }
            try db.execute(
                sql: "UPDATE shares SET revoked = ? WHERE device = ? AND revoked IS NULL AND expires > ?",
                arguments: [time, device, time])
            return db.changesCount
        }
    }

    /// The device whose token `token` is, or `nil`.
    public func credentialDevice(token: String) async throws -> String? {
        let digest = DeviceTokens.digest(token: token)
        return try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT device FROM credentials WHERE digest = ?", arguments: [digest])
        }
    }

    /// Whether `device` has a token (an OsmAnd sender is then known, as a device registered in Traccar).
    public func hasCredential(device: String) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(
                db, sql: "SELECT EXISTS(SELECT 1 FROM credentials WHERE device = ?)",
                arguments: [device]) ?? false
        }
    }

    /// Whether any device has a token (then requests must authenticate).
    public func hasCredentials() async throws -> Bool {
        try await pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM credentials)") ?? false }
    }
}
