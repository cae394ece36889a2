import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// Who a request is: the admin (the `--token`, or anyone when no token and no device credential
/// exist), one device (its own token), or nobody (no credential: only OsmAnd ingest, which carries
/// none, gets this far).
enum Identity: Sendable, Equatable {
    case admin
    case device(String)
    case anonymous

    /// The only device this identity may read and write, or `nil` for all.
    var onlyDevice: String? {
        if case .device(let id) = self { return id }
        return nil
    }
}

/// Authenticates each request and puts its ``Identity`` in the context. A credential is the admin
/// token or a device's token (``CredentialStore/addCredential(device:now:)``), as a bearer, as the
/// password of HTTP Basic (how the OwnTracks apps send it), or as a `token` query parameter. A
/// credential that is neither gets 401; no credential gets 401 too, except OsmAnd's ingest (`/`),
/// whose route decides by the device id as Traccar does.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let server: TrackServer

    /// The user and password of a Basic credential (`base64(user:password)`), or `nil`.
    static func basicCredential(_ encoded: String) -> (user: String, password: String)? {
        var text = String(encoded.filter { $0 != " " }).replacing("+", with: "-").replacing("/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        guard let bytes = Base64URL.decode(text), let pair = String(validating: bytes, as: UTF8.self),
            let colon = pair.firstIndex(of: ":")
        else { return nil }
        return (String(pair[..<colon]), String(pair[pair.index(after: colon)...]))
    }

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        // Health, metrics and the API's description carry no personal data; everything else (the map
        // included: open it as /map?token=TOKEN) needs a credential once one exists.
        let path = request.uri.path
        let token = server.configuration.token
        guard path != "/healthz", path != "/metrics", path != TrackServer.openAPIPath, !MapScript.isPublic(path)
        else {
            return try await next(request, context)
        }
        if token == nil, try await !server.store.hasCredentials() { return try await next(request, context) }
        let authorization = request.headers[.authorization]
        let bearer = authorization.flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let basic = authorization.flatMap {
            $0.hasPrefix("Basic ") ? Self.basicCredential(String($0.dropFirst(6))) : nil
        }
        // Dawarich's clients put their key in `api_key`.
        let query = (request.uri.queryParameters["token"] ?? request.uri.queryParameters["api_key"]).map(String.init)
        var c = context
        c.basicUser = basic?.user
        let presented = [bearer, basic?.password, query].compactMap { $0 }.filter { !$0.isEmpty }
        if let token, presented.contains(where: { Self.sameSecret($0, token) }) {
            c.identity = .admin
        } else if let first = presented.first {
            // One credential is looked up (the first of bearer, Basic, query): each costs a digest
            // and a read.
            guard let device = try await server.store.credentialDevice(token: first) else { throw Self.unauthorized() }
            c.identity = .device(device)
        } else if path == "/" {
            c.identity = .anonymous
        } else {
            throw Self.unauthorized()
        }
        return try await next(request, c)
    }

    /// Whether `a` is `b`, in a time that depends on their lengths only, not on where they first
    /// differ (`==` stops there, which tells a prober how much of a guess was right).
    static func sameSecret(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count) | (x.count == y.count ? 0 : 1)
        for i in 0..<min(x.count, y.count) { difference |= x[i] ^ y[i] }
        return difference == 0
    }

    /// The `WWW-Authenticate` of a request without a valid credential.
    static let basicChallenge = "Basic realm=\"keeptrack\""

    static func unauthorized() -> HTTPError {
        HTTPError(
            .unauthorized, headers: [.wwwAuthenticate: basicChallenge],
            message: "a valid token is required (Authorization: Bearer TOKEN, or Basic with it as the password)")
    }
}

extension TrackServer {
    /// Throws 403 unless the request may write or read `device`. Nobody (``Identity/anonymous``)
    /// may only be let in by ``admitsAnonymousOsmAnd(device:)``.
    func authorize(_ context: ServerContext, device: String) throws {
        switch context.identity {
        case .admin: return
        case .device(let own) where own == device: return
        case .device(let own):
            throw HTTPError(
                .forbidden, message: "this token is device '\(own)''s: it may not write or read '\(device)'")
        case .anonymous:
            throw AccessMiddleware.unauthorized()
        }
    }

    /// Whether an OsmAnd request without a credential may store for `device`: the device has a
    /// token (it is known, as a device registered in Traccar is), or ``Configuration/openRegistration``
    /// is on.
    func admitsAnonymousOsmAnd(device: String) async throws -> Bool {
        if configuration.openRegistration { return true }
        return try await store.hasCredential(device: device)
    }

    /// What Traccar answers an OsmAnd request from a device it does not know: `400 Bad Request`
    /// with an empty body. traccar/traccar, `src/main/java/org/traccar/protocol/OsmAndProtocolDecoder.java`:
    /// for `id`/`deviceid`, `getDeviceSession(...)` returns `null` for an unknown device and the
    /// decoder does `sendResponse(channel, HttpResponseStatus.BAD_REQUEST); return null;`. Its JSON
    /// form (Traccar Client's body) answers 404 (FACTS.md, read from the same decoder).
    static func unknownOsmAndDevice(json: Bool) -> Response {
        Response(status: json ? .notFound : .badRequest, headers: [.contentLength: "0"], body: .init())
    }

    /// Throws 403 unless the request is the admin's.
    func requireAdmin(_ context: ServerContext) throws {
        guard context.identity == .admin else {
            throw HTTPError(.forbidden, message: "only the admin token may do this")
        }
    }
}
