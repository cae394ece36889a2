import Foundation
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// `keeptrack export` of a large trail reports its progress (issue 14, item 6): read in pages, and
/// the same file either way.
@Suite("Export progress")
struct ExportProgressTests {
    @Test func aPagedExportReportsEachPageAndWritesTheSameFile() async throws {
        let dir = try TemporaryDirectory("kt-export").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteTrackStore(path: dir + "/endpoint.sqlite")
        let records = numbered(walk(2_500, device: "van"))
        _ = try await store.insert(records, format: "json", received: 0)
        for format in ["gpx", "geojson", "svg"] {
            var reports: [[Int]] = []
            let paged = try await store.export(
                device: nil, format: format, progress: { reports.append([$0, $1]) },
                pageSize: 1_000)
            let whole = try await store.export(device: nil, format: format)
            #expect(paged.bytes == whole.bytes, "\(format)")
            #expect(paged.points == 2_500)
            #expect(reports == [[1_000, 2_500], [2_000, 2_500], [2_500, 2_500]], "\(format)")
        }
    }
}
