import Foundation
import KeepTrackTesting
import Testing

/// Blocking work kept off Swift's cooperative pool: where each way of running it runs, and the
/// blocking helpers' refusal to run on the pool.
@Suite("Test support: blocking work off the cooperative pool")
struct OffThePoolTests {
    @Test func anAsyncTestRunsOnThePool() {
        #expect(isOnTheCooperativePool)
    }

    @Test(.offThePool) func aSynchronousTestWithTheTraitRunsOffThePool() {
        #expect(!isOnTheCooperativePool)
    }

    @Test(.offThePool) func anAsyncTestWithTheTraitStaysOffThePoolAcrossSuspensions() async throws {
        #expect(!isOnTheCooperativePool)
        await Task.yield()
        try await Task.sleep(for: .milliseconds(1))  // a suspension, not a synchronisation
        #expect(!isOnTheCooperativePool)
        async let child = { isOnTheCooperativePool }()
        #expect(await !child, "a child task prefers the same executor")
    }

    @Test func aThreadOfItsOwnIsOffThePool() async throws {
        #expect(try await offThePool { isOnTheCooperativePool } == false)
    }

    @Test func aBlockingHelperOnThePoolFailsTheTest() async throws {
        let tool = try Tool(executable: URL(fileURLWithPath: "/bin/echo"), ["hello"])
        withKnownIssue("read on the pool") {
            _ = tool.readLine()
        } matching: { issue in
            issue.description.contains("Tool.readLine() blocks a thread of Swift's cooperative pool")
        }
        #expect(try await tool.line() == nil)
    }

    @Test(.offThePool) func aBlockingHelperOffThePoolSaysNothing() throws {
        let r = try runCommand(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "cat; echo err >&2; exit 3"], stdin: Data("in".utf8))
        #expect(r.status == 3)
        #expect(r.output == "in")
        #expect(r.errors == "err\n")
    }
}
