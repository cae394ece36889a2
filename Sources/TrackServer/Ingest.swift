import Formats
import Geo
import OwnTracksCrypto
import TrackStore

/// What every ingest path shares, HTTP (``IngestRoutes``) and MQTT (``MQTTIngest``) alike: a batch
/// stored with the server's receipt time and counted in the metrics, and OwnTracks messages, plain or
/// encrypted, turned into records. The live stream hears what was stored from the store itself
/// (``StoredRecordsSource``).
struct Ingest: Sendable {
    let store: any TrackStore
    let metrics: ServerMetrics
    /// Receipt times.
    let clock: any EpochClock

    /// The server's time now, in seconds since 1970.
    var now: Double { clock.now.secondsSince1970 }

    /// Stores `records` (all of `format`) received now; counts them.
    func store(_ records: [TrailRecord], format: String, received: Double? = nil) async throws
        -> (accepted: Int, duplicates: Int)
    {
        let result = try await store.insert(records, format: format, received: received ?? now)
        metrics.stored(result.accepted, duplicates: result.duplicates, format: format)
        return result
    }

    /// Stores one OwnTracks message (``OwnTracks``) from `user`'s `device`, as `user/device`, lowercased,
    /// `owntracks` and `phone` when absent (``OwnTracks/deviceID(user:device:)``). Messages without a
    /// position (an empty body, `lwt`, `card`, `waypoint`...) store nothing. An encrypted message
    /// (`_type: encrypted`) is decrypted with the device's secret first.
    ///
    /// - Returns: how many records were new and how many already stored (0 and 0 for nothing).
    /// - Throws: ``FormatsError`` for a message that can't be read (``FormatsError/Code/unsupported``
    ///   for an encrypted one from a device without a secret), `OwnTracksCryptoError` for an
    ///   encrypted one that can't be read or does not authenticate, or the store's error.
    func ownTracks(_ bytes: [UInt8], user: String?, device: String?) async throws -> (accepted: Int, duplicates: Int) {
        let t = now
        let bytes = try await openOwnTracks(bytes, device: OwnTracks.deviceID(user: user, device: device)).plain
        guard let record = try OwnTracks.decode(bytes, user: user, device: device, now: t) else { return (0, 0) }
        return try await store([record], format: "owntracks", received: t)
    }

    /// The plaintext of an OwnTracks message from `device` (`user/device`), and the secret it was
    /// decrypted with; a message that is not encrypted comes back as it is, with no secret.
    ///
    /// - Throws: `OwnTracksCryptoError` for an envelope that can't be read or does not authenticate
    ///   under the device's secret; ``FormatsError`` (``FormatsError/Code/unsupported``) for an
    ///   encrypted message from a device without a secret. Each is counted in
    ///   `keeptrack_serve_encrypted_total` by outcome.
    func openOwnTracks(_ bytes: [UInt8], device: String) async throws -> (plain: [UInt8], secret: OwnTracksSecret?) {
        let data: Result<[UInt8], OwnTracksCryptoError>
        do {
            guard let d = try OwnTracksCrypto.envelopeData(bytes) else { return (bytes, nil) }
            data = .success(d)
        } catch {
            data = .failure(error)
        }
        // Encrypted: without a secret for the device, whatever the envelope holds, it can't be read.
        guard let secret = try await store.secret(device: device) else {
            metrics.encrypted("no_secret")
            throw FormatsError(
                .unsupported,
                "_type: encrypted payloads are not supported for device '\(device)': it has no "
                    + "secret here (keeptrack serve devices secret \(device)); or turn encryption off in the app")
        }
        do {
            let data = try data.get()
            let plain = try OwnTracksCrypto.open(data, with: secret)
            metrics.encrypted("decrypted")
            return (plain, secret)
        } catch {
            metrics.encrypted(error.code == .notAuthentic ? "not_authentic" : "malformed")
            throw error
        }
    }
}
