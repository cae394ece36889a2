import KeepTrackTesting
import Testing

@testable import TrackStorePostgres

/// The catch-up's schedule (``StoredStopsCatchUp``): storing comes first. No database: the runs are
/// recorded, and the batches being stored are told as the store tells them.
@Suite("PostgreSQL store: the catch-up gives way to storing")
struct StoredStopsCatchUpTests {
    /// The runs a catch-up made, each with its devices.
    actor Runs {
        var devices: [Set<String>] = []
        func add(_ d: Set<String>) { devices.append(d) }
    }

    static func catchUp(gatherLimit: Int = StoredStopsCatchUp.gatherLimit) async -> (StoredStopsCatchUp, Runs) {
        let catchUp = StoredStopsCatchUp(gatherLimit: gatherLimit)
        let runs = Runs()
        await catchUp.attach { devices in await runs.add(devices) }
        return (catchUp, runs)
    }

    /// A burst: the devices of batches stored while others are being stored wait, and are run in
    /// one run once no batch is being stored (one at a time, they would be run as each is noted).
    @Test func aBurstIsRunOnceWhenStoringPauses() async throws {
        let (catchUp, runs) = await Self.catchUp()
        try await withTimeout(60, "the catch-up's runs") {
            for _ in 0..<3 { await catchUp.storingBegan() }
            await catchUp.storingEnded(noting: ["a"])
            await catchUp.runWaits()
            await catchUp.storingEnded(noting: ["b"])
            await catchUp.storingBegan()
            await catchUp.storingEnded(noting: ["c", "a"])
            #expect(await runs.devices.isEmpty, "a run started while batches were being stored")
            await catchUp.storingEnded(noting: ["d"])
            await catchUp.settled()
            #expect(await runs.devices == [["a", "b", "c", "d"]])
        }
    }

    /// A load that never pauses (one batch held open throughout): a waiting run starts once
    /// `gatherLimit` batches have been stored since it began to wait, not one before.
    @Test func aLoadThatNeverPausesIsRunEveryGatherLimitBatches() async throws {
        let (catchUp, runs) = await Self.catchUp(gatherLimit: 3)
        try await withTimeout(60, "the catch-up's runs") {
            await catchUp.storingBegan()
            await catchUp.storingBegan()
            await catchUp.storingEnded(noting: ["a"])
            await catchUp.runWaits()
            for device in ["b", "c"] {
                await catchUp.storingBegan()
                await catchUp.storingEnded(noting: [device])
            }
            #expect(await runs.devices.isEmpty, "a run started before 3 batches were stored")
            await catchUp.storingBegan()
            await catchUp.storingEnded(noting: ["d"])
            await catchUp.settled()
            #expect(await runs.devices == [["a", "b", "c", "d"]])
            // The held batch ends, a failure: nothing more to run.
            await catchUp.storingEnded(noting: [])
            await catchUp.settled()
            #expect(await runs.devices.count == 1)
        }
    }

    /// Closing the store wakes a run waiting for storing to pause, and runs nothing.
    @Test func closingWakesAWaitingRunAndRunsNothing() async throws {
        let (catchUp, runs) = await Self.catchUp()
        try await withTimeout(60, "the catch-up's runs") {
            await catchUp.storingBegan()
            await catchUp.storingBegan()
            await catchUp.storingEnded(noting: ["a"])
            await catchUp.runWaits()
            await catchUp.cancel()
            await catchUp.settled()
            #expect(await runs.devices.isEmpty)
        }
    }
}
