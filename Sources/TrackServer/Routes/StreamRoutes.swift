import HTTPTypes
import Hummingbird
import NIOCore

/// The live stream's paths asked without `Upgrade: websocket`: `GET /v1/stream` and the Recorder's
/// `GET /ws/last` (and their `HEAD`) answer 426 with `Upgrade: websocket`, saying how to ask. An
/// upgrade never reaches the router: the connection's channel hands it to ``LiveStream`` first.
struct StreamRoutes: Sendable {
    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        for path in [LiveStream.streamPath, LiveStream.recorderPath] {
            routes.get(RouterPath(path)) { _, _ in Self.withoutUpgrade(path) }
            routes.head(RouterPath(path)) { _, _ in try await Answer.head(Self.withoutUpgrade(path)) }
        }
        return routes
    }

    /// `GET path` (a WebSocket route) without an upgrade: 426, saying how to ask.
    static func withoutUpgrade(_ path: String) -> Response {
        ErrorAnswer(
            .upgradeRequired, message: "GET \(path) is a WebSocket: ask with Upgrade: websocket",
            headers: [.upgrade: "websocket"]
        ).response
    }
}
