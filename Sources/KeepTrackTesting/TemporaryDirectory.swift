import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under `/tmp` (`mkdtemp`), the one way tests make one.
///
/// ``withTemporaryDirectory(_:_:)`` removes it when its body ends; a fixture that
/// outlives a scope creates one with ``init(_:)`` and calls ``remove()``. Whatever a test forgot
/// is removed when the test process exits.
public struct TemporaryDirectory: Sendable, CustomStringConvertible {
    /// The directory's absolute path.
    public let path: String

    /// Creates `/tmp/PREFIX-XXXXXX`. With `removedAtExit` (the default), the directory is removed
    /// when the process exits if nobody removed it before.
    /// - Throws: ``TemporaryDirectoryError`` when `mkdtemp` fails.
    public init(_ prefix: String = "keeptrack-test", removedAtExit: Bool = true) throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let p = mkdtemp(buffer.baseAddress!) else { return nil }
            return String(cString: p)
        }
        guard let made else { throw TemporaryDirectoryError(prefix: prefix, errno: errno) }
        path = made
        if removedAtExit { Leftovers.shared.add(made) }
    }

    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    public var description: String { path }

    /// Removes the directory and everything in it (nothing if it is already gone).
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
        Leftovers.shared.forget(path)
    }
}

/// A fresh temporary directory's path (each SQLite test gets its own): a ``TemporaryDirectory``,
/// removed at the latest when the test process exits.
public func temporaryDirectory(_ prefix: String = "keeptrack-test") -> String {
    do { return try TemporaryDirectory(prefix).path } catch { preconditionFailure("\(error)") }
}

/// `mkdtemp` failed (a full or read-only `/tmp`).
public struct TemporaryDirectoryError: Error, CustomStringConvertible {
    public var prefix: String
    public var errno: Int32
    public var description: String {
        "cannot create a temporary directory /tmp/\(prefix)-XXXXXX: \(String(cString: strerror(errno)))"
    }
}

/// Runs `body` with a fresh directory's path, and removes the directory when it returns or throws.
public func withTemporaryDirectory<T>(_ prefix: String = "keeptrack-test", _ body: (String) throws -> T) throws -> T {
    let directory = try TemporaryDirectory(prefix)
    defer { directory.remove() }
    return try body(directory.path)
}

/// Runs `body` with a fresh directory's path, and removes the directory when it returns or throws.
public func withTemporaryDirectory<T>(
    _ prefix: String = "keeptrack-test",
    _ body: (String) async throws -> T
) async throws -> T {
    let directory = try TemporaryDirectory(prefix)
    defer { directory.remove() }
    return try await body(directory.path)
}

/// The directories still to remove when the process exits.
private final class Leftovers: @unchecked Sendable {
    static let shared: Leftovers = {
        let leftovers = Leftovers()
        atexit { Leftovers.shared.removeAll() }
        return leftovers
    }()

    private let lock = NSLock()
    private var paths: Set<String> = []

    func add(_ path: String) { lock.withLock { _ = paths.insert(path) } }

    func forget(_ path: String) { lock.withLock { _ = paths.remove(path) } }

    func removeAll() {
        let all = lock.withLock { paths }
        for path in all { try? FileManager.default.removeItem(atPath: path) }
    }
}
