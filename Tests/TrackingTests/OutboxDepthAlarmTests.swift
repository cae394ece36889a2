import Testing

@testable import Tracking

@Suite("Outbox depth warnings")
struct OutboxDepthAlarmTests {
    @Test func levelsAreATenthHalfAndNineTenthsOfTheCap() {
        #expect(OutboxDepthAlarm(cap: 1_000_000).levels == [100_000, 500_000, 900_000])
        #expect(OutboxDepthAlarm(cap: 5).levels == [2, 4])
        #expect(OutboxDepthAlarm(cap: 0).levels == [])
    }

    /// Depths observed in turn, and the level each one warns about (nil: no warning).
    @Test(
        arguments: [
            ([50, 99, 100, 101, 499], [nil, nil, 100, nil, nil]),
            ([600], [500]),  // two levels at once: one warning, the higher
            ([100, 60, 100], [100, nil, nil]),  // not below half the level: no new warning
            ([100, 49, 100], [100, nil, 100]),  // drained below half: warns again
            ([950, 300, 950, 10, 950], [900, nil, 900, nil, 900]),
        ] as [([Int], [Int?])])
    func warnsOnceALevelUntilItDrainsBelowHalfOfIt(depths: [Int], warnings: [Int?]) {
        var alarm = OutboxDepthAlarm(cap: 1000)
        #expect(depths.map { alarm.observe($0) } == warnings)
    }
}
