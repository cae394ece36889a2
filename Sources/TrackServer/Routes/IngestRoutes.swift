import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import OwnTracksCrypto
import TrackStore

/// What trackers send, in every format we take, each reduced to the same validated records
/// (``Ingest``):
///
/// - `POST /v1/locations`: our JSON batch (``JSONBatch``), gzip bodies accepted; answers
///   `{"accepted":N,"duplicates":M}`.
/// - `GET /` or `POST /` (query, form or JSON body): Traccar's OsmAnd (``OsmAnd``); answers 200 with
///   an empty body. A browser asking `GET /` for HTML gets the map page instead (``MapShell``).
/// - `POST /owntracks`: OwnTracks JSON (``OwnTracks``) from `X-Limit-U`/`X-Limit-D` (or `?u=`/`?d=`),
///   stored as device `user/device`; answers `[]`. An encrypted payload is decrypted with the device's
///   secret and answered `[]` encrypted.
/// - `POST /api/v1/overland/batches`: Overland's batch (``Overland``, Dawarich's path); answers
///   `{"result":"ok"}`.
///
/// A body that does not decode is a 400 naming the problem, counted in `requests_rejected`. A peer's
/// record (OsmAnd, OwnTracks, Overland) that decodes but holds values no store keeps, a time more than
/// a day ahead, is acknowledged and not stored (``Ingest/sift(_:format:)``); our own batch is refused,
/// since our uploader sets such a record aside itself.
struct IngestRoutes: Sendable {
    let ingest: Ingest
    let body: BodyReader
    /// Whether OsmAnd requests without a credential are stored for devices without a token
    /// (``TrackServer/Configuration/openRegistration``).
    let openRegistration: Bool
    /// What a browser gets at `GET /`.
    let mapShell: MapShell

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.post("/v1/locations") { request, context in try await batch(request, context) }
        routes.get("/") { request, context in
            if MapShell.isWanted(by: request) { return mapShell.response(to: request) }
            return try await osmAnd(request, context)
        }
        routes.post("/") { request, context in try await osmAnd(request, context) }
        routes.post("/owntracks") { request, context in try await ownTracks(request, context) }
        routes.post("/api/v1/overland/batches") { request, context in try await overland(request, context) }
        return routes
    }

    /// `POST /v1/locations`.
    func batch(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body.read(request, context)
        let batch: (device: String, records: [TrailRecord])
        do {
            batch = try JSONBatch.decode(bytes, now: ingest.now)
        } catch {
            ingest.metrics.rejected(1)
            throw ErrorAnswer(error)
        }
        try context.authorize(device: batch.device)
        let result = try await ingest.store(batch.records, format: "json")
        let reply = "{\"accepted\":\(result.accepted),\"duplicates\":\(result.duplicates)}\n"
        return try Self.answer(reply, contentType: "application/json", context: context)
    }

    /// `GET /` and `POST /`: OsmAnd, as Traccar takes it.
    func osmAnd(_ request: Request, _ context: ServerContext) async throws -> Response {
        let record: TrailRecord
        let json =
            request.method == .post
            && request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true
        // As Traccar: a JSON body (Traccar Client) by its Content-Type; else the query, with a form
        // body's parameters added.
        if json {
            let bytes = try await body.read(request, context)
            do {
                record = try OsmAnd.readJSON(bytes, now: ingest.now)
                try Ingest.checkDevices([record])
            } catch {
                ingest.metrics.rejected(1)
                throw ErrorAnswer(error)
            }
        } else {
            var query = request.uri.query ?? ""
            if request.method == .post {
                let form = String(decoding: try await body.read(request, context), as: UTF8.self)
                if !form.isEmpty { query += (query.isEmpty ? "" : "&") + form }
            }
            do {
                record = try OsmAnd.read(query, now: ingest.now)
                try Ingest.checkDevices([record])
            } catch {
                ingest.metrics.rejected(1)
                throw ErrorAnswer(error)
            }
        }
        if context.identity == .anonymous {
            guard try await admitsAnonymousOsmAnd(device: record.device) else {
                ingest.metrics.rejected(1)
                return Self.unknownOsmAndDevice(json: json)
            }
        } else {
            try context.authorize(device: record.device)
        }
        let sifted = try ingest.sift([record], format: "osmand")
        _ = try await ingest.store(sifted.kept, format: "osmand")
        return try Self.answer(
            "", contentType: "text/plain", refused: sifted.refused.map(\.problem.message), context: context)
    }

    /// Whether an OsmAnd request without a credential may store for `device`: the device has a token
    /// (it is known, as a device registered in Traccar is), or ``openRegistration`` is on.
    func admitsAnonymousOsmAnd(device: String) async throws -> Bool {
        if openRegistration { return true }
        return try await ingest.store.hasCredential(device: device)
    }

    /// What Traccar answers an OsmAnd request from a device it does not know: `400 Bad Request`
    /// with an empty body. traccar/traccar, `src/main/java/org/traccar/protocol/OsmAndProtocolDecoder.java`:
    /// for `id`/`deviceid`, `getDeviceSession(...)` returns `null` for an unknown device and the
    /// decoder does `sendResponse(channel, HttpResponseStatus.BAD_REQUEST); return null;`. Its JSON
    /// form (Traccar Client's body) answers 404 (FACTS.md, read from the same decoder). The one
    /// refusal without the error body: OsmAnd clients expect Traccar's.
    static func unknownOsmAndDevice(json: Bool) -> Response {
        Response(status: json ? .notFound : .badRequest, headers: [.contentLength: "0"], body: .init())
    }

    /// `POST /owntracks`: as the Recorder, the first `X-Limit-U` / `X-Limit-D`, else `?u=` / `?d=`,
    /// else `owntracks`/`phone`.
    func ownTracks(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        let user = request.headers[values: HTTPField.Name("X-Limit-U")!].first ?? q["u"].map(String.init)
        let device = request.headers[values: HTTPField.Name("X-Limit-D")!].first ?? q["d"].map(String.init)
        if context.identity != .admin {
            // A device token: the device the request names (as stored, user/device), and the Basic
            // user, when one is given, its user.
            let id = OwnTracks.deviceID(user: user, device: device)
            try context.authorize(device: id)
            if let basic = context.basicUser, !basic.isEmpty, !id.hasPrefix(basic.lowercased() + "/") {
                throw HTTPError(.forbidden, message: "the Basic user '\(basic)' is not the user of device '\(id)'")
            }
        }
        let bytes = try await body.read(request, context)
        let id = OwnTracks.deviceID(user: user, device: device)
        let opened: (plain: [UInt8], secret: OwnTracksSecret?)
        let refused: [String]
        do {
            opened = try await ingest.openOwnTracks(bytes, device: id)
            refused = try await ingest.ownTracks(opened.plain, user: user, device: device).refused
        } catch let error as OwnTracksCryptoError {
            // Refused: 403 when it does not authenticate, 400 when the envelope can't be read, 413
            // when its data is too long.
            ingest.metrics.rejected(1)
            let status: HTTPResponse.Status =
                switch error.code {
                case .notAuthentic: .forbidden
                case .tooLarge: .contentTooLarge
                default: .badRequest
                }
            throw HTTPError(status, message: error.message)
        } catch let error as FormatsError {
            // 415 when the device has no secret.
            ingest.metrics.rejected(1)
            throw ErrorAnswer(error, status: error.code == .unsupported ? .unsupportedMediaType : .badRequest)
        }
        guard let secret = opened.secret else {
            return try Self.answer("[]", contentType: "application/json", refused: refused, context: context)
        }
        // Answered `[]` encrypted under the same secret, as a Recorder that holds the key answers.
        let answer = OwnTracksCrypto.encrypt(Array("[]".utf8), with: secret)
        return try Self.answer(
            String(decoding: answer, as: UTF8.self), contentType: "application/json", refused: refused,
            context: context)
    }

    /// `POST /api/v1/overland/batches`: each location filed under its `device_id`, or the device of
    /// the request's token, or `overland`; answered once stored. A batch sent again is stored once
    /// (the store's key: format, device, time, position).
    func overland(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body.read(request, context)
        let now = ingest.now
        let records: [TrailRecord]
        do {
            records = try Overland.read(bytes, device: context.identity.onlyDevice ?? "overland")
            try Ingest.checkDevices(records)
        } catch {
            ingest.metrics.rejected(1)
            throw ErrorAnswer(error, status: error.code == .tooLarge ? .contentTooLarge : .badRequest)
        }
        for device in Set(records.map(\.device)) { try context.authorize(device: device) }
        let sifted = try ingest.sift(records, format: "overland")
        _ = try await ingest.store(sifted.kept, format: "overland", received: now)
        return try Self.answer(
            Overland.acknowledgement, contentType: "application/json",
            refused: sifted.refused.map { "locations[\($0.index)]: \($0.problem.message)" }, context: context)
    }

    /// The answer to an ingest, or, when the faults say drop, half of it and a closed connection (the
    /// records are stored; the client can't know). Records acknowledged but not stored
    /// (``Ingest/sift(_:format:)``) are said in ``notStored``: their count and the first one's problem.
    static func answer(
        _ text: String, contentType: String, refused: [String] = [], context: ServerContext
    ) throws -> Response {
        var headers: HTTPFields = [.contentType: contentType, .acceptEncoding: "gzip"]
        if let first = refused.first {
            let said = "\(refused.count) record\(refused.count == 1 ? "" : "s") not stored: \(first)"
            // A field value is visible ASCII and spaces (RFC 9110, 5.5); a quoted region id may not be.
            headers[Self.notStored] = String(
                said.unicodeScalars.prefix(512).map { (0x20...0x7E).contains($0.value) ? Character($0) : "?" })
        }
        if context.drop {
            let full = ByteBuffer(string: text.isEmpty ? "ok" : text)
            headers[.contentLength] = String(full.readableBytes + 64)
            return Response(
                status: .ok, headers: headers,
                body: .init { writer in
                    try await writer.write(full.getSlice(at: 0, length: max(1, full.readableBytes / 2))!)
                    throw DroppedConnection()
                })
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// `X-KeepTrack-Not-Stored`: on a 2xx, how many of the records were acknowledged but not stored,
    /// and why the first was not.
    static let notStored = HTTPField.Name("X-KeepTrack-Not-Stored")!

    /// Ends an answer the faults drop halfway.
    struct DroppedConnection: Error {}
}
