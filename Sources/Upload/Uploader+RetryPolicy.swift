import Geo

extension Uploader {
    /// When the uploader reads, sends, waits, backs off and stops: its decisions as a value, with
    /// no I/O and no clock of its own. ``Uploader/run(drain:)`` performs each ``Action`` and
    /// reports what came of it as the next event, with the time on the uploader's clock.
    ///
    /// - A batch that is not full waits until its oldest record waited
    ///   ``Uploader/Configuration/maxWait``, or until the records appended meanwhile fill it,
    ///   whichever comes first (a drain sends it at once).
    /// - A failed attempt (a network error, a timeout, 408, 429, 5xx, an answer that is not an
    ///   acknowledgement) waits the server's `Retry-After`, or the ``Backoff`` of the failures in
    ///   a row; a drain gives up after ``Uploader/Configuration/drainAttempts`` of them.
    /// - A settings problem (401, 403, 404, every record refused alike) stops a drain at once; a
    ///   run tries again at the longest backoff with batches of two records until it succeeds.
    /// - A batch too large for the endpoint (413) is halved, down to one record.
    struct RetryPolicy {
        enum State: Hashable, Sendable {
            /// About to read the next batch.
            case reading
            /// A batch of `count` records was read; the policy decides whether it goes now.
            case sending(count: Int)
            /// Waiting for a wake (records appended, a lifecycle change), or until a deadline.
            case waiting
            /// Backing off before the next attempt.
            case backingOff
            case stopped
        }

        enum Action: Hashable, Sendable {
            /// Read the next batch, at most `limit` records, and report it with
            /// ``batchRead(count:oldestAppended:now:)``.
            case read(limit: Int)
            /// Send the batch just read; `more` says it was full.
            case send(more: Bool)
            /// Say that uploads work again after `failedAttempts` failures, then read the next batch.
            case recovered(failedAttempts: Int)
            /// Wait until woken (records appended, a lifecycle change), or until `deadline` if any.
            case waitForWake(until: EpochInstant?)
            /// Let the batch fill: wait until `deadline`, or until `records` more records were
            /// appended (the batch is full then, and goes at once). Appends that leave it short
            /// don't cut the wait short.
            case fill(until: EpochInstant, records: Int)
            /// Count a retry and sleep until `deadline`, `wait` seconds from the failure.
            case backOff(until: EpochInstant, wait: Double, cause: Failure)
            case stop(Stop)
        }

        enum Failure: Hashable, Sendable {
            /// The endpoint or the network failed; the same batch goes again.
            case transient
            /// The settings are wrong (credentials, URL, device): tried again at the longest backoff.
            case settings
        }

        enum Stop: Hashable, Sendable {
            /// A drain emptied the outbox.
            case drained
            /// A drain found the app suspended: the records wait for the next run.
            case suspended
            /// A drain met a settings problem.
            case settings
            /// A drain failed `attempts` times in a row.
            case gaveUp(attempts: Int)
            /// The task was cancelled.
            case shutdown
        }

        private(set) var state = State.reading
        /// Failed attempts in a row.
        private(set) var failures = 0
        /// Records in the next batch: ``Uploader/Configuration/maxBatchCount``, halved after a 413,
        /// two while the settings are wrong.
        private(set) var batchLimit: Int
        let drain: Bool
        let maxBatchCount: Int
        let maxWait: Double
        let backoff: Backoff
        let drainAttempts: Int
        var random: any RandomNumberGenerator

        /// - Parameters:
        ///   - drain: stop once the outbox is empty (or on a settings problem, or after
        ///     ``Uploader/Configuration/drainAttempts`` failures), instead of waiting for more.
        ///   - random: the backoff's jitter.
        init(configuration: Uploader.Configuration, drain: Bool, random: any RandomNumberGenerator) {
            self.drain = drain
            maxBatchCount = configuration.maxBatchCount
            batchLimit = configuration.maxBatchCount
            maxWait = configuration.maxWait
            backoff = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
            drainAttempts = configuration.drainAttempts
            self.random = random
        }

        /// The first action of a run.
        func start() -> Action {
            precondition(state == .reading, "an upload policy starts once")
            return .read(limit: batchLimit)
        }

        /// The app is suspended (or terminated) at a read: nothing is sent.
        mutating func suspended() -> Action {
            precondition(state == .reading, "suspended outside a read: \(state)")
            if drain {
                // The process is ending: the records wait for the next run rather than for a wake.
                state = .stopped
                return .stop(.suspended)
            }
            state = .waiting
            return .waitForWake(until: nil)
        }

