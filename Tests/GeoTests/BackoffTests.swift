import Testing

import Geo

/// A generator that always answers the same number: 1 is the jitter's lowest draw (0 would make the
/// standard library's bounded draw reject it and ask again, forever).
struct ConstantRandom: RandomNumberGenerator {
    var value: UInt64
    mutating func next() -> UInt64 { value }
}

@Suite struct BackoffTests {
    /// The ceiling doubles from the first wait up to the maximum; anything below 1 counts as 1.
    @Test(
        arguments: [
            (0, 1.0), (1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (11, 300.0), (64, 300.0), (Int.max, 300.0),
        ] as [(Int, Double)])
    func ceilingDoublesUpToTheMaximum(failures: Int, ceiling: Double) {
        #expect(Backoff(initial: 1, maximum: 300).ceiling(failures: failures) == ceiling)
    }

    /// Full jitter over the upper half: the lowest draw waits half the ceiling.
    @Test(arguments: [(1, 0.5), (2, 1.0), (3, 2.0), (20, 150.0)] as [(Int, Double)])
    func theLowestDrawWaitsHalfTheCeiling(failures: Int, wait: Double) {
        var lowest = ConstantRandom(value: 1)
        #expect(Backoff(initial: 1, maximum: 300).delay(failures: failures, using: &lowest) == wait)
    }

    /// Every wait lies between half the ceiling and the ceiling, and a seed gives the same waits again.
    @Test func seededWaitsRepeatAndStayWithinTheCeiling() {
        let backoff = Backoff(initial: 0.5, maximum: 30)
        func waits(seed: UInt64) -> [Double] {
            var random = SeededRandom(seed: seed)
            return (1...200).map { backoff.delay(failures: $0 % 12, using: &random) }
        }
        let first = waits(seed: 7)
        #expect(first == waits(seed: 7))
        #expect(first != waits(seed: 8))
        for (i, wait) in first.enumerated() {
            let ceiling = backoff.ceiling(failures: (i + 1) % 12)
            #expect(wait >= ceiling / 2 && wait <= ceiling)
        }
        // Jittered: not every wait at one ceiling is the same.
        #expect(Set(first).count > 100)
    }

    /// A maximum below the first wait caps every wait.
    @Test func aMaximumBelowTheFirstWaitCapsIt() {
        var random = SeededRandom(seed: 1)
        for n in 1...5 {
            let wait = Backoff(initial: 10, maximum: 0.01).delay(failures: n, using: &random)
            #expect(wait >= 0.005 && wait <= 0.01)
        }
    }
}
