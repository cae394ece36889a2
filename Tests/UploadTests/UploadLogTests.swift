import Foundation
import KeepTrackTesting
import Logging
import Synchronization
import Testing
import TrackServer
import TrackServerTesting
@testable import Upload

@Suite("Upload logs")
struct UploadLogTests {
    @Test func failuresAreWarningsAndTheRecoveryIsInfoWithTheAttemptsItTook() async throws {
        var faults = Faults()
        faults.failNext = 2
        faults.failStatus = 503
        let endpoint = try await Endpoint.start(faults: faults)
        let (outbox, dir) = try filledOutbox(50)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = Uploader.Configuration(url: endpoint.url("/v1/locations"))
        c.token = "secret"
        (c.initialBackoff, c.maxBackoff, c.maxWait) = (0.01, 0.05, 0)
        let logs = CapturedLogs()
        let u = try Uploader(outbox: outbox, configuration: c, logger: Logger(label: "test", factory: { _ in logs }))
        try await drain(u)
        let lines = logs.lines.withLock { $0 }
        #expect(lines.filter { $0.message == "upload failed" }.map(\.level) == [.warning, .warning])
        let recovered = try #require(lines.first { $0.message == "upload recovered" })
        #expect(recovered.level == .info)
        #expect(recovered.metadata["failed-attempts"] == "2")
        #expect(!lines.contains { "\($0.metadata)".contains("/v1/locations") })  // no URL path in logs
        await u.shutdown()
        await endpoint.stop()
    }
}
