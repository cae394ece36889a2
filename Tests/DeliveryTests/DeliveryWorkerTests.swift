import Delivery
import EndpointEvents
import Geo
import KeepTrackTesting
import Logging
import Testing

/// The delivery worker against the queue's test double and real receivers: order per device and
/// hook, each event once for an idempotent receiver through failures, a killed worker's events
/// taken over, a slow hook holding its own lane only, dead letters.
@Suite("Delivery worker", .serialized)
struct DeliveryWorkerTests {
    static let t0 = 1_700_000_000.0

    static func configuration(lease: Double = 3_600) -> DeliveryWorker.Configuration {
        var c = DeliveryWorker.Configuration()
        c.lease = lease
        c.policy = DeliveryPolicy(backoff: Backoff(initial: 1, maximum: 4), maximumAttempts: 50, maximumAge: 1e9)
        c.randomSeed = 37
        return c
    }

    static func worker(
        _ queue: InMemoryQueue, clock: ManualClock, configuration: DeliveryWorker.Configuration = configuration(),
        timeout: Double = 60
    ) -> DeliveryWorker {
        let kinds = DeliveryKinds(allowPrivate: true, timeout: timeout, instance: "test")
        return DeliveryWorker(
            queue: queue, makeKind: { kinds.make($0) }, clock: clock, configuration: configuration,
            logger: Logger(label: "test"))
    }

    /// Moves the clock to the next deadline whenever nothing is in flight and every part sleeps on
    /// it (each worker's hook reader and each lane: `sleepers`), until `done`.
    static func drive(
        _ clock: ManualClock, _ queue: InMemoryQueue, _ workers: [DeliveryWorker], sleepers: Int,
        until done: () -> Bool
    ) async {
        func idle() -> Bool { workers.allSatisfy { $0.stats.values.allSatisfy { $0.inFlight == 0 } } }
        while !done() {
            if idle() {
                await clock.sleepers(atLeast: sleepers)
                if done() { return }
                if idle(), let next = clock.nextDeadline { clock.advance(to: next) }
            } else {
                await anyActivity(workers)
            }
        }
    }

    /// Returns when one of `workers` ended a delivery (at once if one did since the last wait).
    static func anyActivity(_ workers: [DeliveryWorker]) async {
        await withTaskGroup(of: Void.self) { group in
            for w in workers { group.addTask { await w.activity.wait() } }
            await group.next()
            group.cancelAll()
        }
    }

