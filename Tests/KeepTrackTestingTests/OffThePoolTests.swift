import Foundation
import KeepTrackTesting
import Synchronization
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

    @Test func aCallerBeyondTheSlotsWaitsUntilOneIsGivenBack() async {
        let slots = TestSlots(count: 2)
        await slots.acquire()
        await slots.acquire()
        let third = Task {
            await slots.acquire()
            return true
        }
        while slots.waiting == 0 { await Task.yield() }
        #expect(slots.available == 0)
        slots.release()
        #expect(await third.value)
        #expect(slots.waiting == 0 && slots.available == 0)
    }

    @Test func waitersAreServedInArrivalOrder() async {
        let slots = TestSlots(count: 1)
        await slots.acquire()
        final class Order: Sendable { let list = Mutex<[Int]>([]) }
        let order = Order()
        var tasks: [Task<Void, Never>] = []
        for n in 1...3 {
            tasks.append(
                Task {
                    await slots.acquire()
                    order.list.withLock { $0.append(n) }
                    slots.release()
                })
            while slots.waiting < n { await Task.yield() }
        }
        slots.release()
        for t in tasks { await t.value }
        #expect(order.list.withLock { $0 } == [1, 2, 3])
        #expect(slots.available == 1)
    }

    @Test(.offThePool) func aTestWithTheTraitHoldsASlotWhileItRuns() {
        #expect(OffThePool.holdsSlot)
        #expect(TestSlots.shared.available < TestSlots.shared.count, "this test holds one")
    }

    @Test(.offThePool, .timeLimit(.minutes(1))) func aTestWithATimeLimitIsNotQueued() {
        #expect(!OffThePool.holdsSlot)
        #expect(!isOnTheCooperativePool)
    }
}