        /// The outbox could not be read: look again after the longest backoff, or when woken.
        mutating func readFailed(now: EpochInstant) -> Action {
            precondition(state == .reading, "a read failed outside a read: \(state)")
            state = .waiting
            return .waitForWake(until: now.advanced(by: .seconds(backoff.maximum)))
        }

        /// The next batch has `count` records, the oldest record in the outbox appended at
        /// `oldestAppended`.
        mutating func batchRead(count: Int, oldestAppended: EpochInstant?, now: EpochInstant) -> Action {
            precondition(state == .reading, "a batch read outside a read: \(state)")
            if count == 0 {
                if drain {
                    state = .stopped
                    return .stop(.drained)
                }
                state = .waiting
                return .waitForWake(until: nil)
            }
            if !drain && count < batchLimit, let oldest = oldestAppended {
                let due = oldest.advanced(by: .seconds(maxWait))
                if now < due {
                    // Not full: let it fill until the oldest record waited maxWait, or until the
                    // records it lacks were appended. Fewer don't wake it (a tracker appends every
                    // second: that would cost a look each time).
                    state = .waiting
                    return .fill(until: due, records: batchLimit - count)
                }
            }
            state = .sending(count: count)
            return .send(more: count == batchLimit)
        }

        /// The endpoint acknowledged the batch (or its records were set aside).
        mutating func acknowledged() -> Action {
            guard case .sending = state else { preconditionFailure("an acknowledgement without a batch: \(state)") }
            let failed = failures
            failures = 0
            batchLimit = maxBatchCount
            state = .reading
            return failed > 0 ? .recovered(failedAttempts: failed) : .read(limit: batchLimit)
        }

        /// The attempt failed in a way worth repeating: a network error, a timeout, 408, 429, 5xx
        /// (with the server's `Retry-After`, in seconds, if it sent one: honoured up to the longest
        /// backoff, so that a server's `Retry-After: 3600` makes no run wait an hour).
        ///
        /// With `progressed`, the attempt also had records acknowledged (some of a batch's concurrent
        /// requests): the failures before it were not in a row, and it counts as the first.
        mutating func failed(retryAfter: Double?, now: EpochInstant, progressed: Bool = false) -> Action {
            guard case .sending = state else { preconditionFailure("a failure without a batch: \(state)") }
            if progressed { failures = 0 }
            failures += 1
            if drain && failures >= drainAttempts {
                state = .stopped
                return .stop(.gaveUp(attempts: failures))
            }
            let wait = retryAfter.map { min($0, backoff.maximum) } ?? backoff.delay(failures: failures, using: &random)
            state = .backingOff
            return .backOff(until: now.advanced(by: .seconds(wait)), wait: wait, cause: .transient)
        }

        /// The endpoint refuses the settings (401, 403, 404, every record alike).
        mutating func settingsProblem(now: EpochInstant) -> Action {
            guard case .sending = state else { preconditionFailure("a settings problem without a batch: \(state)") }
            failures += 1
            if drain {
                state = .stopped
                return .stop(.settings)
            }
            // Until the settings change, each look costs two records' requests, not a batch's.
            batchLimit = min(2, maxBatchCount)
            state = .backingOff
            return .backOff(until: now.advanced(by: .seconds(backoff.maximum)), wait: backoff.maximum, cause: .settings)
        }

        /// The app may not start a background task now: wait for a lifecycle change.
        mutating func notAllowed() -> Action {
            guard case .sending = state else { preconditionFailure("not allowed without a batch: \(state)") }
            state = .waiting
            return .waitForWake(until: nil)
        }

        /// The endpoint found the batch too large (413): the next one has half its records.
        mutating func tooLarge() -> Action {
            guard case .sending(let count) = state else { preconditionFailure("too large without a batch: \(state)") }
            batchLimit = max(1, count / 2)
            state = .reading
            return .read(limit: batchLimit)
        }

        /// A wait or a backoff ended (its deadline, a wake, or a cancellation).
        mutating func woke() -> Action {
            precondition(state == .waiting || state == .backingOff, "woken while not waiting: \(state)")
            state = .reading
            return .read(limit: batchLimit)
        }

        /// The task was cancelled: stop where it is.
        mutating func shutdown() -> Action {
            state = .stopped
            return .stop(.shutdown)
        }
    }
}
