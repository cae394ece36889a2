import Formats
import Geo
import HTTPTypes
import Hummingbird
import Synchronization
import TrackStore

/// Who a share link's token (`share=TOKEN`, `/s/TOKEN`) makes a request: a read-only identity of one
/// device within the share's window (``Identity/share(_:)``), on the routes a share reads only
/// (``readable(_:path:)``), or a refusal: 401 for a token that is no share's (malformed ones without a
/// read), 410 for a share expired or revoked, 403 for another route, 429 past the share's rate (or
/// past the rate of unknown tokens, which makes guessing slower still). The token is never logged:
/// refusals name the share by its id at most.
final class ShareAccess: Sendable {
    let store: any TrackStore
    let clock: any EpochClock
    let limits: TrackServer.ShareLimits
    /// Per share id, and `""` for tokens that are no share's: the tokens left and when counted.
    let buckets = Mutex([String: (tokens: Double, at: Double)]())

    init(store: any TrackStore, clock: any EpochClock, limits: TrackServer.ShareLimits) {
        (self.store, self.clock, self.limits) = (store, clock, limits)
    }

    /// Whether a share may read `path` with `method`: `GET` or `HEAD` of a device's trail, stops, trips
    /// and statistics, the latest positions, the live stream, and the share itself (`/v1/shares`).
    static func readable(_ method: HTTPRequest.Method, path: String) -> Bool {
        guard method == .get || method == .head else { return false }
        if path == "/v1/devices/latest" || path == "/v1/stream" || path == "/v1/shares" { return true }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 5 && parts[0].isEmpty && parts[1] == "v1" && parts[2] == "devices" && !parts[3].isEmpty
            && ["trail", "stops", "trips", "stats"].contains(parts[4])
    }

    /// The share of `token`, active now and within its rate.
    ///
    /// - Throws: 401, 410 or 429 (with `Retry-After`), each with a message for people.
    func share(token: String) async throws -> Share {
        let now = clock.now.secondsSince1970
        guard ShareTokens.isWellFormed(token),
            let share = try await store.share(digest: DeviceTokens.digest(token: token))
        else {
            try take("", now: now, rate: limits.unknownPerMinute)
            throw HTTPError(.unauthorized, message: "share: this link is not a share link of this server")
        }
        switch share.state(at: now) {
        case .revoked: throw HTTPError(.gone, message: "share: this link was revoked")
        case .expired: throw HTTPError(.gone, message: "share: this link expired at \(ISOTime.string(share.expires))")
        case .active: break
        }
        try take(share.id, now: now, rate: limits.perMinute)
        return share
    }

    /// The identity of a request with `share=token` to `path`.
    func identity(token: String, method: HTTPRequest.Method, path: String) async throws -> Identity {
        let share = try await share(token: token)
        guard Self.readable(method, path: path) else {
            throw HTTPError(.forbidden, message: "share: a share link reads its device's map only")
        }
        return .share(
            ShareGrant(
                id: share.id, device: share.device, from: share.from ?? -.infinity, to: share.to ?? .infinity))
    }

    /// Takes one request from `key`'s bucket (`rate` a minute, as many at once).
    func take(_ key: String, now: Double, rate: Int) throws {
        let capacity = Double(max(1, rate))
        let perSecond = capacity / 60
        let wait = buckets.withLock { b -> Double? in
            if b.count > 10_000 { b = b.filter { now - $0.value.at < 120 } }
            var (tokens, at) = b[key] ?? (capacity, now)
            tokens = min(capacity, tokens + max(0, now - at) * perSecond)
            guard tokens >= 1 else {
                b[key] = (tokens, now)
                return (1 - tokens) / perSecond
            }
            b[key] = (tokens - 1, now)
            return nil
        }
        if let wait {
            let seconds = max(1, Int(wait.rounded(.up)))
            throw HTTPError(
                .tooManyRequests, headers: [.retryAfter: String(seconds)],
                message: "share: more than \(rate) requests a minute; ask again in \(seconds) s")
        }
    }
}
