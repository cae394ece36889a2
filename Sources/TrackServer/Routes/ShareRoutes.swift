import Formats
import Foundation
import Geo
import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// Share links (docs/endpoint.md, "Share links"):
///
/// - `POST /v1/shares` `{"device","expires","from"?,"to"?}` (the admin, or a device token for its own
///   device): a new share, 201 with its token and its path `/s/TOKEN`, the only time they are seen.
/// - `GET /v1/shares`: the shares (a device token: its own device's; a share link: itself, which tells
///   its page the device and the window to open on).
/// - `DELETE /v1/shares/{shareId}`: revokes one at once.
/// - `GET /s/{token}`: the map page (``MapShell``) for a share that is active; its script reads the
///   token from its address and sends `share=TOKEN` with each request (``ShareAccess``). Unknown: 404;
///   expired or revoked: 410; over its rate: 429; each a page that says so to a browser (one that
///   accepts `text/html`, `Resources/share-refused.html`), the JSON error to any other client.
struct ShareRoutes: Sendable {
    let store: any TrackStore
    let access: ShareAccess
    let shell: MapShell
    let clock: any EpochClock

    /// The share page is served without a credential: its token is its credential.
    static func isPublic(_ path: String) -> Bool { path.hasPrefix("/s/") }

    /// The largest body of `POST /v1/shares`.
    static let maxBody = 4096

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.post("/v1/shares") { request, context in try await add(request, context) }
        routes.get("/v1/shares") { _, context in try await list(context) }
        routes.head("/v1/shares") { _, context in try await Answer.head(list(context)) }
        routes.delete("/v1/shares/{shareId}") { _, context in try await remove(context) }
        routes.get("/s/{token}") { request, context in try await page(request, context) }
        routes.head("/s/{token}") { request, context in try await Answer.head(page(request, context)) }
        return routes
    }

    func add(_ request: Request, _ context: ServerContext) async throws -> Response {
        let body = request.body
        let buffer = try await body.collect(upTo: Self.maxBody)
        let object: [String: Any]
        do {
            guard let o = try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any] else {
                throw HTTPError(.badRequest, message: "the body is not a JSON object")
            }
            object = o
        } catch let error as HTTPError {
            throw error
        } catch {
            throw HTTPError(.badRequest, message: "the body is not JSON")
        }
        guard let device = object["device"] as? String else {
            throw HTTPError(.badRequest, message: "device: a string is required")
        }
        try context.authorize(device: device)
        let now = clock.now.secondsSince1970
        // A number is seconds, as the command line's `--expires 90` is.
        let expiresText: String
        if let value = object["expires"], !(value is Bool), let seconds = value as? Double {
            expiresText = "\(seconds)"
        } else if let text = object["expires"] as? String {
            expiresText = text
        } else {
            throw HTTPError(
                .badRequest, message: "expires: a duration (\"2h\", or seconds) or an ISO 8601 time is required")
        }
        let expires: Double
        if let t = ISOTime.parse(expiresText) {
            expires = t
        } else if let seconds = try? DurationText.seconds(expiresText) {
            expires = now + seconds
        } else {
            throw HTTPError(
                .badRequest,
                message:
                    "expires: '\(expiresText.prefix(40))' is neither a duration (90, 5m, 2h, 30d) nor an ISO 8601 time")
        }
        func time(_ key: String) throws -> Double? {
            guard let v = object[key], !(v is NSNull) else { return nil }
            guard let text = v as? String else { throw HTTPError(.badRequest, message: "\(key): a string is required") }
            return try QueryTime.parse(key, text)
        }
        let from = try time("from"), to = try time("to")
        // A device known by its points, or by a token of its own (a phone set up, not sent yet).
        let known = try await store.device(device) != nil
        let hasToken = try await store.credentials().contains { $0.device == device }
        guard known || hasToken else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        let made: (share: Share, token: String)
        do {
            made = try await store.addShare(device: device, expires: expires, from: from, to: to, now: now)
        } catch let error as TrackStoreError where error.code == .invalidShare || error.code == .invalidDeviceID {
            throw HTTPError(.badRequest, message: error.message)
        }
        var out = Self.json(made.share, now: now)
        out.removeLast()
        out += ",\"token\":\"\(made.token)\",\"url\":\"/s/\(made.token)\"}\n"
        return Response(
            status: .created, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: out)))
    }

    func list(_ context: ServerContext) async throws -> Response {
        let now = clock.now.secondsSince1970
        if case .anonymous = context.identity { throw AccessMiddleware.unauthorized() }
        var shares = try await store.shares(device: context.identity.onlyDevice)
        if case .share(let grant) = context.identity { shares = shares.filter { $0.id == grant.id } }
        return Answer.json("{\"shares\":[" + shares.map { Self.json($0, now: now) }.joined(separator: ",") + "]}\n")
    }

    func remove(_ context: ServerContext) async throws -> Response {
        let id = context.parameters.get("shareId") ?? ""
        let now = clock.now.secondsSince1970
        // A device token sees (and revokes) its own device's shares only: another's is "no such share".
        let mine = try await store.shares(device: context.identity.onlyDevice).contains { $0.id == id }
        guard mine, let share = try await store.revokeShare(id: id, at: now) else {
            throw HTTPError(.notFound, message: "no share '\(id.prefix(40))'")
        }
        return Answer.json(Self.json(share, now: now) + "\n")
    }

    func page(_ request: Request, _ context: ServerContext) async throws -> Response {
        let token = context.parameters.get("token") ?? ""
        do {
            _ = try await access.share(token: token)
        } catch let error as HTTPError {
            let refusal = error.status == .unauthorized ? HTTPError(.notFound, message: "no such share link") : error
            guard request.headers[.accept]?.contains("text/html") == true else { throw refusal }
            return Self.refusedPage(refusal)
        }
        var response = shell.response(to: request)
        response.headers[.cacheControl] = "no-store"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[.eTag] = nil
        return response
    }

    /// The page's template (`Resources/share-refused.html`).
    static let refusedTemplate = HTMLTemplate(PackageResources.share_refused_html)

    /// What a browser is shown for a share link refused with `error` (404, 410 or 429), with its status
    /// and headers (a 429's `Retry-After`).
    static func refusedPage(_ error: HTTPError) -> Response {
        let title: String, advice: String
        switch error.status {
        case .gone:
            title = "This share link has ended"
            advice = "It expired or was revoked. Ask the person who shared it for a new link."
        case .tooManyRequests:
            title = "Too many requests for this share link"
            advice = "Wait a moment, then reload the page."
        default:
            title = "No such share link"
            advice = "Check that the address was copied whole, or ask the person who shared it for it again."
        }
        let body = refusedTemplate.render([
            "title": .text(title), "advice": .text(advice), "message": .text(error.body ?? ""),
        ])
        var headers = error.headers
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return Response(status: error.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// A share as the routes give it (no token: it is not kept).
    static func json(_ s: Share, now: Double) -> String {
        var device: [UInt8] = []
        ByteWriting.appendJSONString(s.device, to: &device)
        func time(_ t: Double?) -> String { t.map { "\"\(ISOTime.string($0))\"" } ?? "null" }
        return "{\"id\":\"\(s.id)\",\"device\":\(String(decoding: device, as: UTF8.self)),"
            + "\"created\":\(time(s.created)),\"expires\":\(time(s.expires)),\"from\":\(time(s.from)),"
            + "\"to\":\(time(s.to)),\"revoked\":\(time(s.revoked)),\"state\":\"\(s.state(at: now).rawValue)\"}"
    }
}
