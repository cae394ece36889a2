import Formats
import Geo
import LocationService
import Upload

/// What a tracker keeps for its ``Heartbeat`` (``Tracker/Configuration/heartbeat``).
struct HeartbeatState {
    /// The decision; `nil` when heartbeats are off.
    var schedule: Heartbeat?
    /// A fix went to the location service and its decisions are not settled yet.
    var fixPending = false
    /// Standard updates rejected that fix (no position, stale, an outlier, inaccurate): not a fix
    /// held back because the device does not move.
    var fixRejected = false

    init(interval: Double?) { schedule = interval.map { Heartbeat(interval: $0) } }
}

extension TrackerCore {
    /// A fix goes to the location service (``GatedSource``).
    func heartbeatFixAdmitted() {
        guard configuration.heartbeat != nil else { return }
        heartbeat.withLock { ($0.fixPending, $0.fixRejected) = (true, false) }
    }

    /// Standard updates rejected the fix being decided.
    func heartbeatFixRejected() {
        guard configuration.heartbeat != nil else { return }
        heartbeat.withLock { $0.fixRejected = true }
    }

    /// A fix's events: delivered locations restart the interval, a pause sets the location repeated.
    func heartbeatObserve(_ events: [LocationEvent]) {
        guard configuration.heartbeat != nil else { return }
        let t = now()
        heartbeat.withLock { h in
            for event in events {
                switch event {
                case .location(let l), .resumed(let l): _ = h.schedule?.event(.delivered(l, now: t))
                case .paused(let l): _ = h.schedule?.event(.paused(l))
                default: break
                }
            }
        }
    }

    /// Once the last fix's decisions are settled: when it was held back and a heartbeat is due, the
    /// latest location is recorded again at the time now (durable before delivered, as a fix's
    /// records are) and reported.
    func heartbeatAfterFix() throws {
        // Off (the default): nothing on the hot path but this test.
        guard configuration.heartbeat != nil else { return }
        let held = heartbeat.withLock { h -> Bool in
            defer { h.fixPending = false }
            return h.fixPending && !h.fixRejected
        }
        guard held else { return }
        let updating = app.state != .suspended && manager.isUpdatingLocation && configuration.standardUpdates != nil
        let t = now()
        let action = heartbeat.withLock { $0.schedule!.event(.heldBack(now: t, updating: updating)) }
        guard case .beat(var location) = action else { return }
        location.timestamp = t
        metrics.heartbeats.increment()
        if let outbox {
            let record = TrailRecord(device: outbox.device, sequence: 0, location: location, kind: .heartbeat)
            let due = unsaved.withLock { group -> Bool in
                _ = group.add(record, at: t)
                return group.isDue(at: t)
            }
            if due {
                try commitRecords()
            } else if configuration.deadlineTimer {
                timer.fire()
            }
        }
        try sink.receive(.heartbeat(location))
    }
}
