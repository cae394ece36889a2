import KeepTrackTesting
import Testing

@testable import SystemIO

#if canImport(Glibc)
import Glibc
#endif

/// `CleanPages` on mappings of a real file in this process, read back through `/proc/self/smaps`.
@Suite("clean pages")
struct CleanPagesTests {
    static let size = 16 * 4096

    /// A temporary file of `size` bytes, byte `i` = `i % 251`.
    func patternFile() throws -> (path: String, fd: Int32) {
        var template = Array("/tmp/keeptrack-pages-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let bytes = (0..<Self.size).map { UInt8($0 % 251) }
        try #require(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == Self.size)
        return (path, fd)
    }

    func mapping(at address: UnsafeMutableRawPointer) throws -> CleanPages.Mapping {
        let start = UInt(bitPattern: address)
        return try #require(CleanPages.parse(try readFile("/proc/self/smaps")).first { $0.start == start })
    }

    @Test func unmapsAReadOnlyFileMappingAndItsBytesComeBackFromTheFile() throws {
        let (path, fd) = try patternFile()
        defer { close(fd); unlink(path) }
        let base = try #require(mmap(nil, Self.size, PROT_READ, MAP_PRIVATE, fd, 0))
        try #require(base != MAP_FAILED)
        defer { munmap(base, Self.size) }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var sum = 0
        for i in stride(from: 0, to: Self.size, by: 4096) { sum += Int(bytes[i]) }
        #expect(sum > 0)
        #expect(try mapping(at: base).rssKB == Self.size / 1024)
        #expect(try mapping(at: base).isReleasable)

        #expect(CleanPages.release() >= Self.size)
        #expect(try mapping(at: base).rssKB == 0)
        // Read again: the same bytes, mapped again from the file.
        #expect((0..<Self.size).allSatisfy { bytes[$0] == UInt8($0 % 251) })
        #expect(try mapping(at: base).rssKB == Self.size / 1024)
    }

    @Test func keepsAMappingWithAPageWrittenByThisProcess() throws {
        let (path, fd) = try patternFile()
        defer { close(fd); unlink(path) }
        let base = try #require(mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        try #require(base != MAP_FAILED)
        defer { munmap(base, Self.size) }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        // Written, then read-only, as the loader does to relocated data: "r--p" with a page of its
        // own, whose bytes are no longer the file's.
        bytes[4096] = 0xEE
        try #require(mprotect(base, Self.size, PROT_READ) == 0)
        let before = try mapping(at: base)
        #expect(before.permissions == "r--p")
        #expect(before.anonymousKB == 4)
        #expect(!before.isReleasable)

        CleanPages.release()
        #expect(bytes[4096] == 0xEE)
        #expect(try mapping(at: base).rssKB == before.rssKB)
    }

    @Test func readsMappingsWithAndWithoutAPath() {
        let text = """
            00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/a b
            Size:                328 kB
            Rss:                 200 kB
            Anonymous:             0 kB
            VmFlags: rd ex mr mw me dw
            7ffd1000-7ffd3000 rw-p 00000000 00:00 0
            Rss:                   8 kB
            Anonymous:             8 kB

            """
        let mappings = CleanPages.parse(Array(text.utf8))
        #expect(mappings.count == 2)
        #expect(mappings.first == CleanPages.Mapping(start: 0x400000, end: 0x452000, permissions: "r-xp",
                                                     path: "/usr/bin/a b", rssKB: 200, anonymousKB: 0))
        #expect(mappings.first?.isReleasable == true)
        #expect(mappings.last?.path == "")
        #expect(mappings.last?.isReleasable == false)
    }
}
