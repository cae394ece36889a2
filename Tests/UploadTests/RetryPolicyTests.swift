import Geo
import Testing

@testable import Upload

/// The uploader's decisions without a socket: events in, actions out.
@Suite struct RetryPolicyTests {
    typealias Policy = Uploader.RetryPolicy
    typealias Action = Policy.Action

    /// What the uploader reports to its policy, at `t` seconds (since 1970) on its clock.
    enum Event: Sendable {
        case read(count: Int, oldest: Double?, at: Double)
        case readFailed(at: Double)
        case suspended
        case acknowledged
        case failed(retryAfter: Double?, at: Double)
        /// A failure of a batch some of whose requests were acknowledged.
        case progressed(at: Double)
        case settings(at: Double)
        case notAllowed
        case tooLarge
        case woke
        case shutdown
    }

    /// A policy with a batch of 10, a 5 s fill, backoff from 1 s to 60 s, 3 drain attempts.
    static func policy(drain: Bool) -> Policy {
        var c = Uploader.Configuration(url: "http://127.0.0.1:9/v1/locations")
        (c.maxBatchCount, c.maxWait, c.initialBackoff, c.maxBackoff, c.drainAttempts) = (10, 5, 1, 60, 3)
        // The lowest draw: each backoff is half its ceiling, 0.5 s, 1 s, 2 s...
        return Policy(configuration: c, drain: drain, random: ConstantRandom(value: 1))
    }

    static func at(_ t: Double) -> EpochInstant { EpochInstant(secondsSince1970: t) }

