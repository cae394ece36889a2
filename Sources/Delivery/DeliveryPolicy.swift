import Geo

/// What becomes of an entry after an attempt: delivered, tried again later, or a dead letter. A
/// value with no I/O and no clock: the worker hands it the answer, the entry's failed attempts so
/// far, when it was queued and the time, and performs the outcome.
///
/// - A 2xx (a PUBACK) is delivered.
/// - Any other answer, a timeout or a network failure is tried again after the ``backoff`` of the
///   failures in a row (the uploader's wait: jitter over a doubling ceiling), or the receiver's
///   `Retry-After` when that is longer (at most ``Backoff/maximum``).
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
            // Retry-After is the least wait the receiver asks for (RFC 9110 10.2.3), never less than
            // the backoff's: a receiver answering `Retry-After: 0` to every attempt would otherwise
            // use up the attempts in a moment.
            let delay = backoff.delay(failures: failures, using: &random)
            let wait = min(max(after ?? 0, delay), backoff.maximum)
            return .retry(at: now + wait, reason: failure.message)
        }
    }
}
