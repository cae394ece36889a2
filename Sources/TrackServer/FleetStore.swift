import Crypto
import Formats
import Geo

#if canImport(Glibc)
    import Glibc
#endif

/// What a ``TrackStore`` does for a fleet (issue 15, items 4-6): device tokens, the latest
/// position of every device, who was where, and retention. Every store implements it.
public protocol FleetStore: AnyObject, Sendable {
    /// Gives `device` a new token (``DeviceTokens/newToken()``) and returns it; the store keeps only
    /// its digest (``DeviceTokens/digest(token:)``).
    ///
    /// - Throws: ``TrackServerError`` when the id is not usable or the device has a token already.
    func addCredential(device: String, now: Double) async throws -> String
    /// Every device with a token, by id.
    func credentials() async throws -> [DeviceCredential]
    /// Removes the token of `device`; `false` when it had none. Its stored points stay.
    func revokeCredential(device: String) async throws -> Bool
    /// The device whose token `token` is, or `nil`.
    func credentialDevice(token: String) async throws -> String?
    /// Whether `device` has a token.
    func hasCredential(device: String) async throws -> Bool
    /// Whether any device has a token (then requests must authenticate).
    func hasCredentials() async throws -> Bool

    /// Each device's latest valid position, by device id (devices without one are left out); only
    /// `device`'s when given. Read from the device summaries, never the points.
    func latest(device: String?) async throws -> [LatestPosition]

    /// One page of the valid positions in `area` between `from` and `to` (seconds since 1970,
    /// inclusive), of every device or only `device`, by time then key, starting after `cursor`;
    /// `next` is where the following page starts, or `nil` on the last page.
    func positions(
        in area: PositionArea, from: Double, to: Double, device: String?, after cursor: TrailCursor?,
        limit: Int
    ) async throws -> (records: [TrailRecord], next: TrailCursor?)

    /// Deletes at most `limit` points whose time is before `cutoff` (seconds since 1970) in one
    /// short transaction, keeping the device summaries true (count, first time, latest position; a
    /// device with nothing left is removed); returns how many went, 0 when nothing is older.
    func deleteExpired(before cutoff: Double, limit: Int) async throws -> Int
}

extension FleetStore {
    /// ``addCredential(device:now:)`` with the token's creation time read from `clock`, as the
    /// endpoint reads its receipt times.
    public func addCredential(device: String, clock: any EpochClock) async throws -> String {
        try await addCredential(device: device, now: clock.now.secondsSince1970)
    }

    public func latest() async throws -> [LatestPosition] { try await latest(device: nil) }

    public func positions(
        in area: PositionArea, from: Double = -.infinity, to: Double = .infinity,
        device: String? = nil, after cursor: TrailCursor?, limit: Int
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        try await positions(in: area, from: from, to: to, device: device, after: cursor, limit: limit)
    }
}

/// A device allowed to send with a token of its own.
public struct DeviceCredential: Hashable, Sendable {
    public var device: String
    /// When the token was made (seconds since 1970).
    public var created: Double

    public init(device: String, created: Double) {
        self.device = device
        self.created = created
    }
}

/// A device's latest valid position.
public struct LatestPosition: Hashable, Sendable {
    public var device: String
    public var time: Double
    public var latitude: Double
    public var longitude: Double
    public var altitude: Double?
    public var horizontalAccuracy: Double?
    public var speed: Double?
    public var course: Double?
    /// Records stored for the device, and when the last arrived (seconds since 1970).
    public var points: Int
    public var lastReceived: Double

    public init(
        device: String, time: Double, latitude: Double, longitude: Double, altitude: Double?,
        horizontalAccuracy: Double?, speed: Double?, course: Double?, points: Int, lastReceived: Double
    ) {
        (self.device, self.time, self.latitude, self.longitude) = (device, time, latitude, longitude)
        (self.altitude, self.horizontalAccuracy, self.speed, self.course) = (
            altitude, horizontalAccuracy, speed, course
        )
        (self.points, self.lastReceived) = (points, lastReceived)
    }
}

/// Where positions are looked for.
public enum PositionArea: Hashable, Sendable {
    /// A box, `west ≤ east` and `south ≤ north`, in degrees (edges included).
    case box(west: Double, south: Double, east: Double, north: Double)
    /// Within `radius` metres of a place (great-circle distance on the mean sphere,
    /// ``Geodesy/haversineDistance(_:_:)``).
    case near(latitude: Double, longitude: Double, radius: Double)

    /// The box that holds the area (for a circle: its bounding box, every longitude when it
    /// reaches a pole or the antimeridian).
    public var bounds: (west: Double, south: Double, east: Double, north: Double) {
        switch self {
        case let .box(west, south, east, north):
            return (west, south, east, north)
        case let .near(latitude, longitude, radius):
            let metresPerDegree = Geodesy.meanRadius * .pi / 180
            let dLat = radius / metresPerDegree * 1.0001
            let south = max(-90, latitude - dLat), north = min(90, latitude + dLat)
            let widest = max(abs(south), abs(north))
            guard widest < 89.9 else { return (-180, south, 180, north) }
            let dLon = dLat / cos(widest * .pi / 180)
            let west = longitude - dLon, east = longitude + dLon
            guard west >= -180, east <= 180 else { return (-180, south, 180, north) }
            return (west, south, east, north)
        }
    }
}

/// Device tokens: 32 random bytes (256 bits from the system's generator), stored as their SHA-256
/// digest. A plain digest of a token that long is as hard to invert as the token is to guess: no
/// salt or stretching is needed, and a request's token is found by its digest alone.
public enum DeviceTokens {
    /// The SHA-256 digest a token is stored as, in hex.
    public static func digest(token: String) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in SHA256.hash(data: Array(token.utf8)) {
            out += [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A new random token: 32 bytes from the system's generator, base64url (43 characters).
    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// What is wrong with `device` as an id to give a token to (``TrackServerError/Code/invalidDeviceID``),
    /// or `nil`.
    public static func problem(device: String) -> TrackServerError? {
        func invalid(_ why: String) -> TrackServerError { TrackServerError(.invalidDeviceID, why, device: device) }
        if device.isEmpty { return invalid("the device id is empty") }
        if device.utf8.count > 200 { return invalid("the device id is longer than 200 bytes") }
        if device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return invalid("the device id contains a control character")
        }
        return nil
    }
}
