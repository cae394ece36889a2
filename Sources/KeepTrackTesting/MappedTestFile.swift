import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary file mapped private and read-only into this process with every page read once
/// (byte `i` is `i % 251`): what ``CleanPages`` gives back. With `writtenPage`, that page was
/// written before the mapping became read-only, as the loader does to the data it relocates.
public final class MappedTestFile {
    public let size: Int
    public let base: UnsafeMutableRawPointer
    let path: String
    let fd: Int32

    public init(pages: Int = 16, writtenPage: Int? = nil) throws {
        let size = pages * 4096
        self.size = size
        var template = Array("/tmp/keeptrack-pages-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else { throw TimedOut(what: "a temporary file (\(errno))") }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        (self.fd, self.path) = (fd, path)
        let bytes = (0..<size).map { UInt8($0 % 251) }
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let protection = writtenPage == nil ? PROT_READ : PROT_READ | PROT_WRITE
        guard let base = mmap(nil, size, protection, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw TimedOut(what: "mmap of \(path) (\(errno))")
        }
        self.base = base
        if let writtenPage {
            base.storeBytes(of: 0xEE, toByteOffset: writtenPage * 4096, as: UInt8.self)
            mprotect(base, size, PROT_READ)
        }
        _ = bytesAreTheFiles()
    }

    deinit {
        munmap(base, size)
        close(fd)
        unlink(path)
    }

    /// The mapping as `/proc/self/smaps` shows it now.
    public var mapping: CleanPages.Mapping? {
        CleanPages.mappings().first { $0.start == UInt(bitPattern: base) }
    }

    /// Reads every byte: whether each is the file's (a written page's first byte is 0xEE).
    public func bytesAreTheFiles() -> Bool {
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        return (0..<size).allSatisfy { bytes[$0] == UInt8($0 % 251) }
    }
}
