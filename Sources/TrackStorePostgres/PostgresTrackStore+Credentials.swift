import PostgresNIO
import TrackStore

/// Device tokens on PostgreSQL (``CredentialStore``): the table `credentials` (migration `v2-fleet`),
/// one digest per device.
extension PostgresTrackStore: CredentialStore {
    public func addCredential(device: String, now: Double) async throws -> String {
        if let problem = DeviceTokens.problem(device: device) { throw problem }
        let token = DeviceTokens.newToken()
        let digest = DeviceTokens.digest(token: token)
        let rows = try await liveQuery(
            """
            INSERT INTO credentials (device, digest, created) VALUES (\(device), \(digest), to_timestamp(\(now)))
            ON CONFLICT (device) DO NOTHING RETURNING 1
            """, logger: logger)
        var added = false
        for try await _ in rows { added = true }
        guard added else {
            let why = "device '\(device)' has a token already; revoke it first"
            throw TrackStoreError(.tokenExists, why, device: device)
        }
        return token
    }

    public func credentials() async throws -> [DeviceCredential] {
        var out: [DeviceCredential] = []
        let rows = try await liveQuery(
            "SELECT device, extract(epoch FROM created)::float8 FROM credentials ORDER BY device", logger: logger)
        for try await (device, created) in rows.decode((String, Double).self) {
            out.append(DeviceCredential(device: device, created: created))
        }
        return out
    }

    public func revokeCredential(device: String, at time: Double) async throws -> Int? {
        guard !device.utf8.contains(0) else { return nil }
        // One statement, one transaction: the shares are revoked only when the token was removed.
        var out: (removed: Int, shares: Int) = (0, 0)
        for try await row in try await liveQuery(
            """
            WITH gone AS (DELETE FROM credentials WHERE device = \(device) RETURNING device),
            revoked AS (
                UPDATE shares SET revoked = \(time)
                WHERE device IN (SELECT device FROM gone) AND revoked IS NULL AND expires > \(time)
                RETURNING 1)
            SELECT (SELECT count(*) FROM gone)::int8, (SELECT count(*) FROM revoked)::int8
            """, logger: logger
        ).decode((Int, Int).self) { out = row }
        return out.removed > 0 ? out.shares : nil
    }

    public func credentialDevice(token: String) async throws -> String? {
        let digest = DeviceTokens.digest(token: token)
        var device: String?
        for try await d in try await liveQuery(
            "SELECT device FROM credentials WHERE digest = \(digest)",
            logger: logger
        ).decode(String.self) { device = d }
        return device
    }

    public func hasCredential(device: String) async throws -> Bool {
        guard !device.utf8.contains(0) else { return false }
        return try await exists("SELECT 1 FROM credentials WHERE device = \(device)")
    }

    public func hasCredentials() async throws -> Bool {
        try await exists("SELECT 1 FROM credentials LIMIT 1")
    }

    func exists(_ query: PostgresQuery) async throws -> Bool {
        var found = false
        for try await _ in try await liveQuery(query, logger: logger) { found = true }
        return found
    }
}
