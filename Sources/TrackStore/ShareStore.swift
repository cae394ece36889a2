/// A share link of one device (`/s/TOKEN`): read-only, until it expires or is revoked, within its
/// window if it has one. The store keeps its token's SHA-256 digest (``DeviceTokens/digest(token:)``),
/// never the token.
public struct Share: Hashable, Sendable {
    /// What a share is at a time.
    public enum State: String, Sendable {
        case active, expired, revoked
    }

    /// Its id: 64 random bits, base64url (11 characters), to list and revoke it by.
    public var id: String
    public var device: String
    /// When it was made, seconds since 1970.
    public var created: Double
    /// When it stops working.
    public var expires: Double
    /// Its window: nothing before `from` or after `to` is shown (`nil`: no bound).
    public var from: Double?
    public var to: Double?
    /// When it was revoked, if it was.
    public var revoked: Double?

    public init(
        id: String, device: String, created: Double, expires: Double, from: Double? = nil, to: Double? = nil,
        revoked: Double? = nil
    ) {
        (self.id, self.device, self.created, self.expires) = (id, device, created, expires)
        (self.from, self.to, self.revoked) = (from, to, revoked)
    }

    /// Its state at `now`: revoked first, then expired (at its expiry and after).
    public func state(at now: Double) -> State {
        if revoked != nil { return .revoked }
        return now >= expires ? .expired : .active
    }
}

/// Share tokens: 16 bytes (128 bits) from the system's generator, base64url (22 characters), kept as
/// their SHA-256 digest as device tokens are.
public enum ShareTokens {
    /// A new token.
    public static func newToken() -> String { Base64URL.randomArgument(bytes: 16) }

    /// A new share id (64 bits: unique, not a secret), never beginning with `-`: `share remove ID`
    /// reads it as the id, not as an option.
    public static func newID() -> String { Base64URL.randomArgument(bytes: 8) }

    /// Whether `text` could be a token: 22 base64url characters (a request with anything else is
    /// refused before a digest or a read).
    public static func isWellFormed(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 22
            && text.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
                    || $0 == 0x5F
            }
    }
}

/// The share links facet of a store.
public protocol ShareStore {
    /// Keeps a new share of `device` whose token's digest is `digest`; returns it.
    func addShare(_ share: Share, digest: String) async throws
    /// The shares, by creation (of `device` only, when given).
    func shares(device: String?) async throws -> [Share]
    /// The share whose token has digest `digest`, or `nil`.
    func share(digest: String) async throws -> Share?
    /// Revokes share `id` at `time` (a share revoked stays revoked, at its first time); returns it,
    /// or `nil` when there is none.
    func revokeShare(id: String, at time: Double) async throws -> Share?
}

extension Share {
    /// The longest a share link lives: 366 days.
    public static let maximumLifetime = 366 * 86_400.0
    /// The times a share's window may name: years 1970 to 9999.
    public static let latestTime = 253_402_300_800.0

    /// What is wrong with a share of `device` made at `now` expiring at `expires`, within `from`-`to`,
    /// or `nil`.
    public static func problem(device: String, expires: Double, from: Double?, to: Double?, now: Double)
        -> TrackStoreError?
    {
        if let problem = DeviceTokens.problem(device: device) { return problem }
        func invalid(_ why: String) -> TrackStoreError { TrackStoreError(.invalidShare, why, device: device) }
        guard expires.isFinite, expires > now else { return invalid("expires: the expiry is not in the future") }
        guard expires - now <= maximumLifetime else { return invalid("expires: a share link lives 366 days at most") }
        for (name, t) in [("from", from), ("to", to)] {
            if let t, !(t.isFinite && t >= 0 && t <= latestTime) {
                return invalid("\(name): outside the years 1970 to 9999")
            }
        }
        if let from, let to, to <= from { return invalid("to: the window's end is not after its start") }
        return nil
    }
}

extension ShareStore {
    /// Makes a share link of `device` (``Share/problem(device:expires:from:to:now:)`` first) and keeps
    /// it; returns it with its token, the only time the token is seen.
    public func addShare(device: String, expires: Double, from: Double?, to: Double?, now: Double) async throws
        -> (share: Share, token: String)
    {
        if let problem = Share.problem(device: device, expires: expires, from: from, to: to, now: now) {
            throw problem
        }
        let token = ShareTokens.newToken()
        let share = Share(id: ShareTokens.newID(), device: device, created: now, expires: expires, from: from, to: to)
        try await addShare(share, digest: DeviceTokens.digest(token: token))
        return (share, token)
    }
}
