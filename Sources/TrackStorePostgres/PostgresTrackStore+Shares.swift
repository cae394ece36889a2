import PostgresNIO
import TrackStore

/// Share links (``ShareStore``): one row each, the token's digest unique.
extension PostgresTrackStore: ShareStore {
    static let sharesMigration = [
        """
        CREATE TABLE shares (
            id text COLLATE "C" PRIMARY KEY, digest text COLLATE "C" NOT NULL UNIQUE, device text COLLATE "C" NOT NULL,
            created float8 NOT NULL, expires float8 NOT NULL, from_time float8, to_time float8, revoked float8
        )
        """
    ]

    typealias ShareRow = (String, String, Double, Double, Double?, Double?, Double?)

    static func share(_ r: ShareRow) -> Share {
        Share(id: r.0, device: r.1, created: r.2, expires: r.3, from: r.4, to: r.5, revoked: r.6)
    }

    public func addShare(_ share: Share, digest: String) async throws {
        try await liveQuery(
            """
            INSERT INTO shares (id, digest, device, created, expires, from_time, to_time, revoked)
            VALUES (\(share.id), \(digest), \(share.device), \(share.created), \(share.expires), \(share.from),
                    \(share.to), \(share.revoked))
            """, logger: logger)
    }

    public func shares(device: String?) async throws -> [Share] {
        var out: [Share] = []
        let rows =
            if let device {
                try await liveQuery(
                    """
                    SELECT id, device, created, expires, from_time, to_time, revoked FROM shares
                    WHERE device = \(device) ORDER BY created, id
                    """, logger: logger)
            } else {
                try await liveQuery(
                    "SELECT id, device, created, expires, from_time, to_time, revoked FROM shares ORDER BY created, id",
                    logger: logger)
            }
        for try await r in rows.decode(ShareRow.self) { out.append(Self.share(r)) }
        return out
    }

    public func share(digest: String) async throws -> Share? {
        var out: Share?
        for try await r in try await liveQuery(
            "SELECT id, device, created, expires, from_time, to_time, revoked FROM shares WHERE digest = \(digest)",
            logger: logger
        ).decode(ShareRow.self) { out = Self.share(r) }
        return out
    }

    public func revokeShare(id: String, at time: Double) async throws -> Share? {
        guard !id.utf8.contains(0) else { return nil }
        var out: Share?
        for try await r in try await liveQuery(
            """
            UPDATE shares SET revoked = coalesce(revoked, \(time)) WHERE id = \(id)
            RETURNING id, device, created, expires, from_time, to_time, revoked
            """, logger: logger
        ).decode(ShareRow.self) { out = Self.share(r) }
        return out
    }
}
