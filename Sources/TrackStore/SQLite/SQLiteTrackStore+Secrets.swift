import GRDB
import OwnTracksCrypto

/// OwnTracks secrets (``DeviceSecretStore``): one key a device, in the table `device_secrets`.
extension SQLiteTrackStore: DeviceSecretStore {
    static func registerSecretMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v6-device-secrets") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_secrets (
                        device TEXT PRIMARY KEY,
                        key TEXT NOT NULL,
                        created REAL NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
    }

    public func setSecret(device: String, secret: OwnTracksSecret, now: Double) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO device_secrets (device, key, created) VALUES (?, ?, ?)",
                arguments: [device, DeviceSecrets.hex(secret), now])
        }
    }

    public func secret(device: String) async throws -> OwnTracksSecret? {
        let hex = try await pool.read { db in
            try String.fetchOne(db, sql: "SELECT key FROM device_secrets WHERE device = ?", arguments: [device])
        }
        return hex.flatMap(DeviceSecrets.secret(hex:))
    }

    public func removeSecret(device: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM device_secrets WHERE device = ?", arguments: [device])
            return db.changesCount > 0
        }
    }

    public func secretDevices() async throws -> [String] {
        try await pool.read { db in try String.fetchAll(db, sql: "SELECT device FROM device_secrets ORDER BY device") }
    }
}
