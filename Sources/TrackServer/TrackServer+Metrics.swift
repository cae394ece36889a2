import Prometheus

/// What `GET /metrics` shows: swift-prometheus collectors in a registry of the server's own (several
/// servers in one process keep their counts apart), written by the same Prometheus text writer as
/// the tracker's metrics (`Tracking.Telemetry`).
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let requests: [String: Counter]
    let accepted: [String: Counter]
    let duplicates: Counter
    let rejected: Counter
    let gzipRequests: Counter
    let stored: Gauge
    let connections: Gauge
    let connectionsRefused: Counter
    let bodyBytesInFlight: Gauge
    let bodiesRefused: Counter

    init() {
        let r = registry
        requests = Dictionary(uniqueKeysWithValues: ["dropped", "failed", "garbage", "refused", "served"].map {
            ($0, r.makeCounter(name: "keeptrack_serve_requests_total", labels: [("outcome", $0)],
                               help: "Ingest requests by what the fault injection did."))
        })
        accepted = Dictionary(uniqueKeysWithValues: ["json", "osmand", "owntracks"].map {
            ($0, r.makeCounter(name: "keeptrack_serve_records_accepted_total", labels: [("format", $0)],
                               help: "Records stored, by format."))
        })
        duplicates = r.makeCounter(name: "keeptrack_serve_records_duplicate_total",
                                   help: "Records received again and not stored twice.")
        rejected = r.makeCounter(name: "keeptrack_serve_requests_rejected_total", help: "Requests answered 400.")
        gzipRequests = r.makeCounter(name: "keeptrack_serve_gzip_requests_total", help: "Requests with a gzip body.")
        stored = r.makeGauge(name: "keeptrack_serve_records_stored", help: "Records in the store.")
        connections = r.makeGauge(name: "keeptrack_serve_connections", help: "Connections being served.")
        connectionsRefused = r.makeCounter(name: "keeptrack_serve_connections_refused_total",
                                           help: "Connections answered 503 at the connection cap.")
        bodyBytesInFlight = r.makeGauge(name: "keeptrack_serve_body_bytes_in_flight",
                                        help: "Request body bytes reserved in memory.")
        bodiesRefused = r.makeCounter(name: "keeptrack_serve_bodies_refused_total",
                                      help: "Requests answered 503 over the bodies-in-flight budget.")
    }

    func request(_ d: Faults.Decision) {
        let name = switch d {
        case .refuse: "refused"
        case .fail: "failed"
        case .drop: "dropped"
        case .garbage: "garbage"
        case .serve: "served"
        }
        requests[name]?.increment()
    }

    func stored(_ n: Int, duplicates d: Int, format: String) {
        accepted[format]?.increment(by: Int64(n))
        duplicates.increment(by: Int64(d))
    }

    func rejected(_ n: Int) { rejected.increment(by: Int64(n)) }

    /// The registry as Prometheus text, the gauges set to `stored`, `connections` and
    /// `bodyBytesInFlight` first.
    func prometheus(stored count: Int, connections open: Int, bodyBytesInFlight bytes: Int) -> String {
        stored.set(Int64(count))
        connections.set(Int64(open))
        bodyBytesInFlight.set(Int64(bytes))
        var out: [UInt8] = []
        registry.emit(into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
