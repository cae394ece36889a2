import Metrics
import Prometheus

/// The process's metrics: swift-metrics everywhere (the tracker's counters, the uploader's), one
/// Prometheus registry behind them, read as Prometheus text by the control socket's `metrics` and
/// `keeptrack status`.
public enum Telemetry {
    /// The registry ``bootstrap()`` installs.
    public static let registry = PrometheusCollectorRegistry()

    /// Makes swift-metrics report into ``registry`` (once per process, before any metric is made).
    public static func bootstrap() {
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
    }

    /// The registry in Prometheus text format.
    @Sendable public static func prometheusText() -> String {
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
