import HTTPTypes
import Hummingbird
import HummingbirdCore
import Geo
import Logging
import NIOCore
import Prometheus
import NIOHTTPTypes
import Synchronization
import ServiceLifecycle
import SystemIO

/// The connections being served, and which to close at the cap: the owner of a
/// ``ConnectionShedder`` (the decision) that performs its actions on the channels. At the cap a new
/// connection takes the place of the oldest one without a complete request head, else of the one
/// idle the longest; only when every connection is busy (or upgraded) is it answered 503. A
/// connection without a complete first request head within the first-request timeout is closed by
/// ``sweep()``, on the server's clock.
final class ConnectionGate: Sendable {
    struct State {
        var shedder: ConnectionShedder
        var channels: [ConnectionShedder.ID: any Channel] = [:]
    }

    let state: Mutex<State>
    let clock: any EpochClock
    let metrics: ConnectionMetrics
    let refusals: Prometheus.Counter
    /// Fired when the earliest first-request deadline appears (``sweep()`` waits for it).
    let wake = Signal()

    init(settings: ConnectionShedder.Settings, clock: any EpochClock, metrics: ServerMetrics) {
        self.state = Mutex(State(shedder: ConnectionShedder(settings: settings)))
        self.clock = clock
        self.metrics = ConnectionMetrics(registry: metrics.registry)
        self.refusals = metrics.connectionsRefused
    }

    /// The cap: the most connections kept at once.
    var limit: Int { state.withLock { $0.shedder.settings.cap } }

    /// The connections open now.
    var served: Int { state.withLock { $0.shedder.count } }

    /// Sets the cap (before the server listens: it is sized from the descriptor limit then).
    func configure(cap: Int) {
        state.withLock { $0.shedder.settings.cap = max(1, cap) }
        metrics.cap.set(Int64(max(1, cap)))
    }

    /// Takes a place for `channel`, closing a connection to make room at the cap; nil: refuse it.
    func admit(_ channel: any Channel) -> ConnectionShedder.ID? {
        let now = clock.now
        let (action, shed) = state.withLock { s -> (ConnectionShedder.OpenAction, (any Channel)?) in
            let action = s.shedder.opened(at: now)
            guard case .admit(let id, let shedID, _, _) = action else { return (action, nil) }
            s.channels[id] = channel
            return (action, shedID.flatMap { s.channels.removeValue(forKey: $0) })
        }
        switch action {
        case .admit(let id, _, let reason, let armTimer):
            if let shed {
                shed.close(promise: nil)
                (reason == .idle ? metrics.shedIdle : metrics.shedAwaitingHead).increment()
            }
            if armTimer { wake.fire() }
            return id
        case .refuse:
            refusals.increment()
            return nil
        }
    }

    func requestHead(_ id: ConnectionShedder.ID) { state.withLock { $0.shedder.requestHead(id) } }

    func answered(_ id: ConnectionShedder.ID) {
        let now = clock.now
        state.withLock { $0.shedder.answered(id, at: now) }
    }

    func upgraded(_ id: ConnectionShedder.ID) { state.withLock { $0.shedder.upgraded(id) } }

    /// `id` answered its upgrade (101): a WebSocket now, it leaves the HTTP connection cap for the
    /// streams' own (``StreamHub``, `maxClients`), so that streams can never fill the cap that plain
    /// requests and `/healthz` need. Its close (``closed(_:)``) then finds nothing to forget.
    func leftForStream(_ id: ConnectionShedder.ID) {
        state.withLock { s in
            s.shedder.closed(id)
            s.channels[id] = nil
        }
    }

    func closed(_ id: ConnectionShedder.ID) {
        state.withLock { s in
            s.shedder.closed(id)
            s.channels[id] = nil
        }
    }

    /// Closes the connections whose first-request timeout ran out, as they run out, until cancelled.
    func sweep() async {
        while !Task.isCancelled {
            let deadline = state.withLock { $0.shedder.nextDeadline() }
            await wait(until: deadline, on: clock)
            let now = clock.now
            let expired = state.withLock { s in
                s.shedder.expire(at: now).compactMap { s.channels.removeValue(forKey: $0) }
            }
            for channel in expired { channel.close(promise: nil) }
            if !expired.isEmpty { metrics.firstRequestTimeouts.increment(by: Int64(expired.count)) }
        }
    }

