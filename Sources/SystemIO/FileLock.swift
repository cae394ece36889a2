#if canImport(Glibc)
    import Glibc
#endif

/// An exclusive advisory lock on a file (`flock`), held while this value lives: closed by
/// ``release()``, by `deinit`, or by the kernel when the process ends (a kill -9 included), so a
/// crash never leaves it taken. The holder's process id is written in the file for whoever finds
/// it taken.
public final class FileLock: Sendable {
    /// What trying to take the lock came to.
    public enum Outcome: Sendable {
        /// Taken: the lock is held until the value is released or dropped.
        case acquired(FileLock)
        /// Another open of the file holds it; the process id it wrote, when one could be read.
        case held(by: Int32?)
    }

    private let descriptor: Int32
    public let path: String

    private init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// Takes the lock on `path` (created, mode 0600, when absent) without waiting.
    /// - Throws: ``FileError`` (``FileError/Code/lock``) when the file can't be opened or locked for
    ///   another reason than another holder.
    public static func tryExclusive(_ path: String) throws(FileError) -> Outcome {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError(.lock, path: path, errno: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            defer { close(fd) }
            guard reason == EWOULDBLOCK else { throw FileError(.lock, path: path, errno: reason) }
            let text = String(decoding: readToEnd(fd, chunk: 32), as: UTF8.self)
            return .held(by: Int32(text.split(separator: "\n").first ?? ""))
        }
        // Who holds it, for a second process's message (best effort: the lock is what counts).
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) == 0 { _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
        return .acquired(FileLock(descriptor: fd, path: path))
    }

    deinit { close(descriptor) }
}
