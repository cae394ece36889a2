import Formats
import Geo
import Logging
import Synchronization
import TrackStore

/// The ``OfflineDetector`` at work in a server: every stored batch goes through it to the stream
/// (``stored(_:)``: an `online` event before the record of a device that was offline), and
/// ``run()`` sleeps on the server's clock until the detector's next deadline, then publishes the
/// `offline` events due. Both publish under the detector's lock, so a device's events and records
/// reach each client in the order they happened.
///
/// The stream's events are this instance's view. The stored ones (`/v1/events`, the hooks) are the
/// store's (``EventStore/reconcilePresence(now:offlineAfter:)``, from the receipt times it keeps):
/// ``run()`` reconciles at start (a silence that crossed the delay while no instance ran is declared
/// then), at each deadline and whenever a device offline here sends (or one first seen here, once
/// the delay has passed since the start); the store keeps each
/// `offline` and `online` once by id, whichever instance, however often.
final class OfflineWatch: Sendable {
    let hub: StreamHub
    let clock: any EpochClock
    /// Where presence is stored as events (`nil`: the stream only).
    let store: (any TrackStore)?
    let logger: Logger
    let detector: Mutex<OfflineDetector>
    /// Fired when a device comes online while ``run()`` may wait for no deadline.
    let wake = Signal()
    /// A device came back (it was offline here), or one first seen may be silent for the delay in the
    /// store: ``run()`` reconciles the store's presence.
    let reconcileDue = Atomic<Bool>(false)
    /// When the devices the store knew came in (``seed(_:)``; `nil`: not yet).
    let seededAt = Mutex<EpochInstant?>(nil)
    /// Who else hears the `online` and `offline` events (the Home Assistant relay): called under the
    /// detector's lock, in the order the events happen; a handler returns quickly and never waits.
    let observers = Mutex<[@Sendable ([StreamEvent]) -> Void]>([])

    init(
        hub: StreamHub, after: Duration, clock: any EpochClock, store: (any TrackStore)? = nil,
        logger: Logger = Logger(label: "keeptrack.serve")
    ) {
        self.hub = hub
        self.clock = clock
        self.store = store
        self.logger = logger
        self.detector = Mutex(OfflineDetector(after: after))
    }

    /// One stored batch (in storage order): `online` events for the devices back, then the records.
    func stored(_ records: [TrailRecord]) {
        guard !records.isEmpty else { return }
        var devices: [String] = []
        var seen = Set<String>()
        for r in records where seen.insert(r.device).inserted { devices.append(r.device) }
        arrived(devices, records: records)
    }

    /// The devices of one stored batch whose records no client needed (each once, in storage order):
    /// `online` events for the devices back.
    func stored(devices: [String]) {
        guard !devices.isEmpty else { return }
        arrived(devices, records: [])
    }

    private func arrived(_ devices: [String], records: [TrailRecord]) {
        let now = clock.now
        let woke = detector.withLock { d -> Bool in
            var events: [StreamEvent] = []
            var woke = false
            for device in devices {
                switch d.devices[device] {
                case .online: break
                case .offline:
                    // Back: the store may have declared it offline (an `online` to store).
                    woke = true
                    reconcileDue.store(true, ordering: .relaxed)
                case nil:
                    // A device first seen had no deadline: the waiting run() learns of its new one.
                    // It was first stored after the seed (else the seed had it): the store may have
                    // it silent for the delay (this view of it late) only once the delay has passed
                    // since the seed, or when the seed is not in.
                    woke = true
                    if seededAt.withLock({ $0.map { $0.advanced(by: d.after) <= now } ?? true }) {
                        reconcileDue.store(true, ordering: .relaxed)
                    }
                }
                if let event = d.received(device: device, at: now) { events.append(event) }
            }
            announce(events)
            if !records.isEmpty { hub.publish(records) }
            return woke
        }
        if woke { wake.fire() }
    }

    /// The devices the store knew before (their latest receipt times): online or offline, no event.
    func seed(_ devices: [LatestPosition]) {
        let now = clock.now
        detector.withLock { d in
            for device in devices {
                d.seed(device: device.device, lastSeen: EpochInstant(secondsSince1970: device.lastReceived), now: now)
            }
        }
        seededAt.withLock { $0 = now }
        wake.fire()
    }

    /// Declares devices offline at their deadlines until the task is cancelled; stores presence
    /// at start, at each deadline, when a device comes back, and when a device first seen may be
    /// silent for the delay in the store (its records seen here late). Not for each device first
    /// seen: a thousand devices arriving made each instance reconcile, under the store's lock,
    /// hundreds of times during a load (docs/performance.md).
    ///
    /// The store is reconciled whenever the detector declared a device offline, whatever woke the
    /// loop: the clock may pass a deadline the loop did not wait for (a device first seen wakes it,
    /// and the clock moves on before it runs), and the device declared offline here then has no
    /// deadline left to bring the store's `offline`.
    func run() async {
        var due = true
        while !Task.isCancelled {
            if due || reconcileDue.exchange(false, ordering: .relaxed) { await reconcile() }
            await waitForDeadline(on: clock)
            let now = clock.now
            due = detector.withLock { d in
                let gone = d.expire(at: now)
                announce(gone)
                return !gone.isEmpty
            }
        }
    }

    /// Stores the `offline` and `online` events due as of now (a failure is logged: the next wake
    /// tries again, and the store's ids keep each once).
    func reconcile() async {
        guard let store else { return }
        let after = detector.withLock { $0.after }
        let seconds = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
        do {
            _ = try await store.reconcilePresence(now: clock.now.secondsSince1970, offlineAfter: seconds)
        } catch {
            guard !Task.isCancelled else { return }
            logger.error("presence: storing offline and online events failed", metadata: ["serve.error": "\(error)"])
        }
    }

    /// Calls `handler` with every batch of `online` and `offline` events from now on.
    func observe(_ handler: @escaping @Sendable ([StreamEvent]) -> Void) {
        observers.withLock { $0.append(handler) }
    }

    /// Whether `device` is online (`nil`: the detector has not seen it yet).
    func isOnline(_ device: String) -> Bool? {
        detector.withLock { d in
            switch d.devices[device] {
            case .online: true
            case .offline: false
            case nil: nil
            }
        }
    }

    /// `events` to the stream and to the observers (called under the detector's lock).
    private func announce(_ events: [StreamEvent]) {
        hub.publish(events: events)
        guard !events.isEmpty else { return }
        for handler in observers.withLock({ $0 }) { handler(events) }
    }

    /// Waits for the next deadline or a wake.
    private func waitForDeadline<C: EpochClock>(on clock: C) async {
        let deadline = detector.withLock { $0.nextDeadline }
        await wake.wait(until: deadline, on: clock)
    }
}
