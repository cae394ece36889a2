import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A port on 127.0.0.1 that nobody listens on, kept bound by this process until ``release()``, so
/// that no other program can take it meanwhile: connecting to it is refused.
///
/// A server of our own binds port 0 and reports the port it got; a program that takes its port on
/// its command line (mosquitto, postgres, gpsd) starts on ``LoopbackPorts/candidate()`` and tries
/// another when the port was taken (``LoopbackPorts/retrying(port:attempts:_:)``).
public final class ReservedPort: @unchecked Sendable, CustomStringConvertible {
    /// The port number.
    public let number: Int
    private let lock = NSLock()
    private var descriptor: Int32

    /// Binds a socket to 127.0.0.1 on a port the kernel picks, without listening on it.
    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PortError(code: .socket, errno: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, length) == 0 ? getsockname(fd, p, &length) : -1
            }
        }
        guard status == 0 else {
            let code = errno
            close(fd)
            throw PortError(code: .bind, errno: code)
        }
        descriptor = fd
        number = Int(UInt16(bigEndian: address.sin_port))
    }

    public var description: String { String(number) }

    /// Closes the socket: from now on another program can bind the port (a gpsd a test starts there).
    public func release() {
        lock.withLock {
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }

    deinit { release() }
}

/// Why a port could not be reserved, or a program could not get one.
public struct PortError: Error, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// `socket()` failed.
        public static let socket = Code(rawValue: "socket")
        /// `bind()` failed.
        public static let bind = Code(rawValue: "bind")
        /// The program found its port taken (EADDRINUSE), on every port tried.
        public static let inUse = Code(rawValue: "in use")
    }

    public var code: Code
    public var errno: Int32 = 0
    /// The ports tried, for ``Code/inUse``.
    public var ports: [Int] = []
    /// What the program said the last time.
    public var underlying: (any Error)?

    public var description: String {
        switch code {
        case .inUse:
            "every port tried was already in use (\(ports.map(String.init).joined(separator: ", ")))"
                + (underlying.map { ": \($0)" } ?? "")
        default: "\(code.rawValue) on 127.0.0.1 failed: \(String(cString: strerror(errno)))"
        }
    }
}

/// Candidate ports for programs that take theirs on the command line.
///
/// Each test process draws from a block of its own (chosen by its pid) below the kernel's
/// ephemeral range (32768 and up, where port 0 binds and outgoing connections land), so that
/// parallel test processes rarely collide; ``retrying(port:attempts:_:)`` makes a collision harmless.
public enum LoopbackPorts {
    static let first = 20_000
    static let blockSize = 64
    static let blocks = (32_768 - first) / blockSize
    private static let lock = NSLock()
    nonisolated(unsafe) private static var drawn = 0

    /// The next port of this process's block that nobody has bound at this instant (not a
    /// guarantee: start the program with ``retrying(port:attempts:_:)``).
    public static func candidate() -> Int {
        for _ in 0..<(blocks * blockSize) {
            let n = lock.withLock {
                drawn += 1
                return drawn
            }
            let block = (Int(getpid()) + n / blockSize) % blocks
            let port = first + block * blockSize + n % blockSize
            if isFree(port) { return port }
        }
        return first
    }

    /// Whether 127.0.0.1:`port` can be bound right now.
    static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Signals from a `start` closure of ``retrying(port:attempts:_:)`` that its program found its
    /// port taken ("Address already in use" in its log).
    public struct AddressInUse: Error, CustomStringConvertible {
        public var port: Int
        /// What the program said.
        public var said: String
        public init(port: Int, said: String) {
            self.port = port
            self.said = said
        }
        public var description: String { "port \(port): \(said)" }
    }

    /// Runs `start` on `port` if given (once: a fixed port can't change), else on candidates until
    /// one is not taken: `start` throws ``AddressInUse`` to ask for another port.
    /// - Throws: ``PortError`` with ``PortError/Code/inUse`` after `attempts`, or what `start` threw.
    public static func retrying<T>(port: Int?, attempts: Int = 10, _ start: (Int) throws -> T) throws -> T {
        if let port { return try start(port) }
        var tried: [Int] = []
        var last: AddressInUse?
        for _ in 0..<attempts {
            let candidate = candidate()
            tried.append(candidate)
            do {
                return try start(candidate)
            } catch let error as AddressInUse {
                last = error
            }
        }
        throw PortError(code: .inUse, ports: tried, underlying: last)
    }
}

/// A program a test needs is not installed: says which Debian package to install.
public struct MissingTool: Error, CustomStringConvertible {
    /// The path that was looked for.
    public var executable: String
    /// The Debian packages that install it (`apt-get install` them, or run `tools/setup`).
    public var packages: String

    public init(executable: String, packages: String) {
        self.executable = executable
        self.packages = packages
    }

    public var description: String {
        "\(executable) is not installed: install the Debian package \(packages) "
            + "(apt-get install \(packages)), or run tools/setup, which installs everything the tests need"
    }

    /// Throws ``MissingTool`` unless `executable` is there and executable.
    public static func check(_ executable: String, packages: String) throws {
        guard access(executable, X_OK) == 0 else { throw MissingTool(executable: executable, packages: packages) }
    }
}
