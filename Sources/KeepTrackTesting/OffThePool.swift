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
import Synchronization
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
///
/// At most ``TestSlots/shared``'s count of such tests run at once; the others wait for a slot before
/// they start, suspended (holding no thread). Unbounded, a full run started every command-line test
/// at once: 35 to 48 threads, each waiting on a `keeptrack` child, on 2 cores. The pool's two threads
/// then got a share of the CPU too small for the tests on them, and a test whose real server had a
/// wall-clock hang guard lost its server while it waited for a thread (a stall of two minutes, seen
/// in CI). A test admitted runs to its end without waiting again: its commands and the processes it
/// holds are never queued behind other tests'. A test with a time limit is not queued either (the
/// wait would count against its limit).
public struct OffThePool: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// Whether the current task already holds a slot (a test under two suites with the trait).
    @TaskLocal public static var holdsSlot = false

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if Self.holdsSlot || test.traits.contains(where: { $0 is TimeLimitTrait }) {
            return try await onOwnThreads { try await function() }
        }
        await TestSlots.shared.acquire()
        defer { TestSlots.shared.release() }
        try await Self.$holdsSlot.withValue(true) { try await onOwnThreads { try await function() } }
    }
}

/// A counting semaphore whose waiters are suspended tasks, not blocked threads: the slots of tests
/// that run outside the pool (``OffThePool``).
public final class TestSlots: Sendable {
    /// Twice the cores, at least 4: enough to overlap tests that wait on a child process, few enough
    /// that the tests on the pool keep a fair share of the CPU.
    public static let shared = TestSlots(count: max(4, 2 * ProcessInfo.processInfo.activeProcessorCount))

    /// How many slots there are.
    public let count: Int
    private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

    public init(count: Int) {
        self.count = count
        state = Mutex((count, []))
    }

    /// How many slots are free now.
    public var available: Int { state.withLock { $0.free } }

    /// How many callers wait for a slot now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Takes a slot, waiting (suspended) until one is free; waiters are served in arrival order.
    public func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.free > 0 else {
                    s.waiters.append(c)
                    return false
                }
                s.free -= 1
                return true
            }
            if now { c.resume() }
        }
    }

    /// Gives a slot back, to the longest waiter if there is one.
    public func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard !s.waiters.isEmpty else {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
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
