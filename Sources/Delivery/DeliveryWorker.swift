import EndpointEvents
import Geo
import Logging
import ServiceLifecycle
import Synchronization

/// The delivery kind each type of hook gets.
public struct DeliveryKinds: Sendable {
    /// Whether hooks may reach loopback, private and link-local addresses. The default is `false`.
    public var allowPrivate = false
    /// Seconds a delivery may take (an HTTP request to its answer's head, an MQTT PUBACK). The
    /// default is 10.
    public var timeout = 10.0
    /// This process's tag in MQTT client ids (instances sharing a store need distinct ones).
    public var instance: String

    public init(allowPrivate: Bool = false, timeout: Double = 10, instance: String) {
        self.allowPrivate = allowPrivate
        self.timeout = timeout
        self.instance = instance
    }

    /// The kind that delivers `hook`'s events: one that answers every event dead when the hook's
    /// settings cannot work.
    public func make(_ hook: Hook) -> any DeliveryKind {
        if let problem = hook.problem { return Misconfigured(problem: "\(problem)") }
        switch hook.type {
        case .webhook, .homeassistant: return WebhookDelivery(hook: hook, allowPrivate: allowPrivate, timeout: timeout)
        case .mqtt:
            return MQTTDelivery(
                hook: hook, allowPrivate: allowPrivate, timeout: timeout, instance: "\(instance)-\(hook.name)")
        }
    }

    struct Misconfigured: DeliveryKind {
        let problem: String
        func deliver(_ event: QueuedEvent) async -> DeliveryAnswer {
            .dead(DeliveryFailure(.configuration, "the hook's settings cannot work: \(problem)"))
        }
        func close() async {}
    }
}

/// Delivers the queued events: one lane per hook, each claiming from the ``DeliveryQueue`` the
/// next event of up to ``Configuration/inFlightPerHook`` devices and delivering them at once with
/// the hook's ``DeliveryKind``, then settling each by the ``DeliveryPolicy``.
///
/// Lanes share nothing but the queue: a hook that hangs fills its own in-flight bound and waits out
/// its own timeouts, and every other hook goes on. Ingest never waits for a lane: it commits events
/// into the queue and calls ``wake()``. A lane sleeps until woken, until its next entry is due (a
/// retry), or at most ``Configuration/pollInterval`` (entries other instances queued).
///
/// A swift-service-lifecycle `Service`: on graceful shutdown lanes claim nothing more and finish
/// what they hold; on cancellation what they hold is left to its lease (claimed again once it
/// ends, by this process or another).
public final class DeliveryWorker: Service, Sendable {
    public struct Configuration: Sendable {
        /// Events of one hook delivered at once (of distinct devices). The default is 4.
        public var inFlightPerHook = 4
        /// Seconds a claim holds an entry: longer than a delivery may take. The default is 60.
        public var lease = 60.0
        /// Seconds a lane sleeps at most before it looks at the queue again. The default is 5.
        public var pollInterval = 5.0
        /// Seconds between two readings of the hooks (changes made by other instances, or by
        /// `keeptrack serve hooks` on the same database). The default is 5: a hook's new URL is in use
        /// before a `hooks retry` typed after it is delivered (its lane looks at the queue as often).
        public var hookRefresh = 5.0
        /// Seconds a lane waits after the queue failed. The default is 5.
        public var queueRetry = 5.0
        /// What becomes of an attempt.
        public var policy = DeliveryPolicy()
        /// A seed for the retries' jitter (tests); `nil` uses the system's random numbers.
        public var randomSeed: UInt64?

        public init() {}
    }

    /// What one hook's lane did.
    public struct Stats: Hashable, Sendable {
        public var delivered = 0
        public var retried = 0
        public var dead = 0
        /// Answers that came after the claim's lease had been taken over (changing nothing).
        public var lostLeases = 0
        /// Deliveries in flight now, and the most at once.
        public var inFlight = 0
        public var mostInFlight = 0
        /// The queue's failures (claims, settlements).
        public var queueFailures = 0
        /// Claims made (each a look at the queue, whatever it found).
        public var claims = 0
        /// Whether the latest claim was made with nothing in flight and found nothing: the lane then
        /// waits for a wake, an entry's due time or its poll.
        public var idle = false

