import Digests
import Formats
import OwnTracksCrypto

/// The OwnTracks secrets of devices that encrypt their payloads (`keeptrack serve devices secret
/// USER/DEVICE`), by OwnTracks device id (`user/device`, lowercased: ``OwnTracks/deviceID(user:device:)``).
/// Both stores implement it.
///
/// A secret is kept as its 32-byte key (``OwnTracksSecret/key``), as is (hex): the endpoint must
/// read it to decrypt, so a digest would not do, and the key opens the device's messages as the
/// passphrase would. It is protected at rest as the store is: the SQLite file's permissions, the
/// PostgreSQL role's grants on `device_secrets` (docs/owntracks-encryption.md).
public protocol DeviceSecretStore: AnyObject {
    /// Sets (or replaces) the secret of `device`.
    func setSecret(device: String, secret: OwnTracksSecret, now: Double) async throws
    /// The secret of `device`, or `nil`.
    func secret(device: String) async throws -> OwnTracksSecret?
    /// Removes the secret of `device`; `false` when it had none.
    func removeSecret(device: String) async throws -> Bool
    /// The devices with a secret, by id.
    func secretDevices() async throws -> [String]
}

/// Secrets as the stores keep them: the key in lowercase hex.
public enum DeviceSecrets {
    /// `key` as 64 hex digits.
    public static func hex(_ secret: OwnTracksSecret) -> String { Digests.hex(secret.key) }

    /// The secret of 64 hex digits, or `nil` for anything else.
    public static func secret(hex text: String) -> OwnTracksSecret? {
        let b = Array(text.utf8)
        guard b.count == 64 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - 48
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - 87
            default: nil
            }
        }
        var key: [UInt8] = []
        for i in stride(from: 0, to: 64, by: 2) {
            guard let h = nibble(b[i]), let l = nibble(b[i + 1]) else { return nil }
            key.append(h << 4 | l)
        }
        // A key with a zero byte inside a passphrase's bytes is as valid: the key is taken as it is.
        return try? OwnTracksSecret(key: key)
    }

    /// The OwnTracks device id (`user/device`, lowercased) of `id` as a user gives it (`Anna/Phone`),
    /// or `nil` when it is not `USER/DEVICE` (both parts non-empty, no further `/`).
    public static func ownTracksDevice(_ id: String) -> String? {
        let parts = id.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
            DeviceTokens.problem(device: id) == nil
        else { return nil }
        return OwnTracks.deviceID(user: String(parts[0]), device: String(parts[1]))
    }
}
