import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import OwnTracksCrypto

/// Ingest for the peers of issue 29: OwnTracks' encrypted payloads (over HTTP and MQTT alike) and
/// Overland's batch at Dawarich's path.
extension TrackServer {
    /// The plaintext of an OwnTracks message from `device` (`user/device`), and the secret it was
    /// decrypted with; a message that is not encrypted comes back as it is, with no secret.
    ///
    /// - Throws: ``OwnTracksCryptoError`` for an envelope that can't be read or does not
    ///   authenticate under the device's secret; ``FormatsError`` (``FormatsError/Code/unsupported``)
    ///   for an encrypted message from a device without a secret. Each is counted in
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
        guard let secret = try await (store as? any DeviceSecretStore)?.secret(device: device) else {
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

    /// `POST /owntracks` for a body that may be encrypted: decrypted with the device's secret, stored
    /// as a plain one is, and answered `[]` encrypted under the same secret (as a Recorder that
    /// holds the key answers). Refused: 403 when it does not authenticate, 400 when the envelope
    /// can't be read, 413 when its data is too long, 415 when the device has no secret.
    func ingestOwnTracksBody(_ bytes: [UInt8], user: String?, device: String?, context: ServerContext) async throws
        -> Response
    {
        let id = OwnTracks.deviceID(user: user, device: device)
        let opened: (plain: [UInt8], secret: OwnTracksSecret?)
        do {
            opened = try await openOwnTracks(bytes, device: id)
            _ = try await ingestOwnTracks(opened.plain, user: user, device: device)
        } catch let error as OwnTracksCryptoError {
            metrics.rejected(1)
            let status: HTTPResponse.Status =
                switch error.code {
                case .notAuthentic: .forbidden
                case .tooLarge: .contentTooLarge
                default: .badRequest
                }
            throw HTTPError(status, message: error.message)
        } catch let error as FormatsError {
            metrics.rejected(1)
            throw ErrorAnswer(error, status: error.code == .unsupported ? .unsupportedMediaType : .badRequest)
        }
        guard let secret = opened.secret else {
            return try respond("[]", contentType: "application/json", context: context)
        }
        let answer = OwnTracksCrypto.encrypt(Array("[]".utf8), with: secret)
        return try respond(String(decoding: answer, as: UTF8.self), contentType: "application/json", context: context)
    }

    /// `POST /api/v1/overland/batches` (Dawarich's path for Overland): an Overland batch
    /// (``Overland``), each location filed under its `device_id`, or the device of the request's
    /// token, or `overland`; answered `{"result":"ok"}` once stored. A batch sent again is stored
    /// once (the store's key: format, device, time, position).
    func ingestOverland(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body(request, context)
        let now = clock.now.secondsSince1970
        let records: [TrailRecord]
        do {
            records = try Overland.decode(bytes, device: context.identity.onlyDevice ?? "overland", now: now)
        } catch {
            metrics.rejected(1)
            throw ErrorAnswer(error, status: error.code == .tooLarge ? .contentTooLarge : .badRequest)
        }
        for device in Set(records.map(\.device)) { try authorize(context, device: device) }
        let result = try await store.insert(records, format: "overland", received: now)
        metrics.stored(result.accepted, duplicates: result.duplicates, format: "overland")
        return try respond(Overland.acknowledgement, contentType: "application/json", context: context)
    }
}
