import Prometheus

/// What `GET /metrics` shows: swift-prometheus collectors in a registry of the server's own (several
/// servers in one process keep their counts apart), written by the same Prometheus text writer as
/// the tracker's metrics (`Tracking.Telemetry`).
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let requests: [String: Counter]
    let accepted: [String: Counter]
    let duplicates: Counter
    /// Records acknowledged but not stored, by format (``Ingest/sift(_:format:)``).
    let refused: [String: Counter]
    let rejected: Counter
    let gzipRequests: Counter
    let stored: Gauge
    let connections: Gauge
    let connectionsRefused: Counter
    let bodyBytesInFlight: Gauge
    let bodiesRefused: Counter
    /// OwnTracks encrypted messages by outcome (decrypted, malformed, no_secret, not_authentic).
    let encrypted: [String: Counter]

    init() {
        let r = registry
        requests = Dictionary(
            uniqueKeysWithValues: ["dropped", "failed", "garbage", "refused", "served"].map {
                (
                    $0,
                    r.makeCounter(
                        descriptor: Self.serve(
                            "requests", "total",
                            "Ingest requests by what the fault injection did."),
                        labels: [("outcome", $0)])
                )
            })
        accepted = Dictionary(
            uniqueKeysWithValues: ["json", "osmand", "owntracks", "overland"].map {
                (
                    $0,
                    r.makeCounter(
                        descriptor: Self.serve("records_accepted", "total", "Records stored, by format."),
                        labels: [("format", $0)])
                )
            })
        duplicates = r.makeCounter(
            descriptor: Self.serve(
                "records_duplicate", "total",
                "Records received again and not stored twice."))
        refused = Dictionary(
            uniqueKeysWithValues: ["osmand", "owntracks", "overland"].map {
                (
                    $0,
                    r.makeCounter(
                        descriptor: Self.serve(
                            "records_refused", "total",
                            "Records acknowledged but not stored: values no store keeps (a time more than "
                                + "a day ahead), by format."),
                        labels: [("format", $0)])
                )
            })
        rejected = r.makeCounter(descriptor: Self.serve("requests_rejected", "total", "Requests answered 400."))
        gzipRequests = r.makeCounter(descriptor: Self.serve("gzip_requests", "total", "Requests with a gzip body."))
        stored = r.makeGauge(descriptor: Self.serve("records_stored", "", "Records in the store."))
        connections = r.makeGauge(descriptor: Self.serve("connections", "", "Connections being served."))
        connectionsRefused = r.makeCounter(
            descriptor: Self.serve(
                "connections_refused", "total",
                "Connections answered 503 at the connection cap."))
        bodyBytesInFlight = r.makeGauge(
            descriptor: Self.serve(
                "body_bytes_in_flight", "",
                "Request body bytes reserved in memory."))
        bodiesRefused = r.makeCounter(
            descriptor: Self.serve(
                "bodies_refused", "total",
                "Requests answered 503 over the bodies-in-flight budget."))
        encrypted = Dictionary(
            uniqueKeysWithValues: ["decrypted", "malformed", "no_secret", "not_authentic"].map {
                (
                    $0,
                    r.makeCounter(
                        descriptor: Self.serve(
                            "encrypted", "total",
                            "OwnTracks encrypted messages, by outcome (all but decrypted "
                                + "refused, nothing stored)."),
                        labels: [("outcome", $0)])
                )
            })
    }

    func encrypted(_ outcome: String) { encrypted[outcome]?.increment() }

    /// `keeptrack_serve_NAME_UNIT` (no `_UNIT` when `unit` is empty), with its `# HELP` text.
    private static func serve(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keeptrack", subsystem: "serve", metricName: name, unitName: unit,
            helpText: help)
    }

    func request(_ d: Faults.Decision) {
        let name =
            switch d {
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

    func refused(_ n: Int, format: String) { refused[format]?.increment(by: Int64(n)) }

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
