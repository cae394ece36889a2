import Foundation
import Geo
import KeepTrackTesting
import TrackServer
import TrackStore
import TrackStorePostgres

/// The store an endpoint test runs against: every endpoint test that touches storage takes it as an
/// argument (`@Test(arguments: StoreKind.allCases)`), so each runs against both.
public enum StoreKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// A SQLite file in the test's temporary directory.
    case sqlite
    /// A fresh database in the test process's PostgreSQL cluster (``Postgres/shared()``).
    case postgres

    public var description: String { rawValue }
}

/// A real endpoint on 127.0.0.1, on a free port, with its own database.
public struct Endpoint: Sendable {
    public let server: TrackServer
    public let task: Task<Void, any Error>
    public let port: Int
    public let directory: String
    /// The database: a SQLite file or a `postgres://` URL (for a second endpoint on it).
    public let database: String
    /// The PostgreSQL database this endpoint created (dropped by ``stop(keepingFiles:)``).
    public let createdDatabase: String?

    /// Starts one over `store` with fault injection on (`faults` from the start, `PUT /v1/faults`
    /// later), on `clock` (receipt times, the offline events); `configure` changes anything else (limits, timeouts) before it starts. With `database`
    /// (a file or a `postgres://` URL) it shares that database instead of creating its own. The store
    /// runs on the wall clock unless `storeClock` is given (its sweeps, its `COPY` budget's recounts).
    public static func start(
        store: StoreKind = .sqlite, database: String? = nil, token: String? = "secret",
        faults: Faults = Faults(), clock: any EpochClock = WallClock(), storeClock: (any EpochClock)? = nil,
        configure: (inout TrackServer.Configuration) -> Void = { _ in }
    ) async throws -> Endpoint {
        let dir = temporaryDirectory()
        var created: String?
        var c = TrackServer.Configuration()
        var path = database ?? dir + "/endpoint.sqlite"
        if database == nil, store == .postgres {
            let cluster = try await Postgres.shared()
            let name = try await offThePool { try cluster.createDatabase() }
            created = name
            path = cluster.url(name)
        }
        c.token = token
        c.faultInjection = true
        c.faults = faults
        configure(&c)
        let server = try TrackServer(
            configuration: c, store: try await openTrackStore(path, clock: storeClock ?? WallClock()), clock: clock)
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run { continuation.yield($0) } }
        let port = try await withTimeout(30, "the endpoint to listen") { [ready] in
            var it = ready.makeAsyncIterator()
            return await it.next() ?? 0
        }
        return Endpoint(
            server: server, task: task, port: port, directory: dir, database: path, createdDatabase: created)
    }

    public func url(_ path: String = "/v1/locations") -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Stops the server and deletes its directory and database (unless `keepingFiles`).
    public func stop(keepingFiles: Bool = false) async {
        await server.shutdown()
        _ = try? await task.value
        await server.store.close()
        guard !keepingFiles else { return }
        await removeFiles()
    }

    /// Deletes the directory and database of an endpoint stopped keeping them.
    public func removeFiles() async {
        try? FileManager.default.removeItem(atPath: directory)
        if let createdDatabase, let cluster = try? await Postgres.shared() {
            _ = try? await offThePool { try cluster.dropDatabase(createdDatabase) }
        }
    }

    /// A counter or gauge from the endpoint's metrics, as a whole number.
    public func metric(_ name: String) async -> Int {
        for line in await server.metricsText().split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last!).map { Int($0) } ?? -1
        }
        return 0
    }
}
