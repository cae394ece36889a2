import Digests
import Geo

/// The device tokens facet of a store: one token per device, kept as its digest
/// (``DeviceTokens/digest(token:)``); a request's token is found by its digest alone.
public protocol CredentialStore: AnyObject {
    /// Gives `device` a new token (``DeviceTokens/newToken()``) and returns it: the only time it is
    /// seen, the store keeps its digest.
    ///
    /// - Throws: ``TrackStoreError`` (``TrackStoreError/Code/invalidDeviceID``,
    ///   ``TrackStoreError/Code/tokenExists``: revoke it first) or the database's failure.
    func addCredential(device: String, now: Double) async throws -> String
    /// Every device with a token, by id.
    func credentials() async throws -> [DeviceCredential]
    /// Removes the token of `device` and, in the same transaction, revokes at `time` its share links
    /// still active (``ShareStore``): a device taken out of service (a lost phone, a leaked token)
    /// shows nothing more to anyone but the admin. Its stored points stay.
    ///
    /// - Returns: how many share links were revoked, or `nil` when the device had no token (then
    ///   nothing is changed).
    func revokeCredential(device: String, at time: Double) async throws -> Int?
    /// The device whose token `token` is, or `nil`.
    func credentialDevice(token: String) async throws -> String?
    /// Whether `device` has a token (an OsmAnd sender is then known, as a device registered in Traccar).
    func hasCredential(device: String) async throws -> Bool
    /// Whether any device has a token (then requests must authenticate).
    func hasCredentials() async throws -> Bool
}

extension CredentialStore {
    /// ``addCredential(device:now:)`` with the token's creation time read from `clock`, as the
    /// endpoint reads its receipt times.
    public func addCredential(device: String, clock: any EpochClock) async throws -> String {
        try await addCredential(device: device, now: clock.now.secondsSince1970)
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

/// Device tokens: 32 random bytes (256 bits from the system's generator), stored as their SHA-256
/// digest. A plain digest of a token that long is as hard to invert as the token is to guess: no
/// salt or stretching is needed, and a request's token is found by its digest alone.
public enum DeviceTokens {
    /// The SHA-256 digest a token is stored as, in hex.
    public static func digest(token: String) -> String {
        Digests.hex(Digests.sha256(Array(token.utf8)))
    }

    /// A new random token: 32 bytes from the system's generator, base64url (43 characters), never
    /// beginning with `-` (``Base64URL/randomArgument(bytes:)``: `--token TOKEN` takes it).
    public static func newToken() -> String { Base64URL.randomArgument(bytes: 32) }

    /// What is wrong with `device` as an id to give a token to (``TrackStoreError/Code/invalidDeviceID``),
    /// or `nil`.
    public static func problem(device: String) -> TrackStoreError? {
        func invalid(_ why: String) -> TrackStoreError { TrackStoreError(.invalidDeviceID, why, device: device) }
        if device.isEmpty { return invalid("the device id is empty") }
        if device.utf8.count > 200 { return invalid("the device id is longer than 200 bytes") }
        if device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return invalid("the device id contains a control character")
        }
        return nil
    }
}
