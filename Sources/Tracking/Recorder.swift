import Formats
import LocationService

/// Turns the location service's events into the records a server stores: delivered locations and
/// region transitions (with the position of the location that decided them). Significant changes,
/// pauses, states and errors are not part of the trail.
public enum Recorder {
    /// The record of `event` for `device`, or `nil` when the event is not part of the trail. The
    /// sequence is left 0: the outbox numbers records as it stores them.
    public static func record(_ event: LocationEvent, device: String) -> TrailRecord? {
        switch event {
        case .location(let l):
            return TrailRecord(device: device, sequence: 0, location: l)
        case .region(let e, let at):
            let kind: TrailRecord.Kind
            let id: String, time: Double
            switch e {
            case .enter(let i, let t): (kind, id, time) = (.enter, i, t)
            case .exit(let i, let t): (kind, id, time) = (.exit, i, t)
            case .dwell(let i, let t): (kind, id, time) = (.dwell, i, t)
            case .state: return nil
            }
            var r = TrailRecord(device: device, sequence: 0, location: at, kind: kind, region: id)
            r.time = time
            r.decidedAt = at.timestamp
            return r
        default:
            return nil
        }
    }
}