        public init() {}
    }

    let queue: any DeliveryQueue
    let makeKind: @Sendable (Hook) -> any DeliveryKind
    let clock: any EpochClock
    let configuration: Configuration
    let logger: Logger
    let hooksSignal = Signal()
    let state = Mutex(State())
    /// Fires each time a delivery ends (settled or not) and each time a lane looked at the queue,
    /// once ``stats`` counts it: what a program waiting for the queue to drain waits on.
    public let activity = Signal()

    struct State {
        var lanes: [String: Lane] = [:]
        var stats: [String: Stats] = [:]
        var stopping = false
    }

    final class Lane: Sendable {
        let hook: Hook
        let signal = Signal()
        let stopped = Mutex(false)
        /// Deliveries in flight.
        let running = Mutex(0)
        /// The retries' jitter.
        let random: Mutex<any RandomNumberGenerator & Sendable>

        init(hook: Hook, seed: UInt64?) {
            self.hook = hook
            random = Mutex(seed.map { SeededRandom(seed: $0) } ?? SystemRandomNumberGenerator())
        }
    }

    /// - Parameters:
    ///   - makeKind: the delivery kind of a hook (``DeliveryKinds/make(_:)``), made when its lane starts.
    ///   - clock: the time of leases, retries and sleeps.
    public init(
        queue: any DeliveryQueue, makeKind: @escaping @Sendable (Hook) -> any DeliveryKind, clock: any EpochClock,
        configuration: Configuration = Configuration(), logger: Logger = Logger(label: "keeptrack.delivery")
    ) {
        precondition(configuration.inFlightPerHook >= 1, "a lane delivers at least one event at a time")
        self.queue = queue
        self.makeKind = makeKind
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
    }

    /// New events were queued: every lane looks at the queue now.
    public func wake() {
        let lanes = state.withLock { Array($0.lanes.values) }
        for lane in lanes { lane.signal.fire() }
    }

    /// The hooks changed: they are read again now.
    public func hooksChanged() { hooksSignal.fire() }

    /// What each hook's lane did so far, by hook name.
    public var stats: [String: Stats] { state.withLock { $0.stats } }

