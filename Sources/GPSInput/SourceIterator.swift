import Geo
import SystemIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The iterator of the thread-backed sources (gpsd, serial): elements arrive through a bounded
/// buffer of ``SourceIterator/bufferSize`` elements; when the consumer falls that far behind, the
/// oldest are dropped, and an ``SourceEvent/Kind/error`` event says how many.
///
/// Cancelling the consuming task stops the source: ``next()`` returns `nil` once the worker
/// thread has closed its device or connection (it wakes at once from any wait to do so).
public struct SourceIterator: AsyncIteratorProtocol {
    public typealias Element = SourceElement
    public typealias Failure = Never

    /// Elements kept for a slow consumer.
    public static let bufferSize = 4096

    var base: AsyncStream<SourceElement>.Iterator
    let link: WorkerLink

    init(base: AsyncStream<SourceElement>.Iterator, link: WorkerLink) {
        self.base = base
        self.link = link
    }

    public mutating func next() async -> SourceElement? {
        if let element = await base.next() {
            await moveToWorkerThread()
            return element
        }
        // The stream ended: the worker finished, or the consumer was cancelled. Either way the
        // iteration ends when the worker is gone, its device or connection closed.
        await link.stopAndWaitForExit()
        return nil
    }

    /// A consumer that prefers the worker's executor takes every element on the worker thread,
    /// checked at each element, whatever thread it resumed on. One that began before the thread
    /// attached takes what is already buffered on the thread it began on (a loaded machine lets
    /// the worker connect and read first). And a clean-clone run of `.ci/run` (2026-11-30) still
    /// saw one element taken elsewhere when the check was made until the consumer was once on the
    /// worker thread, then trusted: by what path, is not found. A yield moves it onto the worker
    /// thread (its preferred executor while the thread is attached); it is tried again, at most
    /// twice more, should it resume elsewhere.
    private func moveToWorkerThread() async {
        let executor = link.executor
        guard executor.isPreferredByCurrentTask else { return }
        var tries = 0
        while tries < 3, executor.hasOtherOwner {
            await Task.yield()
            tries += 1
        }
    }
}

/// What a worker thread shares with its source and consumer.
final class WorkerLink: Sendable {
    let continuation: AsyncStream<SourceElement>.Continuation
    private let stopped = Atomic<Bool>(false)
    private let dropped = Atomic<Int>(0)
    let name: String

    /// Runs the consumer's tasks on the worker thread (when the consumer prefers it) and ends a
    /// ``pause(_:)`` early on ``wake()`` and ``stop()``.
    let executor: ThreadExecutor
    /// Whether the worker thread has returned, and who waits for it.
    private let exit = Mutex<(exited: Bool, waiters: [(id: Int, continuation: CheckedContinuation<Void, Never>)])>(
        (false, []))
    private let nextWaiter = Atomic<Int>(0)

    init(name: String, continuation: AsyncStream<SourceElement>.Continuation, executor: ThreadExecutor) {
        self.name = name
        self.continuation = continuation
        self.executor = executor
    }

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    func stop() {
        stopped.store(true, ordering: .releasing)
        wake()
    }

    /// Ends the worker's current ``pause(_:)`` (a watch wanted again, a stop).
    func wake() { executor.wake() }

    /// A descriptor that becomes readable on ``wake()``, ``stop()`` and when a job of the consumer
    /// waits: workers add it to their `poll` so that no wait outlasts a stop, and call
    /// ``runJobs(woken:)`` before each wait and after it.
    var wakeFD: Int32 { executor.wakeFD }

    /// Runs the consumer's jobs waiting for this thread (`woken`: after ``wakeFD`` fired, which it
    /// drains). Returns whether a ``wake()`` or ``stop()`` came.
    @discardableResult
    func runJobs(woken: Bool = false) -> Bool { executor.runJobs(drain: woken) }

    /// Stops the worker and returns once its thread has returned, or after `atMost` seconds if it
    /// has not (a thread stuck inside a C library call must not keep a shutdown waiting: it still
    /// closes its device when the call returns).
    func stopAndWaitForExit(atMost seconds: Double = 2) async {
        stop()
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let exited = exit.withLock { state -> Bool in
                if state.exited { return true }
                state.waiters.append((id, c))
                return false
            }
            if exited {
                c.resume()
                return
            }
            Task { [self] in
                try? await Task.sleep(for: .seconds(seconds))
                let waiter = exit.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard let i = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: i).continuation
                }
                waiter?.resume()
            }
        }
    }

    /// Called on the worker thread when its body has returned.
    private func markExited() {
        let waiters = exit.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.exited = true
            defer { state.waiters = [] }
            return state.waiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }

    func yield(_ fix: Fix) {
        send(.fix(fix))
    }

    func yield(_ kind: SourceEvent.Kind, _ message: String) {
        send(.event(SourceEvent(kind, source: name, message: message)))
    }

    func yield(_ kind: SourceEvent.Kind, _ error: GPSInputError) {
        send(.event(SourceEvent(kind, source: name, error: error)))
    }

    private func send(_ element: SourceElement) {
        if case .dropped = continuation.yield(element) {
            let n = dropped.add(1, ordering: .relaxed).newValue
            if n == 1 || n % 1000 == 0 {
                let error = GPSInputError(.consumerTooSlow, limit: n)
                continuation.yield(.event(SourceEvent(.error, source: name, error: error)))
            }
        }
    }

    func finish() { continuation.finish() }

    /// Sleeps up to `seconds` in `poll`, waking early on ``wake()`` or ``stop()`` (no polling
    /// loop: a released gpsd watch costs no wake-ups). Returns `false` when stopped.
    @discardableResult
    func pause(_ seconds: Double) -> Bool {
        let end = monotonicSeconds() + seconds
        var woken = false
        while !isStopped {
            // The consumer's jobs run meanwhile; only a wake or a stop ends the pause early.
            if runJobs(woken: woken) { break }
            let left = end - monotonicSeconds()
            if left <= 0 { break }
            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let timeout = Int32(min(max(0, left * 1000).rounded(.up), Double(Int32.max)))
            woken = poll(&fds, 1, timeout) > 0
        }
        return !isStopped
    }

    /// Starts `body` on a dedicated thread (blocking I/O never runs on the cooperative pool) and
    /// returns the iterator the consumer reads.
    ///
    /// With `executor` (the source's ``FixSource/preferredExecutor``), the thread runs the jobs of
    /// the tasks that prefer it between its waits: a consumer that prefers it takes each element
    /// on this thread, without a thread hand-off. A second iteration running at the same time gets
    /// an executor of its own.
    static func start(
        name: String, threadName: String, executor: ThreadExecutor? = nil,
        onLink: (WorkerLink) -> Void = { _ in },
        _ body: @escaping @Sendable (WorkerLink) -> Void
    ) -> SourceIterator {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SourceElement.self, bufferingPolicy: .bufferingNewest(SourceIterator.bufferSize))
        var own = ThreadExecutor()
        if let executor, executor.reserve() { own = executor } else { _ = own.reserve() }
        let link = WorkerLink(name: name, continuation: continuation, executor: own)
        onLink(link)
        continuation.onTermination = { _ in link.stop() }
        startThread(name: threadName) {
            link.executor.attach()
            body(link)
            // Jobs from now on (the consumer waiting for this exit) run on the global executor.
            link.executor.detach()
            link.markExited()
            link.finish()
        }
        return SourceIterator(base: stream.makeAsyncIterator(), link: link)
    }
}