    @Test func everyEventArrivesOnceAndInOrderThroughAReceiverFailingAThird() async throws {
        let receiver = try await Receiver(seed: 7)
        defer { receiver.stop() }
        let hook = webhook("flaky", receiver.url("flaky"))
        let queue = InMemoryQueue(hooks: [hook])
        let devices = ["van-1", "van-2", "van-3", "van-4", "van-5", "van-6"]
        let events = (1...15).flatMap { n in devices.map { event($0, n) } }
        queue.enqueue(events, now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let worker = Self.worker(queue, clock: clock)
        let run = Task { try await worker.run() }
        try await withTimeout(240, "every event delivered") {
            await Self.drive(clock, queue, [worker], sleepers: 2) { queue.settled }
        }
        run.cancel()
        _ = await run.result
        let stats = try #require(worker.stats["flaky"])
        #expect(stats.delivered == events.count)
        #expect(stats.dead == 0 && stats.lostLeases == 0)
        #expect(stats.retried > 0, "the receiver failed nothing: the test proves little")
        #expect(stats.mostInFlight == 4)
        let posts = try await receiver.posts(stats.delivered + stats.retried)
        #expect(posts.allSatisfy { $0.valid })
        // Each event processed once, and each device's events processed in their order.
        let processed = posts.filter { $0.status == 200 }
        #expect(processed.count == events.count && processed.allSatisfy { $0.first })
        for d in devices {
            #expect(processed.filter { $0.device == d }.map(\.id) == events.filter { $0.device == d }.map(\.id))
        }
    }

    @Test func aHookThatHangsHoldsItsOwnLaneOnly() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let slow = webhook("slow", receiver.url("hold"))
        let fast = webhook("fast", receiver.url("ok"))
        let queue = InMemoryQueue(hooks: [slow, fast])
        let events = (1...5).flatMap { n in (1...8).map { event("van-\($0)", n) } }
        queue.enqueue(events, now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let worker = Self.worker(queue, clock: clock)
        let run = Task { try await worker.run() }
        // Every event of the fast hook is delivered while the slow one answers nothing: the
        // receiver says each post as it arrives, the slow hook's without answering them.
        let (held, fastPosts) = try await withTimeout(120, "the fast hook's events") {
            var held = 0
            var fastPosts = 0
            while held < 4 || fastPosts < events.count {
                let post = try await receiver.next()
                if post.status == 0 { held += 1 } else if post.path == "/hook/ok" { fastPosts += 1 }
            }
            return (held, fastPosts)
        }
        #expect(held == 4 && fastPosts == events.count)
        while worker.stats["fast"]?.delivered != events.count { await Self.anyActivity([worker]) }
        #expect(queue.entries("fast").allSatisfy { $0.phase == .delivered })
        let slowLane = try #require(worker.stats["slow"])
        #expect(slowLane.delivered == 0)
        #expect(slowLane.inFlight == 4 && slowLane.mostInFlight == 4, "the slow lane holds \(slowLane.inFlight)")
        #expect(worker.stats["fast"]?.delivered == events.count)
        // Answered at last, it delivers the rest.
        try await receiver.release()
        try await withTimeout(120, "the slow hook's events") {
            await Self.drive(clock, queue, [worker], sleepers: 3) { queue.settled }
        }
        #expect(worker.stats["slow"]?.delivered == events.count)
        run.cancel()
        _ = await run.result
    }

    @Test func aWorkerKilledMidDeliveryLeavesItsEventsToAnother() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let hook = webhook("h", receiver.url("hold"))
        let queue = InMemoryQueue(hooks: [hook])
        let events = (1...3).flatMap { n in (1...6).map { event("van-\($0)", n) } }
        queue.enqueue(events, now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let configuration = Self.configuration(lease: 60)
        let first = Self.worker(queue, clock: clock, configuration: configuration)
        let firstRun = Task { try await first.run() }
        let claimed = try await withTimeout(60, "the first worker's posts") { try await receiver.posts(4) }
        // Gone without a word (as kill -9: nothing settled; its requests stay with the receiver).
        firstRun.cancel()
        _ = await firstRun.result
        #expect(queue.entries("h").allSatisfy { $0.phase == .pending })
        try await receiver.release()
        let second = Self.worker(queue, clock: clock, configuration: configuration)
        let secondRun = Task { try await second.run() }
        // Its claims wait for the first worker's leases to end, then take the same events.
        try await withTimeout(120, "the second worker's deliveries") {
            await Self.drive(clock, queue, [second], sleepers: 2) { queue.settled }
        }
        secondRun.cancel()
        _ = await secondRun.result
        #expect(second.stats["h"]?.delivered == events.count)
        // The first worker's four answered once released (it never learned), and the second's.
        let later = try await receiver.posts(4 + events.count)
        #expect(claimed.allSatisfy { $0.status == 0 })
        #expect(later.allSatisfy { $0.status == 200 && $0.valid })
        // The receiver got the first worker's four twice, and processed each event once.
        for id in claimed.map(\.id) { #expect(later.filter { $0.id == id }.count == 2) }
        #expect(later.filter { $0.first }.map(\.id).sorted() == events.map(\.id).sorted())
    }

    @Test func anAnswerAfterTheLeaseWasTakenOverChangesNothing() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let hook = webhook("h", receiver.url("hold"))
        let queue = InMemoryQueue(hooks: [hook])
        queue.enqueue([event("van-1", 1)], now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        var configuration = Self.configuration(lease: 60)
        // One at a time: the event it holds is not claimed again by itself when its lease ends.
        configuration.inFlightPerHook = 1
        let slow = Self.worker(queue, clock: clock, configuration: configuration)
        let slowRun = Task { try await slow.run() }
        _ = try await withTimeout(60, "the first post") { try await receiver.next() }
        // Its lease ends while the receiver holds its post; another worker takes the event.
        clock.advance(by: .seconds(61))
        let other = Self.worker(queue, clock: clock, configuration: configuration)
        let otherRun = Task { try await other.run() }
        _ = try await withTimeout(60, "the second post") { try await receiver.next() }
        try await receiver.release()
        try await withTimeout(60, "both answers") {
            while (slow.stats["h"]?.lostLeases ?? 0) + (other.stats["h"]?.delivered ?? 0) < 2 {
                await Self.anyActivity([slow, other])
            }
        }
        #expect(slow.stats["h"]?.lostLeases == 1 && slow.stats["h"]?.delivered == 0)
        #expect(other.stats["h"]?.delivered == 1)
        #expect(queue.entries("h").map(\.phase) == [.delivered])
        slowRun.cancel()
        otherRun.cancel()
        _ = await slowRun.result
        _ = await otherRun.result
    }

    @Test func anEventThatKeepsFailingIsADeadLetterAndTheNextGoesOn() async throws {
        let receiver = try await Receiver()
        defer { receiver.stop() }
        let hook = webhook("h", receiver.url("fail"))
        let queue = InMemoryQueue(hooks: [hook])
        queue.enqueue([event("van-1", 1), event("van-1", 2)], now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        var configuration = Self.configuration()
        configuration.policy.maximumAttempts = 3
        let worker = Self.worker(queue, clock: clock, configuration: configuration)
        let run = Task { try await worker.run() }
        try await withTimeout(120, "both dead") {
            await Self.drive(clock, queue, [worker], sleepers: 2) { queue.settled }
        }
        run.cancel()
        _ = await run.result
        #expect(
            queue.entries("h").map(\.phase) == [
                .dead("127.0.0.1 answered 500 (3 attempts)"), .dead("127.0.0.1 answered 500 (3 attempts)"),
            ])
        // Three attempts of the first, then three of the second: order kept through the dead letter.
        let posts = try await receiver.posts(6)
        #expect(
            posts.map(\.id) == Array(repeating: event("van-1", 1).id, count: 3)
                + Array(repeating: event("van-1", 2).id, count: 3))
    }

    @Test func aHookWhoseSettingsCannotWorkDeadLettersAtOnce() async throws {
        var hook = webhook("bad", "ftp://example.com/")
        hook.secret = "short"
        let queue = InMemoryQueue(hooks: [hook])
        queue.enqueue([event("van-1", 1)], now: Self.t0)
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let worker = Self.worker(queue, clock: clock)
        let run = Task { try await worker.run() }
        try await withTimeout(60, "the dead letter") { while !queue.settled { await queue.changed.wait() } }
        run.cancel()
        _ = await run.result
        guard case .dead(let reason) = queue.entries("bad")[0].phase else {
            Issue.record("not dead")
            return
        }
        #expect(reason.contains("the hook's settings cannot work"))
    }
}
