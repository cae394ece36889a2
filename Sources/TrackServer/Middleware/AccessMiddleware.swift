import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// Authenticates each request and puts its ``Identity`` in the context. A credential is the admin
/// token or a device's token (``CredentialStore/addCredential(device:now:)``), as a bearer, as the
/// password of HTTP Basic (how the OwnTracks apps send it), or as a `token` query parameter. A
/// credential that is neither gets 401; no credential gets 401 too, except OsmAnd's ingest (`/`),
/// whose route decides by the device id as Traccar does.
///
/// A request with `share=TOKEN` in its query is a share link's, whatever else it carries
/// (``ShareAccess``): read-only, one device, on the routes a share reads.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let credentials: Credentials
    let shares: ShareAccess

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        // Health, metrics and the API's description carry no personal data; everything else (the map
        // included: open it as /map?token=TOKEN) needs a credential once one exists.
        let path = request.uri.path
        if AdminRoutes.isPublic(path) || MapRoutes.isPublic(path) || ShareRoutes.isPublic(path) {
            return try await next(request, context)
        }
        if let share = request.uri.queryParameters["share"] {
            var c = context
            c.identity = try await shares.identity(token: String(share), method: request.method, path: path)
            return try await next(request, c)
        }
        guard try await credentials.required() else { return try await next(request, context) }
        // Dawarich's clients put their key in `api_key`.
        let query = (request.uri.queryParameters["token"] ?? request.uri.queryParameters["api_key"]).map(String.init)
        let presented = Credentials.presented(authorization: request.headers[.authorization], query: query)
        var c = context
        c.basicUser = presented.basicUser
        if let identity = try await credentials.identity(of: presented.credentials) {
            c.identity = identity
        } else if presented.credentials.isEmpty && path == "/" {
            c.identity = .anonymous
        } else {
            throw Self.unauthorized()
        }
        return try await next(request, c)
    }

    /// The `WWW-Authenticate` of a request without a valid credential.
    static let basicChallenge = "Basic realm=\"keeptrack\""

    static func unauthorized() -> HTTPError {
        HTTPError(
            .unauthorized, headers: [.wwwAuthenticate: basicChallenge],
            message: "a valid token is required (Authorization: Bearer TOKEN, or Basic with it as the password)")
    }
}

/// Who a credential is: the admin token, compared in constant time, or a device's token, looked up by
/// its digest (``CredentialStore/credentialDevice(token:)``). The routes' ``AccessMiddleware`` and the
/// stream's upgrade (``LiveStream``) ask it alike.
struct Credentials: Sendable {
    /// The admin token, if any.
    let token: String?
    let store: any TrackStore

    /// Whether a request needs a credential: an admin token is set, or a device has a token.
    func required() async throws -> Bool {
        if token != nil { return true }
        return try await store.hasCredentials()
    }

    /// Who the credentials presented make a request: the admin when one is the admin token, else the
    /// device whose token the first one is (one is looked up: each costs a digest and a read); `nil`
    /// when none is presented or the first is nobody's.
    func identity(of presented: [String]) async throws -> Identity? {
        if let token, presented.contains(where: { Self.sameSecret($0, token) }) { return .admin }
        guard let first = presented.first, let device = try await store.credentialDevice(token: first) else {
            return nil
        }
        return .device(device)
    }

    /// The credentials a request presents, in order: a bearer token, the password of HTTP Basic, the
    /// query's token (empty ones left out); and the Basic user.
    static func presented(authorization: String?, query: String?) -> (credentials: [String], basicUser: String?) {
        let bearer = authorization.flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let basic = authorization.flatMap { $0.hasPrefix("Basic ") ? basicCredential(String($0.dropFirst(6))) : nil }
        return ([bearer, basic?.password, query].compactMap { $0 }.filter { !$0.isEmpty }, basic?.user)
    }

    /// The user and password of a Basic credential (`base64(user:password)`), or `nil`.
    static func basicCredential(_ encoded: String) -> (user: String, password: String)? {
        var text = String(encoded.filter { $0 != " " }).replacing("+", with: "-").replacing("/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        guard let bytes = Base64URL.decode(text), let pair = String(validating: bytes, as: UTF8.self),
            let colon = pair.firstIndex(of: ":")
        else { return nil }
        return (String(pair[..<colon]), String(pair[pair.index(after: colon)...]))
    }

    /// Whether `a` is `b`, in a time that depends on their lengths only, not on where they first
    /// differ (`==` stops there, which tells a prober how much of a guess was right).
    static func sameSecret(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(truncatingIfNeeded: x.count ^ y.count) | (x.count == y.count ? 0 : 1)
        for i in 0..<min(x.count, y.count) { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}
