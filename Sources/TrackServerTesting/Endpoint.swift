import Foundation
import Geo
import KeepTrackTesting
import Testing
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
    ///
    /// Each step has a hang guard (``withTimeout(_:_:_:)``): services that never end, or a store that
    /// never closes, fail the calling test naming the step (the server's task is then cancelled), and
    /// the files are still removed, instead of holding the whole run until CI's limit. A full run once
    /// hung, likely here (2026-11-30, a PostgreSQL endpoint of `RecorderAPITests`: its database never
    /// dropped, not even its listening socket left, no CPU used for 15 minutes).
    public func stop(keepingFiles: Bool = false) async {
        await server.shutdown()
        let task = self.task
        let ended = await Self.guardAgainstHang("the endpoint's services to end after its shutdown") {
            _ = try? await task.value
        }
        if !ended { task.cancel() }
        let store = server.store
        _ = await Self.guardAgainstHang("the endpoint's store to close") { await store.close() }
        guard !keepingFiles else { return }
        await removeFiles()
    }

    /// Runs `step` under a hang guard of 120 s (times ``hangGuardPatience``); false, with an issue
    /// recorded naming `what`, when it did not end.
    static func guardAgainstHang(_ what: String, _ step: @escaping @Sendable () async -> Void) async -> Bool {
        do {
            try await withTimeout(120, what, step)
            return true
        } catch {
            Issue.record(error)
            return false
        }
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
