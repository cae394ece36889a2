import HTTPTypes
import Hummingbird
import NIOCore

/// Cross-origin requests from the origins in ``TrackServer/Configuration/corsOrigins`` (a web app
/// served from elsewhere, as the OwnTracks Frontend usually is), on every route.
///
/// A request whose `Origin` is listed gets `Access-Control-Allow-Origin` with that origin (and
/// `Access-Control-Allow-Credentials: true`, so a page may send HTTP Basic or a bearer token), or
/// `*` when `*` is listed; errors carry the headers too, so the page can read a 401. A preflight
/// (`OPTIONS` with `Access-Control-Request-Method`) from a listed origin is answered here, before
/// authentication (browsers send it without credentials): 204 with the methods and headers the
/// API takes. An origin that is not listed gets no CORS header (the browser then refuses the page
/// the answer); its preflight a 204 without one.
struct CrossOriginMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let origins: [String]

    static let allowMethods = "GET, HEAD, POST, PUT, OPTIONS"
    static let allowHeaders =
        "Authorization, Content-Type, Content-Encoding, X-Limit-U, X-Limit-D, X-Limit-User, "
        + "X-Limit-Device, X-Limit-From, X-Limit-To, X-Limit-Fields"
    static let exposeHeaders = "Link, Retry-After"

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, or `nil` when it is not listed.
    func allowed(_ origin: String) -> String? {
        if origins.contains(origin) { return origin }
        return origins.contains("*") ? "*" : nil
    }

    func headers(allowing value: String) -> HTTPFields {
        var headers: HTTPFields = [.accessControlAllowOrigin: value, .vary: "Origin"]
        if value != "*" { headers[.accessControlAllowCredentials] = "true" }
        headers[.accessControlExposeHeaders] = Self.exposeHeaders
        return headers
    }

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        guard let origin = request.headers[.origin] else { return try await next(request, context) }
        let value = allowed(origin)
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            guard let value else { return Response(status: .noContent, headers: [.vary: "Origin"]) }
            var headers = headers(allowing: value)
            headers[.accessControlAllowMethods] = Self.allowMethods
            headers[.accessControlAllowHeaders] = Self.allowHeaders
            headers[.accessControlMaxAge] = "600"
            return Response(status: .noContent, headers: headers)
        }
        guard let value else { return try await next(request, context) }
        let added = headers(allowing: value)
        do {
            var response = try await next(request, context)
            response.headers.append(contentsOf: added)
            return response
        } catch {
            throw CORSError(underlying: error, headers: added)
        }
    }
}

/// An error answered with CORS headers added to the answer it gets anyway.
struct CORSError: HTTPResponseError {
    /// The error as thrown by the route.
    let underlying: any Error
    let headers: HTTPFields

    var status: HTTPResponse.Status { (underlying as? any HTTPResponseError)?.status ?? .internalServerError }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        guard let error = underlying as? any HTTPResponseError else {
            var response = ErrorAnswer(
                .internalServerError, code: .internalError, message: ErrorAnswer.internalMessage
            ).response
            response.headers.append(contentsOf: headers)
            return response
        }
        var response = try error.response(from: request, context: context)
        response.headers.append(contentsOf: headers)
        return response
    }
}
