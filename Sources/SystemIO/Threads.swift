#if canImport(Glibc)
    import Glibc
#endif

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

    /// Empties the pipe without keeping what was in it (no allocation).
    public func discardPending() {
        var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        while withUnsafeMutableBytes(of: &buffer, { read(readFD, $0.baseAddress, $0.count) }) > 0 {}
    }

    /// Reads what is pending: the bytes written since the last drain.
    public func drain() -> [UInt8] {
        readToEnd(readFD, chunk: 64)
    }
}

/// A C error number as text.
public func errnoText(_ e: Int32) -> String { String(cString: strerror(e)) }

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
    let rc = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! Box
            box.body()
            return nil
        }, box)
    precondition(rc == 0, "pthread_create failed: \(errnoText(rc))")
    pthread_detach(thread)
}
