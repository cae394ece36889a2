import OwnTracksCrypto
import PostgresNIO
import TrackStore

/// OwnTracks secrets (``DeviceSecretStore``) in the table `device_secrets`.
extension PostgresTrackStore: DeviceSecretStore {
    /// Migration `v4-device-secrets`.
    static let secretsMigration: [String] = [
        """
        CREATE TABLE device_secrets (
            device text COLLATE "C" PRIMARY KEY,
            key text NOT NULL,
            created timestamptz NOT NULL
        )
        """
    ]

    public func setSecret(device: String, secret: OwnTracksSecret, now: Double) async throws {
        let hex = DeviceSecrets.hex(secret)
        for try await _ in try await liveQuery(
            """
            INSERT INTO device_secrets (device, key, created) VALUES (\(device), \(hex), to_timestamp(\(now)))
            ON CONFLICT (device) DO UPDATE SET key = EXCLUDED.key, created = EXCLUDED.created RETURNING 1
            """, logger: logger)
        {}
    }

    public func secret(device: String) async throws -> OwnTracksSecret? {
        guard !device.utf8.contains(0) else { return nil }
        var found: OwnTracksSecret?
        for try await hex in try await liveQuery(
            "SELECT key FROM device_secrets WHERE device = \(device)",
            logger: logger
        ).decode(String.self) {
            found = DeviceSecrets.secret(hex: hex)
        }
        return found
    }

    public func removeSecret(device: String) async throws -> Bool {
        guard !device.utf8.contains(0) else { return false }
        var removed = false
        for try await _ in try await liveQuery(
            "DELETE FROM device_secrets WHERE device = \(device) RETURNING 1",
            logger: logger)
        { removed = true }
        return removed
    }

    public func secretDevices() async throws -> [String] {
        var out: [String] = []
        for try await d in try await liveQuery(
            "SELECT device FROM device_secrets ORDER BY device",
            logger: logger
        ).decode(String.self) { out.append(d) }
        return out
    }
}
