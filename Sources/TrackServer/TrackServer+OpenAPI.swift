import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /openapi.json`: the HTTP API's reference, docs/openapi.yaml as JSON (Resources/openapi.json, generated
/// by OpenAPITests and compiled in as `PackageResources.openapi_json`: nothing is read from disk, so an
/// installed package serves it as a build does). Open, as `/healthz` is: it describes the routes, not the data.
extension TrackServer {
    /// The path of the document.
    static let openAPIPath = "/openapi.json"

    func addOpenAPIRoutes(to router: Router<ServerContext>) {
        router.get(RouterPath(Self.openAPIPath)) { _, _ in Self.openAPIResponse() }
        router.head(RouterPath(Self.openAPIPath)) { _, _ in try await Self.head(Self.openAPIResponse()) }
    }

    static func openAPIResponse() -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_json)))
    }
}
