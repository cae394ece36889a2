import Foundation
import Geo
import Hummingbird
import Synchronization
import TrackStore

/// A fake Nominatim: `/reverse` answers the recorded JSON of the cell asked (500 for a cell it has
/// none for), and keeps each request's query and `User-Agent`.
final class FakeNominatim: Sendable {
    final class Seen: Sendable {
        let requests = Mutex<[(query: String, agent: String)]>([])
    }
    let seen = Seen()
    let task: Task<Void, any Error>
    let port: Int

    init(answers: [String: String]) async throws {
        let seen = self.seen
        let router = Router()
        router.get("/reverse") { request, _ -> Response in
            let q = request.uri.queryParameters
            seen.requests.withLock { $0.append((request.uri.query ?? "", request.headers[.userAgent] ?? "")) }
            let cell = PlaceCell(
                Coordinate(
                    latitude: Double(String(q["lat"] ?? "")) ?? 99, longitude: Double(String(q["lon"] ?? "")) ?? 0))
            guard let json = answers[cell.key] else {
                return Response(status: .internalServerError)
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: .init(string: json)))
        }
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) })
        task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var it = ready.makeAsyncIterator()
        port = await it.next() ?? 0
    }

    var url: String { "http://127.0.0.1:\(port)" }
    var count: Int { seen.requests.withLock { $0.count } }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}
