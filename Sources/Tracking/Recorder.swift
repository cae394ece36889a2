import Formats
import LocationService

/// Turns the location service's events into the records a server stores: delivered locations and
/// region transitions (with the position of the location that decided them), visits and trips.
/// Significant changes, pauses, states and errors are not part of the trail.
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
        case .visit(let v, let at):
            return record(v, decidedAt: at.timestamp, device: device)
        case .trip(let t, let at):
            return record(t, decidedAt: at.timestamp, device: device)
        default:
            return nil
        }
    }
}

extension Recorder {
    /// A visit's record: at its centre, with its spread as the accuracy, at its arrival; its
    /// departure (`nil` while the device is still there) in `TrailRecord.span`.
    public static func record(_ v: Visit, decidedAt: Double?, device: String) -> TrailRecord {
        var r = TrailRecord(
            device: device, sequence: 0, kind: .visit, time: v.arrival, latitude: v.coordinate.latitude,
            longitude: v.coordinate.longitude, horizontalAccuracy: v.horizontalAccuracy)
        r.span = TrailRecord.Span(end: v.departure)
        r.decidedAt = decidedAt
        return r
    }

    /// A trip's record: at its start, at its start time; its end, distance and highest speed in
    /// `TrailRecord.span`.
    public static func record(_ t: Trip, decidedAt: Double?, device: String) -> TrailRecord {
        var r = TrailRecord(
            device: device, sequence: 0, kind: .trip, time: t.start, latitude: t.startCoordinate.latitude,
            longitude: t.startCoordinate.longitude)
        r.span = TrailRecord.Span(
            end: t.end, endLatitude: t.endCoordinate.latitude, endLongitude: t.endCoordinate.longitude,
            distance: t.distance, maximumSpeed: t.maximumSpeed)
        r.decidedAt = decidedAt
        return r
    }
}
