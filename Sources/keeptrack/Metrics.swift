import Lifecycle
import LocationService
import Metrics
import Prometheus

typealias Counter = Metrics.Counter
typealias Gauge = Metrics.Gauge
import Synchronization

/// The process's metrics registry: swift-metrics everywhere, Prometheus text out
/// (`keeptrack status`, the control socket's `metrics`).
let metricsRegistry = PrometheusCollectorRegistry()

func bootstrapMetrics() {
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metricsRegistry))
}

/// The registry in Prometheus text format.
func prometheusText() -> String {
    var bytes: [UInt8] = []
    metricsRegistry.emit(into: &bytes)
    return String(decoding: bytes, as: UTF8.self)
}

/// What the pipeline counts (the uploader counts its own, in `Upload`).
final class PipelineMetrics: Sendable {
    let fixes = Counter(label: "keeptrack_fixes_total")
    let locations = Counter(label: "keeptrack_locations_delivered_total")
    let significantChanges = Counter(label: "keeptrack_significant_changes_total")
    let budget = Gauge(label: "keeptrack_background_time_remaining_seconds")
    let outboxDepth = Gauge(label: "keeptrack_outbox_records")
    let outboxOldest = Gauge(label: "keeptrack_outbox_oldest_age_seconds")
    let evicted = Counter(label: "keeptrack_outbox_evicted_total")
    let lastUpload = Gauge(label: "keeptrack_last_upload_timestamp_seconds")
    let states: [AppLifecycle.State: Gauge] = Dictionary(uniqueKeysWithValues: AppLifecycle.State.allCases.map {
        ($0, Gauge(label: "keeptrack_lifecycle_state", dimensions: [("state", $0.rawValue)]))
    })
    let filteredCounters = Mutex<[String: Counter]>([:])
    let regionEvents: [String: Counter] = Dictionary(uniqueKeysWithValues: ["enter", "exit", "dwell"].map {
        ($0, Counter(label: "keeptrack_region_events_total", dimensions: [("event", $0)]))
    })

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
}
