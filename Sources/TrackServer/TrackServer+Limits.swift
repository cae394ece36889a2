import HTTPTypes
import Hummingbird
import HummingbirdCore
import Geo
import Logging
import NIOCore
import Prometheus
import NIOHTTPTypes
import Synchronization

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

/// Answers a connection over the cap with a 503, then closes it (after the client closed its side,
/// or 2 s: closing on unread input would reset the connection and lose the answer).
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
        let body = "the server is serving its maximum of \(limit) connections; try again shortly\n"
        let head =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 5\r\n"
            + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: head + body)), promise: nil)
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

/// The body did not arrive within ``TrackServer/Configuration/bodyTimeout`` of the request head.
struct BodyTimeout: Error {}

/// Sent down a connection's pipeline by a handler that answers without reading the body (413,
/// 503): close the connection once the answer is written and the body has been read, or after
/// ``BodyTimeoutHandler/linger`` (closing with the body unread would reset the connection, and
/// the client could lose the answer).
struct CloseAfterAnswer {}

/// Gives each request's body `timeout` to arrive, from the end of its head: past it the request's
/// body fails with ``BodyTimeout`` (answered 408), and the connection closes once that answer is
/// written. Also closes connections marked ``CloseAfterAnswer``.
final class BodyTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a refused body is read and thrown away before the connection closes anyway.
    static let linger: TimeAmount = .seconds(2)

    let timeout: TimeAmount
    var timer: Scheduled<Void>?
    /// The request's body has been read to its end.
    var bodyDone = true
    /// The answer has been written.
    var answered = false
    var timedOut = false
    var closeAfterAnswer = false

    init(timeout: TimeAmount) { self.timeout = timeout }

    func schedule(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        timer?.cancel()
        let loopContext = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopContext.value
            handler.timer = nil
            if handler.answered {
                context.close(promise: nil)
            } else {
                handler.timedOut = true
                context.fireErrorCaught(BodyTimeout())
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            bodyDone = false
            answered = false
            timedOut = false
            closeAfterAnswer = false
            schedule(context, in: timeout)
        case .body:
            break
        case .end:
            timer?.cancel()
            timer = nil
            bodyDone = true
            if answered && closeAfterAnswer {
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is CloseAfterAnswer else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        closeAfterAnswer = true
        if !bodyDone { schedule(context, in: Self.linger) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        answered = true
        if timedOut || (closeAfterAnswer && bodyDone) {
            context.writeAndFlush(data, promise: promise)
            context.close(promise: nil)
            return
        }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}

/// The bytes of request bodies held in memory at once: a request reserves its declared length
/// (the largest body when it declares none) before its body is read, and what a gzip body says it
/// inflates to before inflating; past the budget it gets a 503 instead of waiting.
final class BodyBudget: Sendable {
    let capacity: Int
    let reserved = Mutex(0)
    let refusals: Prometheus.Counter

    init(capacity: Int, refusals: Prometheus.Counter) {
        self.capacity = capacity
        self.refusals = refusals
    }

    func reserve(_ bytes: Int) -> Bool {
        let ok = reserved.withLock { r in
            guard r + bytes <= capacity else { return false }
            r += bytes
            return true
        }
        if !ok { refusals.increment() }
        return ok
    }

    func release(_ bytes: Int) { reserved.withLock { $0 -= bytes } }

    var inUse: Int { reserved.withLock { $0 } }
}
