import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The address of the Unix socket at `path`, or `nil` when the path is too long for one.
public func unixAddress(_ path: String) -> sockaddr_un? {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    return address
}

/// One-line requests on a Unix socket, each answered and closed, served by a thread of the
/// server's own that sleeps in `poll` until a request or a wake (no polling loop).
public final class LineServer: Sendable {
    public let path: String
    let listener: Int32
    /// Bytes written here reach `onWake` on the server's thread (a signal handler may write them).
    public let wakePipe = WakePipe()
    let stopped = Atomic<Bool>(false)

    /// Binds and listens at `path` (mode 0600; a socket file nobody answers on is replaced).
    public init(path: String) throws(FileError) {
        self.path = path
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !parent.isEmpty { mkdir(parent, 0o700) }
        guard var address = unixAddress(path) else { throw FileError(.socketPathTooLong, path: path) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FileError(.socket, path: path, errno: errno) }
        if LineClient.connect(path) == nil { unlink(path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            let e = errno
            close(fd)
            throw FileError(.listen, path: path, errno: e)
        }
        chmod(path, 0o600)
        listener = fd
    }

    /// Starts the thread: each request line goes to `handler`, whose answer is sent back with a
    /// newline; wake bytes go to `onWake`. `finished` runs when ``stop()`` ended the thread.
    public func start(
        handler: @escaping @Sendable (String) -> String, onWake: @escaping @Sendable (UInt8) -> Void,
        finished: @escaping @Sendable () -> Void
    ) {
        startThread(name: "keeptrack.control") { [self] in
            while !stopped.load(ordering: .acquiring) {
                var fds = [
                    pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wakePipe.readFD, events: Int16(POLLIN), revents: 0),
                ]
                if poll(&fds, 2, -1) < 0 && errno != EINTR { break }
                if stopped.load(ordering: .acquiring) { break }
                if fds[1].revents & Int16(POLLIN) != 0 { wakePipe.drain().forEach(onWake) }
                if fds[0].revents & Int16(POLLIN) != 0 { serveOne(handler) }
            }
            close(listener)
            unlink(path)
            finished()
        }
    }

    /// Ends the thread (it closes the socket and removes its file).
    public func stop() {
        stopped.store(true, ordering: .releasing)
        wakePipe.wake(0)
    }

    private func serveOne(_ handler: (String) -> String) {
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        defer { close(client) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while !request.contains(UInt8(ascii: "\n")) && request.count < 1024 {
            let n = read(client, &buffer, buffer.count)
            if n <= 0 { break }
            request += buffer[0..<n]
        }
        var line = request.prefix { $0 != UInt8(ascii: "\n") }
        while let l = line.last, l == 0x20 || l == 0x0D || l == 0x09 { line.removeLast() }
        while let f = line.first, f == 0x20 || f == 0x09 { line.removeFirst() }
        let bytes = Array((handler(String(decoding: line, as: UTF8.self)) + "\n").utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { send(client, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            done += n
        }
    }
}

/// The client side of a ``LineServer``.
public enum LineClient {
    /// A connected socket, or `nil` with errno set.
    public static func connect(_ path: String) -> Int32? {
        guard var address = unixAddress(path) else { return nil }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let r = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if r != 0 {
            let e = errno
            close(fd)
            errno = e
            return nil
        }
        return fd
    }

    /// Sends `line` and returns the whole answer.
    ///
    /// - Throws: ``FileError`` with the system's reason when nobody answers at `path`.
    public static func request(_ line: String, at path: String) throws(FileError) -> String {
        guard let fd = connect(path) else { throw FileError(.connect, path: path, errno: errno) }
        defer { close(fd) }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return String(decoding: readToEnd(fd, chunk: 4096), as: UTF8.self)
    }
}
