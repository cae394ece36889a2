import Geo

/// Declares a device offline when nothing of it arrived for ``after``, and online again when a record
/// of it arrives (the live stream's `offline` and `online` events, docs/live.md). A value fed the
/// times things happened, on the server's clock: it reads no clock and waits for nothing; its owner
/// sleeps until ``nextDeadline`` and calls ``expire(at:)``.
///
/// Silence is counted from receipt (when the endpoint got a device's record), not from the record's
/// own time: a phone uploading its backlog late is online when it uploads.
struct OfflineDetector: Sendable {
    enum State: Hashable, Sendable {
        case online(lastSeen: EpochInstant)
        case offline(lastSeen: EpochInstant)

        var lastSeen: EpochInstant {
            switch self {
            case .online(let t), .offline(let t): t
            }
        }
    }

    /// How long a device may be silent before it is declared offline.
    let after: Duration
    /// Each device seen, by id.
    private(set) var devices: [String: State] = [:]

    init(after: Duration) { self.after = after }

    /// A device the store knew before the detector ran, last received at `lastSeen`: online if that
    /// is within ``after`` of `now`, else already offline (no event either way). A device already
    /// known (a record arrived meanwhile) is left as it is.
    mutating func seed(device: String, lastSeen: EpochInstant, now: EpochInstant) {
        guard devices[device] == nil else { return }
        devices[device] =
            lastSeen.advanced(by: after) > now ? .online(lastSeen: lastSeen) : .offline(lastSeen: lastSeen)
    }

    /// A record of `device` arrived at `now`: an `online` event when the device was offline.
    mutating func received(device: String, at now: EpochInstant) -> StreamEvent? {
        let before = devices.updateValue(.online(lastSeen: now), forKey: device)
        guard case .offline = before else { return nil }
        return StreamEvent(device: device, kind: .online(time: now.secondsSince1970))
    }

    /// The devices silent for ``after`` or longer at `now`, declared offline now, the longest silent
    /// first.
    mutating func expire(at now: EpochInstant) -> [StreamEvent] {
        let due = devices.compactMap { id, state -> (String, EpochInstant)? in
            guard case .online(let seen) = state, seen.advanced(by: after) <= now else { return nil }
            return (id, seen)
        }
        .sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        return due.map { id, seen in
            devices[id] = .offline(lastSeen: seen)
            return StreamEvent(
                device: id, kind: .offline(time: now.secondsSince1970, lastSeen: seen.secondsSince1970))
        }
    }

    /// When the next online device goes offline if nothing of it arrives; `nil` when none is online.
    var nextDeadline: EpochInstant? {
        devices.values.compactMap { state -> EpochInstant? in
            guard case .online(let seen) = state else { return nil }
            return seen.advanced(by: after)
        }.min()
    }
}
