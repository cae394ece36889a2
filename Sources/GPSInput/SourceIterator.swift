import Geo
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The iterator of the thread-backed sources (gpsd, serial): elements arrive through a bounded
/// buffer of ``SourceIterator/bufferSize`` elements; when the consumer falls that far behind, the
/// oldest are dropped, and an ``SourceEvent/Kind/error`` event says how many.
public struct SourceIterator: AsyncIteratorProtocol {
    public typealias Element = SourceElement
    public typealias Failure = Never

    /// Elements kept for a slow consumer.
    public static let bufferSize = 4096

    var base: AsyncStream<SourceElement>.Iterator

    public mutating func next() async -> SourceElement? {
        await base.next()
    }
}

/// What a worker thread shares with its source and consumer.
final class WorkerLink: Sendable {
    let continuation: AsyncStream<SourceElement>.Continuation
    private let stopped = Atomic<Bool>(false)
    private let dropped = Atomic<Int>(0)
    let name: String

    /// Ends a ``pause(_:)`` early: written by ``wake()`` and ``stop()``.
    private let wakePipe = WakePipe()

    init(name: String, continuation: AsyncStream<SourceElement>.Continuation) {
        self.name = name
        self.continuation = continuation
    }

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    func stop() {
        stopped.store(true, ordering: .releasing)
        wake()
    }

    /// Ends the worker's current ``pause(_:)`` (a watch wanted again, a stop).
    func wake() { wakePipe.wake() }

    func yield(_ fix: Fix) {
        send(.fix(fix))
    }

    func yield(_ kind: SourceEvent.Kind, _ message: String) {
        send(.event(SourceEvent(kind, source: name, message: message)))
    }

    private func send(_ element: SourceElement) {
        if case .dropped = continuation.yield(element) {
            let n = dropped.add(1, ordering: .relaxed).newValue
            if n == 1 || n % 1000 == 0 {
                continuation.yield(.event(SourceEvent(
                    .error, source: name, message: "the consumer is too slow: \(n) elements dropped so far")))
            }
        }
    }

    func finish() { continuation.finish() }

    /// Sleeps up to `seconds` in `poll`, waking early on ``wake()`` or ``stop()`` (no polling
    /// loop: a released gpsd watch costs no wake-ups). Returns `false` when stopped.
    @discardableResult
    func pause(_ seconds: Double) -> Bool {
        if isStopped { return false }
        var fds = [pollfd(fd: wakePipe.readFD, events: Int16(POLLIN), revents: 0)]
        let timeout = Int32(min(max(0, seconds * 1000).rounded(.up), Double(Int32.max)))
        if poll(&fds, 1, timeout) > 0 { _ = wakePipe.drain() }
        return !isStopped
    }

    /// Starts `body` on a dedicated thread (blocking I/O never runs on the cooperative pool) and
    /// returns the iterator the consumer reads.
    static func start(name: String, threadName: String, onLink: (WorkerLink) -> Void = { _ in },
                      _ body: @escaping @Sendable (WorkerLink) -> Void) -> SourceIterator
    {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SourceElement.self, bufferingPolicy: .bufferingNewest(SourceIterator.bufferSize))
        let link = WorkerLink(name: name, continuation: continuation)
        onLink(link)
        continuation.onTermination = { _ in link.stop() }
        startThread(name: threadName) {
            body(link)
            link.finish()
        }
        return SourceIterator(base: stream.makeAsyncIterator())
    }
}


/// A non-blocking, close-on-exec pipe that wakes a thread sleeping in `poll` on ``readFD``: the
/// way to interrupt a wait without a polling loop.
public final class WakePipe: Sendable {
    public let readFD: Int32
    public let writeFD: Int32

    public init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed: \(errnoText(errno))")
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    /// Wakes the sleeper with `byte` (one non-blocking `write`).
    public func wake(_ byte: UInt8 = 1) {
        var b = byte
        _ = write(writeFD, &b, 1)
    }

    /// Reads what is pending: the bytes written since the last drain.
    public func drain() -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let n = read(readFD, &buffer, buffer.count)
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }
}

/// Monotonic seconds.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A C error number as text.
func errnoText(_ e: Int32) -> String { String(cString: strerror(e)) }

/// Starts a detached POSIX thread (no Foundation: it would add ~6 MB of resident memory to a
/// process that otherwise needs none of it).
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        let name: String
        init(_ body: @escaping @Sendable () -> Void, name: String) {
            self.body = body
            self.name = name
        }
    }
    let box = Unmanaged.passRetained(Box(body, name: name)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { raw in
        let box = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! Box
        box.body()
        return nil
    }, box)
    precondition(rc == 0, "pthread_create failed: \(errnoText(rc))")
    pthread_detach(thread)
}