    private func wait<C: EpochClock>(until deadline: EpochInstant?, on clock: C) async {
        await wake.wait(until: deadline, on: clock)
    }
}

/// A child channel that serves at most ``ConnectionGate/limit`` connections at once with `Base`
/// (shedding idle ones and ones without a complete request head to make room); a connection over the
/// cap with nothing to shed gets `503 Service Unavailable` with `Retry-After` (plain HTTP) or is
/// closed at once (TLS: there is no one to answer in clear), and never reaches Hummingbird.
struct CappedChannel<Base: ServerChildChannel>: ServerChildChannel {
    enum Value: ServerChildChannelValue {
        case served(Base.Value)
        case refused(any Channel)

        var channel: any Channel {
            switch self {
            case .served(let value): value.channel
            case .refused(let channel): channel
            }
        }
    }

    let base: Base
    let gate: ConnectionGate
    let answerInClear: Bool

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let id = gate.admit(channel) {
            let gate = self.gate
            channel.closeFuture.whenComplete { _ in gate.closed(id) }
            return base.setup(channel: channel, logger: logger).map { value in
                ConnectionActivityHandler.add(to: channel, id: id, gate: gate)
                return .served(value)
            }
        }
        logger.debug("connection refused: at the connection cap", metadata: ["serve.connections": "\(gate.limit)"])
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                RefuseHandler(limit: gate.limit, answerInClear: answerInClear))
            return .refused(channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        switch value {
        case .served(let value): await base.handle(value: value, logger: logger)
        case .refused(let channel): try? await channel.closeFuture.get()
        }
    }
}

/// Answers a connection over the cap with a 503 (``ErrorAnswer``'s body, `Retry-After: 5`), then closes
/// it (after the client closed its side, or 2 s: closing on unread input would reset the connection
/// and lose the answer).
final class RefuseHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let limit: Int
    let answerInClear: Bool
    var answered = false
    var linger: Scheduled<Void>?

    init(limit: Int, answerInClear: Bool) {
        self.limit = limit
        self.answerInClear = answerInClear
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answer(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        answer(context)
        context.fireChannelActive()
    }

    func answer(_ context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        guard answerInClear else {
            context.close(promise: nil)
            return
        }
        let answer = ErrorAnswer(
            .serviceUnavailable,
            message: "the server is serving its maximum of \(limit) connections; try again shortly")
        context.writeAndFlush(
            NIOAny(context.channel.allocator.buffer(bytes: answer.wire(headers: [("Retry-After", "5")]))), promise: nil)
        context.close(mode: .output, promise: nil)
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        linger = context.eventLoop.scheduleTask(in: .seconds(2)) { loopContext.value.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        linger?.cancel()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
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

extension ConnectionGate {
    /// Raises the soft descriptor limit to the hard one when `raise`, logs both, and sets the
    /// connection cap: `maxConnections`, or sized from the soft limit
    /// (``TrackServer/Configuration/connectionCap(descriptors:)``). Returns the cap.
    func prepare(maxConnections: Int?, raiseDescriptorLimit raise: Bool, logger: Logger) -> Int {
        let limits: (before: DescriptorLimit, after: DescriptorLimit)?
        if raise {
            limits = DescriptorLimit.raiseSoftToHard()
        } else {
            limits = DescriptorLimit.current().map { ($0, $0) }
        }
        let soft = limits?.after.soft ?? 1024
        let cap = maxConnections ?? TrackServer.Configuration.connectionCap(descriptors: soft)
        configure(cap: cap)
        metrics.descriptorLimit.set(Int64(min(soft, Int(Int64.max))))
        func text(_ n: Int?) -> Logger.MetadataValue { n.map { $0 == Int.max ? "unlimited" : "\($0)" } ?? "unknown" }
        logger.info(
            "descriptor limit",
            metadata: [
                "serve.fd.soft.before": text(limits?.before.soft), "serve.fd.soft": text(limits?.after.soft),
                "serve.fd.hard": text(limits?.after.hard), "serve.connections.max": "\(cap)",
            ])
        if cap + max(64, cap / 4) > soft - TrackServer.Configuration.reservedDescriptors {
            logger.warning(
                "the connection cap leaves too few descriptors: accepting may fail before the cap",
                metadata: ["serve.connections.max": "\(cap)", "serve.fd.soft": text(soft)])
        }
        return cap
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
