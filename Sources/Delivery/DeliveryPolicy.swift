import Geo

/// What becomes of an entry after an attempt: delivered, tried again later, or a dead letter. A
/// value with no I/O and no clock: the worker hands it the answer, the entry's failed attempts so
/// far, when it was queued and the time, and performs the outcome.
///
/// - A 2xx (a PUBACK) is delivered.
/// - Any other answer, a timeout or a network failure is tried again after the receiver's
///   `Retry-After` (at most ``Backoff/maximum``) or the ``backoff`` of the failures in a row (the
///   uploader's wait: full jitter over a doubling ceiling).
/// - After ``maximumAttempts`` failed attempts, or once the entry is older than ``maximumAge``,
///   it is a dead letter (`hooks retry` queues dead letters again).
public struct DeliveryPolicy: Hashable, Sendable {
    /// The waits between attempts. The default is 5 s doubling to 1 hour.
    public var backoff: Backoff
    /// Failed attempts before an entry is a dead letter. The default is 15 (about 12 hours of waits).
    public var maximumAttempts: Int
    /// Seconds after which an entry that still fails is a dead letter. The default is 3 days.
    public var maximumAge: Double

    public init(
        backoff: Backoff = Backoff(initial: 5, maximum: 3600), maximumAttempts: Int = 15,
        maximumAge: Double = 3 * 86_400
    ) {
        self.backoff = backoff
        self.maximumAttempts = maximumAttempts
        self.maximumAge = maximumAge
    }

    /// The outcome of `answer` for an entry that failed `attempts` times before, queued at `queued`,
    /// at `now` (seconds since 1970).
    public func outcome(
        of answer: DeliveryAnswer, attempts: Int, queued: Double, now: Double,
        random: inout some RandomNumberGenerator
    ) -> DeliveryOutcome {
        switch answer {
        case .delivered:
            return .delivered
        case .dead(let failure):
            return .dead(reason: failure.message)
        case .retry(let after, let failure):
            let failures = attempts + 1
            if failures >= maximumAttempts {
                return .dead(reason: "\(failure.message) (\(failures) attempts)")
            }
            if now - queued >= maximumAge {
                return .dead(reason: "\(failure.message) (still failing after \(Int(maximumAge)) s)")
            }
            let wait = after.map { min($0, backoff.maximum) } ?? backoff.delay(failures: failures, using: &random)
            return .retry(at: now + wait, reason: failure.message)
        }
    }
}
