import Foundation
import GPSInput
import KeepTrackTesting
import Testing

@testable import SystemIO
@testable import Tracking

#if canImport(Glibc)
    import Glibc
#endif

/// Giving back the clean pages start-up touched: `CleanPages` on mappings of a real file in this
/// process (read back through `/proc/self/smaps`), and when `track` and the tracker call it.
/// Serialized: a release in one test would release the mapping another one is measuring.
@Suite("clean pages", .serialized)
struct CleanPagesTests {
    @Test func unmapsAReadOnlyFileMappingAndItsBytesComeBackFromTheFile() throws {
        let file = try MappedTestFile()
        #expect(file.mapping?.rssKB == file.size / 1024)
        #expect(file.mapping?.isReleasable == true)

        #expect(CleanPages.release() >= file.size)
        #expect(file.mapping?.rssKB == 0)
        // Read again: the same bytes, mapped again from the file.
        #expect(file.bytesAreTheFiles())
        #expect(file.mapping?.rssKB == file.size / 1024)
    }

    @Test func keepsAMappingWithAPageWrittenByThisProcess() throws {
        let file = try MappedTestFile(writtenPage: 1)
        let before = try #require(file.mapping)
        #expect(before.permissions == "r--p")
        #expect(before.anonymousKB == 4)
        #expect(!before.isReleasable)

        CleanPages.release()
        #expect(file.base.load(fromByteOffset: 4096, as: UInt8.self) == 0xEE)
        #expect(file.mapping?.rssKB == before.rssKB)
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
        #expect(
            mappings.first
                == CleanPages.Mapping(
                    start: 0x400000, end: 0x452000, permissions: "r-xp",
                    path: "/usr/bin/a b", rssKB: 200, anonymousKB: 0))
        #expect(mappings.first?.isReleasable == true)
        #expect(mappings.last?.path == "")
        #expect(mappings.last?.isReleasable == false)
    }

    /// `keeptrack track` without location options: the walk pumped as JSON Lines into /dev/null;
    /// returns what the mapped file kept resident.
    func pumped(releasing: Bool, file: MappedTestFile) async throws -> Int? {
        let null = open("/dev/null", O_WRONLY)
        defer { close(null) }
        var lines = SourceLines()
        lines.out = OutputBuffer(fd: null)
        lines.releasesStartupPages = releasing
        try await lines.pump(NMEALogSource(options: .init(path: fixturePath("walk-15min.nmea"))))
        return file.mapping?.rssKB
    }

    @Test func sourceLinesGiveThemBackOnceTheFirstPositionIsWrittenWhenAsked() async throws {
        let kept = try MappedTestFile()
        #expect(try await pumped(releasing: false, file: kept) == kept.size / 1024)
        let released = try MappedTestFile()
        #expect(try await pumped(releasing: true, file: released) == 0)
    }

    @Test func theTrackerGivesThemBackAtTheFirstLocationAndAtEverySuspension() async throws {
        let (dir, log) = try commuteLog()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sink = CleanPagesSink(Collected())
        try await trackInTheBackground(log, sink: sink)
        let suspensions = sink.base.transitions.filter { $0.to == .suspended }.count
        let locations = sink.base.locations.filter { if case .significantChange = $0 { true } else { false } }.count
        #expect(suspensions == 8)
        #expect(locations > 0)
        let releases = sink.releases.withLock { $0 }
        #expect(releases.count == 1 + suspensions)
        // This test process's own code and shared libraries, and the log's pages, at least.
        #expect(releases.bytes > 0)
    }
}
