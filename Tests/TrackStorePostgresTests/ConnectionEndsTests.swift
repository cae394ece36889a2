import KeepTrackTesting
import Logging
import PostgresNIO
import Testing
import TrackStore
@testable import TrackStorePostgres

/// Work on a pooled connection is answered when the connection ends under it, which postgres-nio
/// 1.33.2 never does for a statement issued on a connection that has just closed (ConnectionEnds.swift).
@Suite("PostgreSQL: work whose connection ends")
struct ConnectionEndsTests {
    let logger = Logger(label: "test")

    /// Two connections to a throwaway database: the first for the work, the second to end it.
    func connections() async throws -> (PostgresConnection, PostgresConnection) {
        let cluster = try await Postgres.shared()
        let name = try await offThePool { try cluster.createDatabase() }
        let configuration = try PostgresTrackStore.connectionConfiguration(PostgresURL(parsing: cluster.url(name)))
        let work = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        let other = try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
        return (work, other)
    }

    /// Ends `connection` as PostgreSQL does when it stops or is killed (its backend terminated: a
    /// FATAL error, then the end), and returns once the connection has closed.
    func end(_ connection: PostgresConnection, from other: PostgresConnection) async throws {
        var pid: Int32 = 0
        for try await p in try await connection.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) {
            pid = p
        }
        try await other.query("SELECT pg_terminate_backend(\(pid))", logger: logger)
        try? await connection.closeFuture.get()
    }

    /// The lost statement: issued on a connection that has closed, postgres-nio never answers it
    /// (a query run so outside `run` still waits, unanswered, when this test ends); through `run`,
    /// it is answered `unreachable`, and the connection is no longer watched.
    @Test func workOnAConnectionThatEndedIsAnsweredUnreachable() async throws {
        let (connection, other) = try await connections()
        try await end(connection, from: other)
        #expect(connection.isClosed)
        let ends = ConnectionEnds()
        let logger = self.logger
        await #expect {
            try await ends.run(on: connection) {
                try await connection.query("SELECT 1", logger: logger)
                return 1
            }
        } throws: { error in
            // postgres-nio as it is loses the statement, so the answer is the end's; one that answers
            // it would fail it for the closed connection, which `run` passes on.
            (error as? TrackStoreError)?.code == .unreachable || error is PSQLError
        }
        #expect(ends.connectionsWatched == 0)
        try await other.close()
    }

    /// Work that ends first keeps its answer, value or error; a connection leased again and again
    /// is watched once, and no longer once it has ended.
    @Test func workThatEndsFirstKeepsItsAnswerAndAConnectionIsWatchedOnce() async throws {
        let (connection, other) = try await connections()
        let ends = ConnectionEnds()
        let logger = self.logger
        for i in 1...50 {
            let value = try await ends.run(on: connection) {
                var n = 0
                for try await v in try await connection.query("SELECT \(i)::int8", logger: logger).decode(Int64.self) {
                    n = Int(v)
                }
                return n
            }
            #expect(value == i)
        }
        #expect(ends.connectionsWatched == 1)
        await #expect {
            try await ends.run(on: connection) {
                try await connection.query("SELECT 1/0", logger: logger)
                return 0
            }
        } throws: { ($0 as? PSQLError)?.serverInfo?[.sqlState] == "22012" }  // division_by_zero, not the end's
        try await end(connection, from: other)
        #expect(ends.connectionsWatched == 0)
        try await other.close()
    }

    /// The listeners' connections (the live stream's, the delivery queue's) are opened apart from the
    /// pool and not run through `ConnectionEnds`: postgres-nio answers `LISTEN` itself, giving its
    /// write a promise, so `listen(on:)` on a connection that has ended throws at once (and the
    /// listener's loop connects again) rather than waiting as a lost statement does.
    @Test func listenOnAConnectionThatEndedThrows() async throws {
        let (connection, other) = try await connections()
        try await end(connection, from: other)
        #expect(connection.isClosed)
        var consumed = false
        await #expect(throws: PSQLError.self) {
            try await connection.listen(on: PostgresTrackStore.queuedChannel) { _ in consumed = true }
        }
        #expect(!consumed)
        try await other.close()
    }
}
