import PostgresNIO
import Synchronization
import TrackStore

/// Answers the store's work on a pooled connection as soon as that connection ends, even when
/// postgres-nio never would.
///
/// postgres-nio 1.33.2 never answers a statement issued on a connection that has just closed: the
/// statement is written into a channel whose handlers are gone, with no promise to fail, and its
/// caller waits forever. The pool hands out only open connections, but one can end between the
/// lease and the first statement (PostgreSQL restarted or killed, a network cut), and that window
/// widens when the machine is loaded. Seen with `tools/crash-test.py --postgres` under load: a batch
/// in flight when PostgreSQL was killed never got its answer, and `serve`, waiting for that request
/// to end, never stopped (docs/endpoint.md, "Failures"). So the work runs in a task of its own,
/// which ``run(on:_:)`` stops waiting for when the connection ends: it throws
/// ``TrackStoreError/Code/unreachable``, and a batch's uploader sends the batch again (a batch
/// committed just before is then recognised as duplicates). The work left behind, if it never
/// ends, is a suspended task and what it holds.
///
/// Each connection's end is watched once, however many times it is leased (a callback per lease
/// on its close future would pile up for as long as the connection lives).
final class ConnectionEnds: Sendable {
    /// The work waiting on each connection (by its object), each entry's ends by the work's number.
    private let watched = Mutex<[ObjectIdentifier: [Int: @Sendable () -> Void]]>([:])
    private let numbers = Atomic<Int>(0)

    /// How many connections are watched now (each from its first lease until it ends).
    var connectionsWatched: Int { watched.withLock { $0.count } }

    /// Runs `work` on `connection`, and returns what it returns, or throws what it throws, or
    /// throws ``TrackStoreError/Code/unreachable`` as soon as `connection` ends before it does.
    /// Cancelling the caller cancels the work.
    func run<T: Sendable>(
        on connection: PostgresConnection, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let number = numbers.wrappingAdd(1, ordering: .relaxed).newValue
        let key = ObjectIdentifier(connection)
        let answer = OneAnswer<T>()
        let first = watched.withLock { watched -> Bool in
            let first = watched[key] == nil
            watched[key, default: [:]][number] = {
                answer.give(.failure(TrackStoreError(.unreachable, "the connection to PostgreSQL ended")))
            }
            return first
        }
        if first {
            // The connection is kept until its end is told: no other connection can take its object's
            // identity before then. On a connection already closed, this runs at once.
            connection.closeFuture.whenComplete { [self, connection] _ in
                _ = connection
                let ends = watched.withLock { $0.removeValue(forKey: key) } ?? [:]
                for end in ends.values { end() }
            }
        }
        let task = Task {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            watched.withLock { _ = $0[key]?.removeValue(forKey: number) }
            answer.give(result)
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { answer.wait($0) }
        } onCancel: {
            task.cancel()  // the work is cancelled as it would be in this task
        }
    }
}

/// One answer, given once, to one waiter, before or after it waits: the first of two racing
/// outcomes (``ConnectionEnds``: the work or the connection's end; ``waitForEnd(of:atMost:clock:)``:
/// the task's end or the limit).
final class OneAnswer<T: Sendable>: Sendable {
    private let state = Mutex<(waiting: CheckedContinuation<T, any Error>?, given: Result<T, any Error>?)>(
        (nil, nil))

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let given = state.withLock { s -> Result<T, any Error>? in
            if s.given == nil { s.waiting = continuation }
            return s.given
        }
        if let given { continuation.resume(with: given) }
    }

    func give(_ result: Result<T, any Error>) {
        let waiting = state.withLock { s -> CheckedContinuation<T, any Error>? in
            guard s.given == nil else { return nil }
            s.given = result
            defer { s.waiting = nil }
            return s.waiting
        }
        waiting?.resume(with: result)
    }
}

/// The rows of a statement, read whole on their connection (``PostgresTrackStore/liveQuery(_:logger:)``),
/// then iterated and decoded as postgres-nio's `PostgresRowSequence` is (`decode` is postgres-nio's,
/// for any sequence of rows).
struct LiveRows: AsyncSequence, Sendable {
    typealias Element = PostgresRow
    let rows: [PostgresRow]

    struct AsyncIterator: AsyncIteratorProtocol {
        var rows: IndexingIterator<[PostgresRow]>
        mutating func next() async throws -> PostgresRow? { rows.next() }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rows: rows.makeIterator()) }
}
