import Lifecycle
import LocationService
import Metrics
import Synchronization

/// What the tracker counts, through swift-metrics (the program picks the backend: `keeptrack`
/// bootstraps a Prometheus registry). The uploader counts its own, in `Upload`.
final class TrackerMetrics: Sendable {
    let fixes = Counter(label: "keeptrack_fixes_total")
    let locations = Counter(label: "keeptrack_locations_delivered_total")
    let significantChanges = Counter(label: "keeptrack_significant_changes_total")
    let heartbeats = Counter(label: "keeptrack_heartbeats_total")
    let budget = Gauge(label: "keeptrack_background_time_remaining_seconds")
    let outboxDepth = Gauge(label: "keeptrack_outbox_records")
    let outboxOldest = Gauge(label: "keeptrack_outbox_oldest_age_seconds")
    let evicted = Counter(label: "keeptrack_outbox_evicted_total")
    /// When each upload target last succeeded, in the order of the settings: one gauge without
    /// labels for a single target, one with a `target` label per target when there are several (as
    /// the uploader's counters).
    let lastUpload: [Gauge]
    let states: [AppLifecycle.State: Gauge] = Dictionary(
        uniqueKeysWithValues: AppLifecycle.State.allCases.map {
            ($0, Gauge(label: "keeptrack_lifecycle_state", dimensions: [("state", $0.rawValue)]))
        })
    let filteredCounters = Mutex<[String: Counter]>([:])
    let regionEvents: [String: Counter] = Dictionary(
        uniqueKeysWithValues: ["enter", "exit", "dwell"].map {
            ($0, Counter(label: "keeptrack_region_events_total", dimensions: [("event", $0)]))
        })

    /// - Parameter uploadTargets: the names of the upload targets, in the order of the settings.
    init(uploadTargets: [String] = []) {
        let name = "keeptrack_last_upload_timestamp_seconds"
        lastUpload =
            uploadTargets.count > 1
            ? uploadTargets.map { Gauge(label: name, dimensions: [("target", $0)]) } : [Gauge(label: name)]
    }

    func filtered(_ reason: RejectReason) {
        let category = reason.category
        let counter = filteredCounters.withLock { m in
            if let c = m[category] { return c }
            let c = Counter(label: "keeptrack_fixes_filtered_total", dimensions: [("reason", category)])
            m[category] = c
            return c
        }
        counter.increment()
    }

    func state(_ s: AppLifecycle.State) {
        for (state, gauge) in states { gauge.record(state == s ? 1 : 0) }
    }

    func count(_ event: LocationEvent) {
        switch event {
        case .location: locations.increment()
        case .significantChange: significantChanges.increment()
        case .region(.enter, _): regionEvents["enter"]?.increment()
        case .region(.exit, _): regionEvents["exit"]?.increment()
        case .region(.dwell, _): regionEvents["dwell"]?.increment()
        default: break
        }
    }
}
