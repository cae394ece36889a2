import Geo
import Logging
import NIOCore
import NIOHTTP1
import Prometheus
import ServiceLifecycle
import SystemIO

/// Tells the ``ConnectionGate`` what a connection is doing: a complete request head read (busy), the
/// end of an answer written (idle once every request is answered), a `101 Switching Protocols`
/// written (upgraded: a WebSocket is not an idle HTTP connection). It sits right after the HTTP/1
/// request decoder, in the plain pipeline and in an upgradable one alike (where the handlers after
/// the decoder are only added once a request is known not to upgrade), and passes everything on
/// unchanged: after an upgrade it sees bytes, which it ignores.
final class ConnectionActivityHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Any
    typealias InboundOut = Any
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    let id: ConnectionShedder.ID
    let gate: ConnectionGate

    init(id: ConnectionShedder.ID, gate: ConnectionGate) {
        self.id = id
        self.gate = gate
    }

    /// Adds one to `channel`'s pipeline after its HTTP/1 request decoder; a pipeline without one
    /// (not HTTP/1) is exempt from shedding and the first-request timeout, as an upgraded one is.
    static func add(to channel: any Channel, id: ConnectionShedder.ID, gate: ConnectionGate) {
        let pipeline = channel.pipeline.syncOperations
        guard let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self),
            (try? pipeline.addHandler(ConnectionActivityHandler(id: id, gate: gate), position: .after(decoder)))
                != nil
        else {
            gate.upgraded(id)
            return
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let part = unwrapInboundIn(data) as? HTTPServerRequestPart, case .head = part {
            gate.requestHead(id)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if let part = unwrapOutboundIn(data) as? HTTPServerResponsePart {
            switch part {
            case .head(let head) where head.status == .switchingProtocols: gate.leftForStream(id)
            case .end: gate.answered(id)
            case .head, .body: break
            }
        }
        context.write(data, promise: promise)
    }
}

/// Closes connections whose first-request timeout ran out (``ConnectionGate/sweep()``), beside the
/// HTTP server in its service group, until the group stops.
struct ConnectionSweeper: Service {
    let gate: ConnectionGate

    func run() async throws {
        let gate = self.gate
        await cancelWhenGracefulShutdown { await gate.sweep() }
    }
}

/// The connection metrics of `GET /metrics` beside ``ServerMetrics``'s (open connections and
/// refusals are there).
final class ConnectionMetrics: Sendable {
    let cap: Prometheus.Gauge
    let descriptorLimit: Prometheus.Gauge
    let shedAwaitingHead: Prometheus.Counter
    let shedIdle: Prometheus.Counter
    let firstRequestTimeouts: Prometheus.Counter

    init(registry: PrometheusCollectorRegistry) {
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "keeptrack", subsystem: "serve", metricName: metric, unitName: unit, helpText: help)
        }
        cap = registry.makeGauge(
            descriptor: name("connections_max", "", "The connection cap (sized from the descriptor limit by default)."))
        descriptorLimit = registry.makeGauge(
            descriptor: name("descriptor_limit", "", "The soft descriptor limit (RLIMIT_NOFILE) the server runs with."))
        let shed = name(
            "connections_shed", "total",
            "Connections closed at the cap to make room, by state: no complete request head yet, or idle.")
        shedAwaitingHead = registry.makeCounter(descriptor: shed, labels: [("state", "awaiting_head")])
        shedIdle = registry.makeCounter(descriptor: shed, labels: [("state", "idle")])
        firstRequestTimeouts = registry.makeCounter(
            descriptor: name(
                "first_request_timeouts", "total",
                "Connections closed without a complete request head within the first-request timeout."))
    }
}

extension TrackServer.Configuration {
    /// Descriptors kept for everything but client connections: the listening socket, the store's
    /// files or connections, the event loops' epoll and wake descriptors, logs, an MQTT connection.
    public static let reservedDescriptors = 128

    /// The largest connection cap sized from the descriptor limit (each connection holds memory
    /// too).
    public static let largestAutomaticCap = 16_384

    /// The connection cap when ``maxConnections`` is nil, for a soft descriptor limit of
    /// `descriptors`: what is left after ``reservedDescriptors``, less the connections being
    /// answered 503 at once (a quarter of the cap, at least 64), at most ``largestAutomaticCap``.
    /// 716 for 1,024 descriptors; 15,897 for 20,000.
    public static func connectionCap(descriptors: Int) -> Int {
        let available = min(descriptors, 1 << 30) - reservedDescriptors
        return max(1, min(largestAutomaticCap, available * 4 / 5, available - 64))
    }
}

extension TrackServer {
    /// Raises the soft descriptor limit to the hard one when ``Configuration/raiseDescriptorLimit``,
    /// logs both, and sets the connection cap: ``Configuration/maxConnections``, or sized from the
    /// soft limit. Returns the cap.
    func prepareConnectionLimits() -> Int {
        let limits: (before: DescriptorLimit, after: DescriptorLimit)?
        if configuration.raiseDescriptorLimit {
            limits = DescriptorLimit.raiseSoftToHard()
        } else {
            limits = DescriptorLimit.current().map { ($0, $0) }
        }
        let soft = limits?.after.soft ?? 1024
        let cap = configuration.maxConnections ?? Configuration.connectionCap(descriptors: soft)
        gate.configure(cap: cap)
        gate.metrics.descriptorLimit.set(Int64(min(soft, Int(Int64.max))))
        func text(_ n: Int?) -> Logger.MetadataValue { n.map { $0 == Int.max ? "unlimited" : "\($0)" } ?? "unknown" }
        logger.info(
            "descriptor limit",
            metadata: [
                "serve.fd.soft.before": text(limits?.before.soft), "serve.fd.soft": text(limits?.after.soft),
                "serve.fd.hard": text(limits?.after.hard), "serve.connections.max": "\(cap)",
            ])
        if cap + max(64, cap / 4) > soft - Configuration.reservedDescriptors {
            logger.warning(
                "the connection cap leaves too few descriptors: accepting may fail before the cap",
                metadata: ["serve.connections.max": "\(cap)", "serve.fd.soft": text(soft)])
        }
        return cap
    }
}
