import Formats
import Geo
import LocationService

extension TrailRecord {
    /// `records` with each location's position smoothed (``TrackSmoother``: the Kalman filter and
    /// Rauch–Tung–Striebel smoother the trip figures use), for display and export
    /// (`GET .../trail?smooth=kalman`, `keeptrack export --smooth`): a location's latitude and longitude
    /// become its smoothed position and its speed and course the smoothed velocity's; everything else
    /// (the records that are not locations, locations marked outliers, whose positions are left out
    /// of the smoothing) is as stored. Raw positions stay the default everywhere.
    ///
    /// - Complexity: O(n), a few dozen multiplications a location.
    public static func smoothed(_ records: [TrailRecord]) -> [TrailRecord] {
        var indices: [Int] = []
        var samples: [VisitDetector.Sample] = []
        var lastTime = -Double.infinity
        for (i, r) in records.enumerated() where r.kind == .location && r.outlier == nil && r.time > lastTime {
            // The smoother takes fixes in time order (a trail's are; a repeated time is left as it is),
            // and not what the outlier filter marks on its own (a trail of a store not yet marked).
            let sample = VisitDetector.Sample(
                time: r.time, coordinate: Coordinate(latitude: r.latitude, longitude: r.longitude),
                horizontalAccuracy: r.horizontalAccuracy ?? -1, speed: r.speed ?? -1)
            guard r.time.isFinite, OutlierFilter.reason(for: sample, configuration: .init()) == nil else { continue }
            lastTime = r.time
            indices.append(i)
            samples.append(sample)
        }
        let points = TrackSmoother.smooth(samples)
        var out = records
        for (i, p) in zip(indices, points) {
            out[i].latitude = p.coordinate.latitude
            out[i].longitude = p.coordinate.longitude
            out[i].speed = p.speed
            out[i].course = p.course >= 0 ? p.course : out[i].course
        }
        return out
    }
}
