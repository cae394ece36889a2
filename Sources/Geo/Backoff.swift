/// The wait before each retry: full jitter over an exponential ceiling, from ``initial`` doubling
/// to ``maximum`` seconds. HTTP and MQTT uploads and the endpoint's MQTT subscription all wait so.
///
/// Retry `n` (1, 2, ...) waits a uniformly random time between half the ceiling and the ceiling,
/// the ceiling being `min(maximum, initial × 2^(n-1))`. The randomness is a parameter, so a test
/// that passes a seeded generator gets the same waits on every run.
public struct Backoff: Hashable, Sendable {
    /// The first retry's ceiling, in seconds.
    public var initial: Double
    /// The longest wait, in seconds.
    public var maximum: Double

    /// - Parameters:
    ///   - initial: the first retry's ceiling, in seconds.
    ///   - maximum: the longest wait, in seconds.
    public init(initial: Double, maximum: Double) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The longest wait before retry `n` (1, 2, ...; anything below 1 counts as 1).
    public func ceiling(failures n: Int) -> Double {
        min(maximum, initial * Double(1 << min(max(n, 1) - 1, 30)))
    }

    /// The wait before retry `n` (1, 2, ...), in seconds: between half the ceiling and the ceiling.
    ///
    /// - Parameters:
    ///   - n: the failed attempts in a row so far.
    ///   - random: the source of the jitter.
    public func delay(failures n: Int, using random: inout some RandomNumberGenerator) -> Double {
        let ceiling = ceiling(failures: n)
        return Double.random(in: (ceiling / 2)...max(ceiling / 2, ceiling), using: &random)
    }

    /// The wait before retry `n` (1, 2, ...), in seconds, with the system's random numbers.
    public func delay(failures n: Int) -> Double {
        var random = SystemRandomNumberGenerator()
        return delay(failures: n, using: &random)
    }
}