    public func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                var current: [String: Hook] = [:]
                while !Task.isCancelled && !state.withLock({ $0.stopping }) {
                    do {
                        let hooks = try await queue.hooks()
                        let wanted = Dictionary(hooks.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
                        for (name, hook) in current where wanted[name] != hook { stopLane(name) }
                        for (name, hook) in wanted where current[name] != hook {
                            let lane = Lane(hook: hook, seed: configuration.randomSeed)
                            state.withLock { s in
                                s.lanes[name] = lane
                                if s.stats[name] == nil { s.stats[name] = Stats() }
                            }
                            group.addTask { await self.runLane(lane) }
                        }
                        current = wanted
                    } catch {
                        logger.warning(
                            "cannot read the hooks", metadata: ["error": "\(String(describing: error).prefix(300))"])
                    }
                    let next = clock.now.advanced(by: .seconds(configuration.hookRefresh))
                    await hooksSignal.wait(until: next, on: clock)
                }
                for name in current.keys { stopLane(name) }
                await group.waitForAll()
            }
        } onGracefulShutdown: {
            self.stop()
        }
    }

    /// Claims nothing more; lanes finish what they hold and end.
    func stop() {
        let lanes = state.withLock { s -> [Lane] in
            s.stopping = true
            return Array(s.lanes.values)
        }
        for lane in lanes {
            lane.stopped.withLock { $0 = true }
            lane.signal.fire()
        }
        hooksSignal.fire()
    }

    func stopLane(_ name: String) {
        guard let lane = state.withLock({ $0.lanes.removeValue(forKey: name) }) else { return }
        lane.stopped.withLock { $0 = true }
        lane.signal.fire()
    }

    func update(_ hook: String, _ change: (inout Stats) -> Void) {
        state.withLock { s in change(&s.stats[hook, default: Stats()]) }
    }

    /// One hook's lane: claim what is due while there is room, deliver at once, settle each.
    func runLane(_ lane: Lane) async {
        let hook = lane.hook
        let kind = makeKind(hook)
        await withTaskGroup(of: Void.self) { inFlight in
            while !Task.isCancelled && !lane.stopped.withLock({ $0 }) {
                let free = configuration.inFlightPerHook - lane.running.withLock { $0 }
                let now = clock.now.secondsSince1970
                var claimed: [ClaimedDelivery] = []
                var deadline = now + configuration.pollInterval
                do {
                    if free > 0 {
                        claimed = try await queue.claim(
                            hook: hook.name, limit: free, now: now, leaseUntil: now + configuration.lease)
                        let idle = claimed.isEmpty && free == configuration.inFlightPerHook
                        update(hook.name) { s in
                            s.claims += 1
                            s.idle = idle
                        }
                        activity.fire()
                    }
                    if claimed.count < free, let due = try await queue.nextDue(hook: hook.name, after: now) {
                        // A millisecond past it: a time read back from the clock as seconds may round
                        // under the instant it was set to, and the entry would not be due yet.
                        deadline = min(deadline, due + 0.001)
                    }
                } catch {
                    update(hook.name) { $0.queueFailures += 1 }
                    logger.warning(
                        "cannot claim events",
                        metadata: ["hook": "\(hook.name)", "error": "\(String(describing: error).prefix(300))"])
                    deadline = now + configuration.queueRetry
                }
                for claim in claimed {
                    let count = lane.running.withLock { n -> Int in
                        n += 1
                        return n
                    }
                    update(hook.name) { s in
                        s.inFlight = count
                        s.mostInFlight = max(s.mostInFlight, count)
                    }
                    inFlight.addTask {
                        await self.deliver(claim, with: kind, lane: lane)
                        let left = lane.running.withLock { n -> Int in
                            n -= 1
                            return n
                        }
                        self.update(hook.name) { $0.inFlight = left }
                        lane.signal.fire()
                        self.activity.fire()
                    }
                }
                // Room left and more was due: claim again at once.
                if !claimed.isEmpty && claimed.count == free { continue }
                await lane.signal.wait(until: EpochInstant(secondsSince1970: deadline), on: clock)
            }
            await inFlight.waitForAll()
        }
        await kind.close()
    }

    /// One attempt and its settlement.
    func deliver(_ claim: ClaimedDelivery, with kind: any DeliveryKind, lane: Lane) async {
        let answer = await kind.deliver(claim.event)
        if Task.isCancelled { return }
        let now = clock.now.secondsSince1970
        let outcome = lane.random.withLock { r in
            configuration.policy.outcome(
                of: answer, attempts: claim.attempts, queued: claim.queued, now: now, random: &r)
        }
        let settled: Bool
        do {
            settled = try await queue.settle(claim, outcome: outcome, now: now)
        } catch {
            update(claim.hook) { $0.queueFailures += 1 }
            logger.warning(
                "cannot settle a delivery; it will be claimed again when its lease ends",
                metadata: [
                    "hook": "\(claim.hook)", "event": "\(claim.event.id)",
                    "error": "\(String(describing: error).prefix(300))",
                ])
            return
        }
        guard settled else {
            update(claim.hook) { $0.lostLeases += 1 }
            logger.info(
                "a delivery's lease was taken over before its answer",
                metadata: ["hook": "\(claim.hook)", "event": "\(claim.event.id)"])
            return
        }
        switch outcome {
        case .delivered:
            update(claim.hook) { $0.delivered += 1 }
        case .retry(let at, let reason):
            update(claim.hook) { $0.retried += 1 }
            logger.debug(
                "a delivery failed; it is tried again",
                metadata: [
                    "hook": "\(claim.hook)", "event": "\(claim.event.id)", "reason": "\(reason)",
                    "wait": "\(Int(at - now)) s",
                ])
        case .dead(let reason):
            update(claim.hook) { $0.dead += 1 }
            logger.warning(
                "a delivery gave up: the event is a dead letter",
                metadata: ["hook": "\(claim.hook)", "event": "\(claim.event.id)", "reason": "\(reason)"])
        }
    }
}
