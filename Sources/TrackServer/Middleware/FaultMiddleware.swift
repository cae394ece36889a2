import Geo
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// The faults a server injects now: set at start (``TrackServer/Configuration/faults``) and by
/// `PUT /v1/faults` (``AdminRoutes``), read by ``FaultMiddleware`` for each request.
final class FaultInjection: Sendable {
    let faults: Mutex<Faults>

    init(_ faults: Faults) { self.faults = Mutex(faults) }

    /// What to do with the next request, and the faults it was decided by.
    func decide() -> (Faults.Decision, Faults) { faults.withLock { f in (f.decide(), f) } }

    /// Replaces the faults.
    func set(_ new: Faults) { faults.withLock { $0 = new } }
}

/// Injects the configured faults before a request reaches its route.
struct FaultMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let faults: FaultInjection
    /// The injected delays' clock.
    let clock: any EpochClock
    let metrics: ServerMetrics

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        // Health, metrics and the fault switch stay reachable.
        let path = request.uri.path
        if path == "/healthz" || path == "/metrics" || path == "/v1/faults" {
            return try await next(request, context)
        }
        let (decision, faults) = self.faults.decide()
        if faults.delay > 0 {
            try await clock.sleep(until: clock.now.advanced(by: .seconds(faults.delay)), tolerance: nil)
        }
        metrics.request(decision)
        switch decision {
        case .refuse:
            try await context.channel.close()
            throw HTTPError(.serviceUnavailable, message: "the server refuses (an injected fault)")
        case .fail:
            var headers: HTTPFields = [:]
            if let r = faults.retryAfter { headers[.retryAfter] = String(r) }
            return ErrorAnswer(
                .init(code: faults.failStatus), code: .injectedFailure,
                message: "injected failure (\(faults.failStatus))", headers: headers
            ).response
        case .garbage:
            // A captive portal's page (Resources/captive-portal.html), not what was asked for.
            return Response(
                status: .ok, headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.captive_portal_html)))
        case .drop:
            var c = context
            c.drop = true
            return try await next(request, c)
        case .serve:
            return try await next(request, context)
        }
    }
}
