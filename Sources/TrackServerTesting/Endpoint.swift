import Foundation
import KeepTrackTesting
import TrackServer

/// A fresh temporary directory (each SQLite test gets its own).
public func temporaryDirectory() -> String {
    var template = Array("/tmp/keeptrack-test-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

/// A real endpoint on 127.0.0.1, on a free port, with its own database.
public struct Endpoint: Sendable {
    public let server: TrackServer
    public let task: Task<Void, any Error>
    public let port: Int
    public let directory: String

    /// Starts one with fault injection on (`faults` from the start, `PUT /v1/faults` later);
    /// `configure` changes anything else (limits, timeouts) before it starts.
    public static func start(token: String? = "secret", faults: Faults = Faults(),
                             configure: (inout TrackServer.Configuration) -> Void = { _ in }) async throws -> Endpoint {
        let dir = temporaryDirectory()
        var c = TrackServer.Configuration(database: dir + "/endpoint.sqlite")
        c.token = token
        c.faultInjection = true
        c.faults = faults
        configure(&c)
        let server = try TrackServer(configuration: c)
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run { continuation.yield($0) } }
        let port = try await withTimeout(30, "the endpoint to listen") { [ready] in
            var it = ready.makeAsyncIterator()
            return await it.next() ?? 0
        }
        return Endpoint(server: server, task: task, port: port, directory: dir)
    }

    public func url(_ path: String = "/v1/locations") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Stops the server and deletes its directory (unless `keepingFiles`).
    public func stop(keepingFiles: Bool = false) async {
        await server.shutdown()
        _ = try? await task.value
        if !keepingFiles { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// A counter or gauge from the endpoint's metrics, as a whole number.
    public func metric(_ name: String) async -> Int {
        for line in await server.metricsText().split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last!).map { Int($0) } ?? -1
        }
        return 0
    }
}

