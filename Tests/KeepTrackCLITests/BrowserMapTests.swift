import Foundation
import KeepTrackTesting
import Testing

/// Issue 28, item 4: the map page in a real browser. `tools/browser-check` starts the built
/// `keeptrack serve --tiles none` and drives Debian's chromium with Playwright for Python (what
/// `tools/setup` installs): no console error and no request off loopback, each device listed,
/// a posted point moving its marker without a reload, a chosen range drawing the trail, a device
/// token's page showing its device only. The tool's JSON line and errors are the failure message.
@Suite("The map page in Chromium (tools/browser-check)", .offThePool)
struct BrowserMapTests {
    @Test func theMapPagePassesItsBrowserChecks() async throws {
        let binary = productsDirectory.appendingPathComponent("keeptrack").path
        let (status, output) = try await offThePool { () -> (Int32, String) in
            let process = Process()
            process.executableURL = packageRoot.appendingPathComponent("tools/browser-check")
            process.arguments = ["--binary", binary]
            process.currentDirectoryURL = packageRoot
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(status == 0, "tools/browser-check: \(output.suffix(4000))")
        #expect(output.contains("\"failures\": []"), "\(output.suffix(4000))")
    }
}
