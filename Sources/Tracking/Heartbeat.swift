import Geo

/// When a stationary device's latest location is recorded again (the heartbeat): while the
/// fixes that keep coming are held back because the device does not move (the distance filter, a
/// pause at a stop), the latest location goes again every ``interval`` seconds at the time then, so
/// that a server sees a parked device as online.
///
/// A value type driven by the tracker's clock, with no I/O and no clock of its own: the owner passes
/// each delivered location and each fix held back with the time of its clock, and records the
/// location a ``Action/beat(_:)`` names at that time. Nothing beats before a first location was
/// delivered, nor while standard updates do not run (the app suspended, updates stopped).
public struct Heartbeat: Sendable, Hashable {
    public enum State: Sendable, Hashable {
        /// No location delivered yet: nothing to repeat.
        case waiting
        /// `latest` is the location to repeat, next at `due` (seconds since 1970).
        case scheduled(latest: Location, due: Double)
    }

    public enum Event: Sendable, Hashable {
        /// A location was delivered (recorded) at `now`: the next heartbeat is a full interval later.
        case delivered(Location, now: Double)
        /// Standard updates paused at `location` (the device stopped): it becomes the one repeated;
        /// the next heartbeat stays due when it was.
        case paused(Location)
        /// A fix was taken at `now` and nothing was delivered: the distance filter held it back or
        /// updates are paused (`updating`), or updates do not run at all (not `updating`: suspended,
        /// stopped), when no heartbeat goes.
        case heldBack(now: Double, updating: Bool)
    }

    public enum Action: Sendable, Hashable {
        case none
        /// Record `location` again, at the time of the event (its `Location.timestamp` is the
        /// time it was taken).
        case beat(Location)
    }

    /// Seconds between two records of a stationary device.
    public let interval: Double
    public private(set) var state = State.waiting

    /// - Parameter interval: seconds between two records of a stationary device, more than 0.
    public init(interval: Double) {
        precondition(interval > 0 && interval.isFinite, "a heartbeat's interval is more than 0 s")
        self.interval = interval
    }

    /// What to do after `event`.
    public mutating func event(_ event: Event) -> Action {
        switch (state, event) {
        case (_, .delivered(let l, let now)):
            state = .scheduled(latest: l, due: now + interval)
            return .none
        case (.waiting, .paused), (.waiting, .heldBack):
            return .none
        case (.scheduled(_, let due), .paused(let l)):
            state = .scheduled(latest: l, due: due)
            return .none
        case (.scheduled(let latest, let due), .heldBack(let now, let updating)):
            guard updating, now >= due else { return .none }
            // From this heartbeat on: a hole in the fixes gives one heartbeat, not a burst.
            state = .scheduled(latest: latest, due: now + interval)
            return .beat(latest)
        }
    }
}