    /// The actions for `events`, after the first (the start).
    static func actions(drain: Bool, _ events: [Event]) -> [Action] {
        var p = policy(drain: drain)
        var out = [p.start()]
        for e in events {
            switch e {
            case .read(let count, let oldest, let t):
                out.append(p.batchRead(count: count, oldestAppended: oldest.map(at), now: at(t)))
            case .readFailed(let t): out.append(p.readFailed(now: at(t)))
            case .suspended: out.append(p.suspended())
            case .acknowledged: out.append(p.acknowledged())
            case .failed(let after, let t): out.append(p.failed(retryAfter: after, now: at(t)))
            case .progressed(let t): out.append(p.failed(retryAfter: nil, now: at(t), progressed: true))
            case .settings(let t): out.append(p.settingsProblem(now: at(t)))
            case .notAllowed: out.append(p.notAllowed())
            case .tooLarge: out.append(p.tooLarge())
            case .woke: out.append(p.woke())
            case .shutdown: out.append(p.shutdown())
            }
        }
        return out
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var drain: Bool
        var events: [Event]
        var actions: [Action]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "an empty outbox waits for records; a drain stops", drain: false,
            events: [.read(count: 0, oldest: nil, at: 100), .woke],
            actions: [.read(limit: 10), .waitForWake(until: nil), .read(limit: 10)]),
        Case(
            name: "a drain of an empty outbox is done", drain: true,
            events: [.read(count: 0, oldest: nil, at: 100)],
            actions: [.read(limit: 10), .stop(.drained)]),
        Case(
            name: "a young batch that is not full fills until its oldest record waited 5 s", drain: false,
            events: [.read(count: 3, oldest: 98, at: 100), .woke, .read(count: 4, oldest: 98, at: 103), .acknowledged],
            actions: [
                .read(limit: 10), .fill(until: at(103), records: 7), .read(limit: 10), .send(more: false),
                .read(limit: 10),
            ]),
        Case(
            name: "a batch that filled while it waited goes at once, before the deadline, saying there is more",
            drain: false,
            events: [.read(count: 1, oldest: 100, at: 100), .woke, .read(count: 10, oldest: 100, at: 101)],
            actions: [.read(limit: 10), .fill(until: at(105), records: 9), .read(limit: 10), .send(more: true)]),
        Case(
            name: "woken short of a full batch before the deadline, it fills again for what it still lacks",
            drain: false,
            events: [.read(count: 4, oldest: 100, at: 100), .woke, .read(count: 6, oldest: 100, at: 102)],
            actions: [
                .read(limit: 10), .fill(until: at(105), records: 6), .read(limit: 10),
                .fill(until: at(105), records: 4),
            ]),
        Case(
            name: "while the settings are wrong, a batch fills up to two records",
            drain: false,
            events: [
                .read(count: 10, oldest: 0, at: 100), .settings(at: 100), .woke, .read(count: 1, oldest: 159, at: 160),
            ],
            actions: [
                .read(limit: 10), .send(more: true), .backOff(until: at(160), wait: 60, cause: .settings),
                .read(limit: 2), .fill(until: at(164), records: 1),
            ]),
        Case(
            name: "a drain sends a young batch at once", drain: true,
            events: [.read(count: 3, oldest: 99, at: 100)],
            actions: [.read(limit: 10), .send(more: false)]),
        Case(
            name: "a full batch goes at once and says there is more", drain: false,
            events: [.read(count: 10, oldest: 100, at: 100)],
            actions: [.read(limit: 10), .send(more: true)]),
        Case(
            name: "failures back off from half of 1 s, doubling; an acknowledgement says it recovered and resets",
            drain: false,
            events: [
                .read(count: 10, oldest: 0, at: 100), .failed(retryAfter: nil, at: 100), .woke,
                .read(count: 10, oldest: 0, at: 101), .failed(retryAfter: nil, at: 101), .woke,
                .read(count: 10, oldest: 0, at: 102), .failed(retryAfter: nil, at: 102), .woke,
                .read(count: 10, oldest: 0, at: 104), .acknowledged,
                .read(count: 10, oldest: 0, at: 104), .failed(retryAfter: nil, at: 104),
            ],
            actions: [
                .read(limit: 10), .send(more: true), .backOff(until: at(100.5), wait: 0.5, cause: .transient),
                .read(limit: 10), .send(more: true), .backOff(until: at(102), wait: 1, cause: .transient),
                .read(limit: 10), .send(more: true), .backOff(until: at(104), wait: 2, cause: .transient),
                .read(limit: 10), .send(more: true), .recovered(failedAttempts: 3),
                .send(more: true), .backOff(until: at(104.5), wait: 0.5, cause: .transient),
            ]),
        Case(
            name: "the server's Retry-After replaces the backoff", drain: false,
            events: [.read(count: 1, oldest: 0, at: 100), .failed(retryAfter: 7, at: 100)],
            actions: [.read(limit: 10), .send(more: false), .backOff(until: at(107), wait: 7, cause: .transient)]),
        Case(
            name: "a Retry-After past the longest backoff waits the longest backoff", drain: false,
            events: [.read(count: 1, oldest: 0, at: 100), .failed(retryAfter: 3600, at: 100)],
            actions: [.read(limit: 10), .send(more: false), .backOff(until: at(160), wait: 60, cause: .transient)]),
        Case(
            name: "a drain gives up after 3 failures in a row", drain: true,
            events: [
                .read(count: 1, oldest: 0, at: 100), .failed(retryAfter: nil, at: 100), .woke,
                .read(count: 1, oldest: 0, at: 101), .failed(retryAfter: 30, at: 101), .woke,
                .read(count: 1, oldest: 0, at: 131), .failed(retryAfter: nil, at: 131),
            ],
            actions: [
                .read(limit: 10), .send(more: false), .backOff(until: at(100.5), wait: 0.5, cause: .transient),
                .read(limit: 10), .send(more: false), .backOff(until: at(131), wait: 30, cause: .transient),
                .read(limit: 10), .send(more: false), .stop(.gaveUp(attempts: 3)),
            ]),
        Case(
            // A server that fails every other connection: OsmAnd's concurrent requests each time
            // get some through, and the drain went on (it gave up after 5 such batches).
            name: "a failure after which records were acknowledged is not one in a row", drain: true,
            events: [
                .read(count: 1, oldest: 0, at: 100), .failed(retryAfter: nil, at: 100), .woke,
                .read(count: 1, oldest: 0, at: 101), .failed(retryAfter: nil, at: 101), .woke,
                .read(count: 1, oldest: 0, at: 102), .progressed(at: 102), .woke,
                .read(count: 1, oldest: 0, at: 103), .failed(retryAfter: nil, at: 103), .woke,
                .read(count: 1, oldest: 0, at: 104), .failed(retryAfter: nil, at: 104),
            ],
            actions: [
                .read(limit: 10), .send(more: false), .backOff(until: at(100.5), wait: 0.5, cause: .transient),
                .read(limit: 10), .send(more: false), .backOff(until: at(102), wait: 1, cause: .transient),
                .read(limit: 10), .send(more: false), .backOff(until: at(102.5), wait: 0.5, cause: .transient),
                .read(limit: 10), .send(more: false), .backOff(until: at(104), wait: 1, cause: .transient),
                .read(limit: 10), .send(more: false), .stop(.gaveUp(attempts: 3)),
            ]),
        Case(
            name: "a settings problem waits the longest backoff and tries two records until it works", drain: false,
            events: [
                .read(count: 10, oldest: 0, at: 100), .settings(at: 100), .woke,
                .read(count: 2, oldest: 0, at: 160), .settings(at: 160), .woke,
                .read(count: 2, oldest: 0, at: 220), .acknowledged,
            ],
            actions: [
                .read(limit: 10), .send(more: true), .backOff(until: at(160), wait: 60, cause: .settings),
                .read(limit: 2), .send(more: true), .backOff(until: at(220), wait: 60, cause: .settings),
                .read(limit: 2), .send(more: true), .recovered(failedAttempts: 2),
            ]),
        Case(
            name: "a drain stops at a settings problem", drain: true,
            events: [.read(count: 10, oldest: 0, at: 100), .settings(at: 100)],
            actions: [.read(limit: 10), .send(more: true), .stop(.settings)]),
        Case(
            name: "a batch too large is halved down to one record, and is whole again after a success", drain: true,
            events: [
                .read(count: 10, oldest: 0, at: 100), .tooLarge, .read(count: 5, oldest: 0, at: 100), .tooLarge,
                .read(count: 2, oldest: 0, at: 100), .tooLarge, .read(count: 1, oldest: 0, at: 100), .tooLarge,
                .read(count: 1, oldest: 0, at: 100), .acknowledged,
            ],
            actions: [
                .read(limit: 10), .send(more: true), .read(limit: 5), .send(more: true), .read(limit: 2),
                .send(more: true), .read(limit: 1), .send(more: true), .read(limit: 1), .send(more: true),
                .read(limit: 10),
            ]),
        Case(
            name: "a suspended app sends nothing and waits for a wake", drain: false,
            events: [.suspended, .woke, .read(count: 1, oldest: 0, at: 100)],
            actions: [.read(limit: 10), .waitForWake(until: nil), .read(limit: 10), .send(more: false)]),
        Case(
            name: "a drain leaves the records of a suspended app for the next run", drain: true,
            events: [.suspended],
            actions: [.read(limit: 10), .stop(.suspended)]),
        Case(
            name: "an unreadable outbox is read again after the longest backoff or a wake", drain: false,
            events: [.readFailed(at: 100), .woke],
            actions: [.read(limit: 10), .waitForWake(until: at(160)), .read(limit: 10)]),
        Case(
            name: "no background task allowed: wait for a lifecycle change", drain: false,
            events: [.read(count: 1, oldest: 0, at: 100), .notAllowed, .woke],
            actions: [.read(limit: 10), .send(more: false), .waitForWake(until: nil), .read(limit: 10)]),
        Case(
            name: "a shutdown stops a backoff", drain: false,
            events: [.read(count: 1, oldest: 0, at: 100), .failed(retryAfter: nil, at: 100), .shutdown],
            actions: [
                .read(limit: 10), .send(more: false), .backOff(until: at(100.5), wait: 0.5, cause: .transient),
                .stop(.shutdown),
            ]),
    ]

    @Test(arguments: cases) func decides(_ c: Case) {
        #expect(Self.actions(drain: c.drain, c.events) == c.actions)
    }

    /// A seeded jitter gives the same waits twice, each within its ceiling.
    @Test func aSeededJitterRepeats() {
        var c = Uploader.Configuration(url: "http://127.0.0.1:9/v1/locations")
        (c.maxBatchCount, c.initialBackoff, c.maxBackoff) = (10, 1, 60)
        func waits() -> [Double] {
            var p = Policy(configuration: c, drain: false, random: SeededRandom(seed: 42))
            _ = p.start()
            var out: [Double] = []
            for _ in 1...8 {
                _ = p.batchRead(count: 10, oldestAppended: nil, now: Self.at(0))
                guard case .backOff(_, let wait, _) = p.failed(retryAfter: nil, now: Self.at(0)) else {
                    Issue.record("no backoff")
                    return out
                }
                out.append(wait)
                _ = p.woke()
            }
            return out
        }
        let first = waits()
        #expect(first == waits())
        for (n, wait) in zip(1..., first) {
            let ceiling = min(60, Double(1 << (n - 1)))
            #expect(wait >= ceiling / 2 && wait <= ceiling)
        }
    }
}

/// A generator that always answers the same number: 1 is the jitter's lowest draw (0 would make the
/// standard library's bounded draw reject it and ask again, forever).
struct ConstantRandom: RandomNumberGenerator, Sendable {
    var value: UInt64
    mutating func next() -> UInt64 { value }
}
