import Formats
import Geo
import Logging
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
    /// Where records acknowledged but not stored are told.
    let logger: Logger

    /// The server's time now, in seconds since 1970.
    var now: Double { clock.now.secondsSince1970 }

    /// Stores `records` (all of `format`) received now; counts them.
    func store(_ records: [TrailRecord], format: String, received: Double? = nil) async throws
        -> (accepted: Int, duplicates: Int)
    {
        guard !records.isEmpty else { return (0, 0) }
        let result = try await store.insert(records, format: format, received: received ?? now)
        metrics.stored(result.accepted, duplicates: result.duplicates, format: format)
        return result
    }

    /// A peer's records (OsmAnd, OwnTracks, Overland) split into those a store keeps and the problems
    /// of the others. A record whose values no store keeps (a time more than a day ahead or before
    /// 1980, a latitude of 91) is acknowledged, not refused: the peers' apps send a refused message
    /// again at the head of their queue, so one phone with a wrong clock would stop uploading for
    /// good, and Overland would lose the good locations of its batch. Traccar acknowledges and filters
    /// such positions too. Each is counted in `keeptrack_serve_records_refused_total` and logged (its
    /// reason, which may quote a coordinate, at debug level only).
    ///
    /// - Throws: ``FormatsError`` for a device id no store keeps (it names no device to authorize):
    ///   refused, as a message that can't be read is.
    func sift(_ records: [TrailRecord], format: String) throws(FormatsError)
        -> (kept: [TrailRecord], refused: [(index: Int, problem: FormatsError)])
    {
        try Self.checkDevices(records)
        let t = now
        var kept: [TrailRecord] = []
        var refused: [(index: Int, problem: FormatsError)] = []
        kept.reserveCapacity(records.count)
        for (i, r) in records.enumerated() {
            guard let problem = r.problem(now: t) else {
                kept.append(r)
                continue
            }
            refused.append((i, problem))
            logger.warning(
                "a record acknowledged but not stored: its \(problem.field ?? "value") is impossible",
                metadata: ["device": "\(r.device)", "format": "\(format)"])
            logger.debug("not stored", metadata: ["reason": "\(problem.message)"])
        }
        metrics.refused(refused.count, format: format)
        return (kept, refused)
    }

    /// Refuses records whose device id no store keeps, before their device is authorized.
    ///
    /// - Throws: ``FormatsError`` (``FormatsError/Code/invalidRecord``, field `device`).
    static func checkDevices(_ records: [TrailRecord]) throws(FormatsError) {
        for r in records {
            if let p = TrailRecord.identifierProblem(r.device) {
                throw FormatsError(.invalidRecord, "device id \(p)", field: "device")
            }
        }
    }

    /// Stores one OwnTracks message (``OwnTracks``) from `user`'s `device`, as `user/device`, lowercased,
    /// `owntracks` and `phone` when absent (``OwnTracks/deviceID(user:device:)``). Messages without a
    /// position (an empty body, `lwt`, `card`, `waypoint`...) store nothing. An encrypted message
    /// (`_type: encrypted`) is decrypted with the device's secret first. A record with impossible
    /// values is acknowledged but not stored (``sift(_:format:)``).
    ///
    /// - Returns: how many records were new and how many already stored (0 and 0 for nothing), and
    ///   the problem of a record not stored.
    /// - Throws: ``FormatsError`` for a message that can't be read (``FormatsError/Code/unsupported``
    ///   for an encrypted one from a device without a secret), `OwnTracksCryptoError` for an
    ///   encrypted one that can't be read or does not authenticate, or the store's error.
    func ownTracks(_ bytes: [UInt8], user: String?, device: String?) async throws
        -> (accepted: Int, duplicates: Int, refused: [String])
    {
        let t = now
        let bytes = try await openOwnTracks(bytes, device: OwnTracks.deviceID(user: user, device: device)).plain
        guard let record = try OwnTracks.read(bytes, user: user, device: device, now: t) else { return (0, 0, []) }
        let sifted = try sift([record], format: "owntracks")
        let stored = try await store(sifted.kept, format: "owntracks", received: t)
        return (stored.accepted, stored.duplicates, sifted.refused.map(\.problem.message))
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
