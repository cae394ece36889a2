// Blocking work in tests, kept off Swift's cooperative pool.
//
// The pool has as many threads as cores (two here). A test that blocks one of them (a child process
// waited for, a blocking read, a loop until a process is gone) stalls every other test's async work
// for as long (an upload and the server it talks to, a hang guard's own timer): two such tests at
// once stall everything, and on a loaded machine an 11-record upload waited minutes for a thread.
// On Linux the pool's jobs also run on libdispatch's default-QoS worker threads, the ones
// `DispatchQueue.global()` and concurrent queues use, which libdispatch adds slowly while they
// block: blocking work on those starves the pool as surely. So blocking work runs on threads of
// its own (Foundation `Thread`s, or serial queues, whose overcommitting threads are made at once):
// - `offThePool { }`: one blocking call from an async test, on a thread of its own;
// - `.offThePool`: a trait for a suite (or test) whose body blocks, a synchronous test that runs the
//   command line, say: the whole test runs on Dispatch's threads, outside the pool;
// - `onOwnThreads { }`: async work that must keep pace with a device (a pty written at its pace).
// The blocking helpers of this module say so (`expectOffThePool`) when called on the pool anyway:
// the test fails at once, on any machine, instead of starving others only when the machine is busy.
import Dispatch
import Foundation
import Testing

/// Runs blocking work (a child process, a read) on a thread of its own and awaits its result, so
/// it does not hold one of the few threads of Swift's cooperative pool (as many as cores) while
/// other tests need them to make progress.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = "test.blocking"
        thread.start()
    }
}

/// A task executor on threads outside Swift's cooperative pool and outside libdispatch's
/// default-QoS workers: each job goes to a serial queue of its own, which libdispatch runs on an
/// overcommitting thread, made at once when none is idle. A test that blocks or must keep up with
/// a real device runs under it (``OffThePool``, ``onOwnThreads(_:)``), so neither it nor the other
/// tests wait for the pool's few threads.
public final class DispatchTaskExecutor: TaskExecutor, @unchecked Sendable {
    public static let shared = DispatchTaskExecutor()

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        DispatchQueue(label: "keeptrack.test.blocking").async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Runs `body` with its tasks (and their child tasks) on ``DispatchTaskExecutor``.
public func onOwnThreads<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
    try await withTaskExecutorPreference(DispatchTaskExecutor.shared, operation: body)
}

/// The trait of a suite or test whose body blocks (runs a child process to its end, reads a
/// pipe): it runs on ``DispatchTaskExecutor``'s threads, outside Swift's cooperative pool.
public struct OffThePool: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await onOwnThreads { try await function() }
    }
}

extension Trait where Self == OffThePool {
    /// The test (each test of the suite) runs outside Swift's cooperative pool: its body may block.
    public static var offThePool: Self { OffThePool() }
}

/// Whether the caller runs on Swift's cooperative pool: inside a task that prefers no executor of
/// its own (not on ``DispatchTaskExecutor``, not on a thread of ``offThePool(_:)``, not on the
/// main thread).
public var isOnTheCooperativePool: Bool {
    if Thread.isMainThread { return false }
    return withUnsafeCurrentTask { task in
        guard let task else { return false }
        return task.unownedTaskExecutor == nil
    }
}

/// Records an issue when `what`, a blocking call, is made on Swift's cooperative pool: it would hold
/// one of the pool's few threads (see this file's head), so the test must run it ``offThePool(_:)``
/// or carry the ``OffThePool`` trait.
public func expectOffThePool(_ what: @autoclosure () -> String) {
    guard isOnTheCooperativePool else { return }
    let message =
        "\(what()) blocks a thread of Swift's cooperative pool: await it in offThePool { } or give the test "
        + "the .offThePool trait"
    Issue.record(Comment(rawValue: message))
}
