import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A task executor whose jobs run on a thread that also waits for I/O: the thread that reads a
/// device runs the tasks that consume what it reads, so handing a reading over costs no thread
/// wake-up (no futex, no cooperative-pool thread woken).
///
/// A thread ``attach()``es itself, then calls ``runJobs()`` before and after each of its waits and
/// adds ``wakeFD`` to its `poll`: a job enqueued from another thread (a timer, a signal handler's
/// task) writes one byte there. A job enqueued by the owner thread itself (the consumer resumed by
/// a reading it just handed over) writes nothing: the owner runs it before it waits again. While no
/// thread is attached (before the reader starts, after it stopped) jobs go to the global
/// concurrent executor, so no task is ever stranded.
///
/// Jobs run on the owner thread must not block waiting for that thread's own I/O.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var owner: pthread_t?
        /// A thread is about to attach (``reserve()``).
        var reserved = false
        /// A byte is in the pipe and not yet drained: later enqueues need not write another.
        var woken = false
    }

    private let state = Mutex(State())
    private let pipe = WakePipe()
    /// Wakes that are not jobs (``wake()``): a stop, a watch wanted again.
    private let signalled = Atomic<Bool>(false)

    public init() {}

    /// The descriptor to `poll` beside the thread's own: readable when a job or a ``wake()`` waits.
    public var wakeFD: Int32 { pipe.readFD }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        enum Then { case nothing, write, forward }
        let then = state.withLock { s -> Then in
            guard let owner = s.owner else { return .forward }
            s.jobs.append(job)
            if pthread_equal(owner, pthread_self()) != 0 || s.woken { return .nothing }
            s.woken = true
            return .write
        }
        switch then {
        case .nothing: break
        case .write: pipe.wake()
        case .forward: globalConcurrentExecutor.enqueue(job)
        }
    }

    /// Claims the executor for a thread about to start (which then calls ``attach()``); `false`
    /// when another thread has it.
    public func reserve() -> Bool {
        state.withLock { s in
            guard !s.reserved else { return false }
            s.reserved = true
            return true
        }
    }

    /// Makes the calling thread the one that runs jobs (after ``reserve()``).
    public func attach() {
        state.withLock { s in
            precondition(s.reserved && s.owner == nil, "ThreadExecutor.attach() without reserve()")
            s.owner = pthread_self()
        }
    }

    /// The calling thread stops running jobs: those waiting, and all later ones, go to the global
    /// concurrent executor (until a thread attaches again).
    public func detach() {
        let left = state.withLock { s -> [UnownedJob] in
            guard let owner = s.owner, pthread_equal(owner, pthread_self()) != 0 else { return [] }
            s.owner = nil
            s.reserved = false
            defer { s.jobs = [] }
            return s.jobs
        }
        for job in left { globalConcurrentExecutor.enqueue(job) }
    }

    /// Whether the calling thread is the attached one.
    public var isOwner: Bool {
        state.withLock { s in s.owner.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Whether a thread is attached, and the calling thread is not it.
    public var hasOtherOwner: Bool {
        state.withLock { s in s.owner.map { pthread_equal($0, pthread_self()) == 0 } ?? false }
    }

    /// Whether the current task prefers this executor (`withTaskExecutorPreference`).
    public var isPreferredByCurrentTask: Bool {
        withUnsafeCurrentTask { $0?.unownedTaskExecutor } == asUnownedTaskExecutor()
    }

    /// Wakes the owner's wait without a job (a stop, a setting changed).
    public func wake() {
        signalled.store(true, ordering: .releasing)
        pipe.wake()
    }

    /// Runs the jobs waiting, and those they enqueue, until none is left. Call it on the attached
    /// thread before each wait, and after each wait with `drain` when ``wakeFD`` was readable.
    ///
    /// - Returns: whether a ``wake()`` (not a job) came since the last call.
    @discardableResult
    public func runJobs(drain: Bool = false) -> Bool {
        if drain { pipe.discardPending() }
        var first = true
        while true {
            let jobs = state.withLock { s -> [UnownedJob] in
                if drain && first { s.woken = false }
                guard let owner = s.owner, pthread_equal(owner, pthread_self()) != 0, !s.jobs.isEmpty else { return [] }
                defer { s.jobs.removeAll(keepingCapacity: true) }
                return s.jobs
            }
            first = false
            if jobs.isEmpty { break }
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
        return signalled.exchange(false, ordering: .acquiringAndReleasing)
    }
}
