import Formats
import TrackStore

/// What the OwnTracks Recorder API (``TrackServer``'s `/api/0/...`) reads from any store, built on
/// the store's own queries.
extension TrackStore {
    /// The record of a device's latest position (``FleetStore/latest(device:)``): the location
    /// stored at its time, with the attributes the sender gave (`batt`, `tid`...), read with one
    /// trail query; a record made from the position alone when none is found (a transition's
    /// position).
    public func latestRecord(_ position: LatestPosition) async throws -> TrailRecord {
        // A millisecond either side: a store may round the time it keeps (PostgreSQL: microseconds).
        let page = try await trail(
            device: position.device, from: position.time - 0.001, to: position.time + 0.001,
            after: nil, limit: 64, includeInvalid: false)
        let closest = page.records.filter { $0.kind == .location }
            .min { abs($0.time - position.time) < abs($1.time - position.time) }
        if let closest { return closest }
        return TrailRecord(
            device: position.device, sequence: 1, time: position.time, latitude: position.latitude,
            longitude: position.longitude, altitude: position.altitude,
            horizontalAccuracy: position.horizontalAccuracy, speed: position.speed,
            course: position.course)
    }
}
