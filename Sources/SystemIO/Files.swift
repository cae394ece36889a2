#if canImport(Glibc)
    import Glibc
#endif

/// SystemIO's error: a file or a Unix socket could not be used. What failed (``code``), where
/// (``path``) and the system's reason (``errno``).
public struct FileError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A file could not be opened or read.
        public static let read = Code(rawValue: "read")
        /// A file could not be written or renamed into place.
        public static let write = Code(rawValue: "write")
        /// The path is longer than a Unix socket address holds.
        public static let socketPathTooLong = Code(rawValue: "socket-path-too-long")
        /// No Unix socket could be created.
        public static let socket = Code(rawValue: "socket")
        /// The socket could not be bound or listened on (`EADDRINUSE`: another process serves it).
        public static let listen = Code(rawValue: "listen")
        /// Nobody answers at the socket's path.
        public static let connect = Code(rawValue: "connect")
        /// A lock file can't be opened or locked (``FileLock``).
        public static let lock = Code(rawValue: "lock")
    }

    public var code: Code
    /// The file or socket's path, when known.
    public var path: String?
    /// The system's error number, when the system said why.
    public var errno: Int32?

    public init(_ code: Code, path: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.path = path
        self.errno = errno
    }

    /// The system's reason (`No such file or directory`), or the code when there is none.
    public var reason: String { errno.map(errnoText) ?? code.rawValue }

    public var description: String {
        switch code {
        case .write: "cannot write \(path ?? "a file"): \(reason)"
        case .socketPathTooLong: "the path is too long for a Unix socket: \(path ?? "")"
        case .socket: "cannot create a Unix socket: \(reason)"
        case .lock: "cannot lock \(path ?? "a file"): \(reason)"
        case .listen:
            "cannot listen on \(path ?? "a Unix socket"): \(reason)"
                + (errno == EADDRINUSE ? " (is another process serving it?)" : "")
        default: reason
        }
    }
}

/// The whole file at `path` (no Foundation).
public func readFile(_ path: String) throws(FileError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(.read, path: path, errno: errno) }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw FileError(.read, path: path, errno: errno)
        }
        if n == 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return out
}

/// Writes `bytes` to `path` through a temporary file and a rename (never half a file), mode 0600.
public func writeFile(_ path: String, _ bytes: [UInt8]) throws(FileError) {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw FileError(.write, path: path, errno: errno) }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
        if n < 0 {
            if errno == EINTR { continue }
            let e = errno
            close(fd)
            throw FileError(.write, path: path, errno: e)
        }
        done += n
    }
    close(fd)
    guard rename(temporary, path) == 0 else { throw FileError(.write, path: path, errno: errno) }
}

/// The bytes of `fd` up to its end (or, when it does not block, up to what is pending), read
/// `chunk` bytes at a time.
func readToEnd(_ fd: Int32, chunk: Int) -> [UInt8] {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: chunk)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 { break }
        out += buffer[0..<n]
    }
    return out
}

/// Creates a directory and its parents, mode 0700 by default (a trail is personal data).
public func makeDirectories(_ path: String, mode: mode_t = 0o700) {
    var current = ""
    for part in path.split(separator: "/", omittingEmptySubsequences: false) {
        current +=
            (current.isEmpty && part.isEmpty) ? "/" : (current.hasSuffix("/") || current.isEmpty ? "" : "/") + part
        if !current.isEmpty && current != "/" { mkdir(current, mode) }
    }
}
