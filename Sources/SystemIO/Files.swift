#if canImport(Glibc)
import Glibc
#endif

/// A file could not be read or written: the system's reason, and the path when known.
public struct FileError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The whole file at `path` (no Foundation).
public func readFile(_ path: String) throws(FileError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(errnoText(errno)) }
    defer { close(fd) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw FileError(errnoText(errno))
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
    guard fd >= 0 else { throw FileError("cannot write \(path): \(errnoText(errno))") }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
        if n < 0 {
            if errno == EINTR { continue }
            let reason = errnoText(errno)
            close(fd)
            throw FileError("cannot write \(path): \(reason)")
        }
        done += n
    }
    close(fd)
    guard rename(temporary, path) == 0 else { throw FileError("cannot write \(path): \(errnoText(errno))") }
}

/// Creates a directory and its parents, mode 0700 (a trail is personal data).
public func makeDirectories(_ path: String) {
    var current = ""
    for part in path.split(separator: "/", omittingEmptySubsequences: false) {
        current += (current.isEmpty && part.isEmpty) ? "/" : (current.hasSuffix("/") || current.isEmpty ? "" : "/") + part
        if !current.isEmpty && current != "/" { mkdir(current, 0o700) }
    }
}
