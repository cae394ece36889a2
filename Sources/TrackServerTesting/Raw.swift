import AsyncHTTPClient
import Formats
import NIOCore
import NIOHTTP1

/// Raw HTTP against the endpoint, as any client would speak to it.
public struct Raw: Sendable {
    /// Tests send up to 40 requests at once: each gets a connection of its own rather than queueing
    /// for the pool's 8, where the wait counts against the connect timeout
    /// (`HTTPClientError.getConnectionFromPoolTimeout` after 10 s on a loaded machine, the request
    /// never sent). The same 120 s hang guard as the request's.
    public let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(
            timeout: .init(connect: .seconds(120)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)))
    public let endpoint: Endpoint

    public init(endpoint: Endpoint) { self.endpoint = endpoint }

    public func send(
        _ method: HTTPMethod, _ path: String, body: String? = nil, headers: [(String, String)] = [],
        token: String? = "secret", gzip: Bool = false
    ) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: endpoint.url(path))
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (k, v) in headers { request.headers.add(name: k, value: v) }
        if let body {
            var bytes = Array(body.utf8)
            if gzip {
                bytes = Gzip.compress(bytes)
                request.headers.add(name: "Content-Encoding", value: "gzip")
            }
            request.body = .bytes(bytes)
        }
        // A hang guard, not a figure: requests queue for the pool's connections on a loaded machine.
        let response = try await client.execute(request, timeout: .seconds(120))
        let text = try await response.body.collect(upTo: 16 << 20)
        return (Int(response.status.code), String(buffer: text))
    }

    public func close() async { try? await client.shutdown() }
}
