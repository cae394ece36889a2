import Formats
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import ServiceLifecycle
import TrackStore

/// The live stream, `GET /v1/stream` upgraded to a WebSocket (docs/live.md):
/// `{"type":"snapshot","devices":[...]}` first (each visible device's latest position), then
/// `{"type":"record","device":ID,"record":{...}}` for every record stored after it, in storage order,
/// whatever route stored it. Credentials as the rest of the API (`Authorization: Bearer`, or `?token=`
/// since browsers cannot set headers on a WebSocket); `?device=ID` narrows. A refused stream is
/// upgraded and closed at once with a code and a reason a browser can read: 1008 (no or a wrong
/// token, another device's id), 1013 (at ``StreamSettings/maxClients``). A client whose queue overflows
/// (it does not read) is closed with 1008.
extension TrackServer {
    /// The live stream's limits.
    public struct StreamSettings: Sendable, Hashable {
        /// The most stream clients at once (apart from ``Configuration/maxConnections``: an upgraded
        /// connection leaves that count). The default is 4,096.
        public var maxClients = 4096
        /// The messages queued for one client before it is closed (1008). The default is 1,000.
        public var maxQueuedMessages = 1000
        /// The bytes queued for one client before it is closed (1008). The default is 1 MiB.
        public var maxQueuedBytes = 1 << 20
        /// How often a ping goes to each client. The default is 30 seconds.
        public var pingInterval: Duration = .seconds(30)
        /// After how long without a record a device is declared offline (an `offline` event; `online`
        /// when it sends again), on the server's clock. The default is 10 minutes.
        public var offlineAfter: Duration = .seconds(600)

        public init() {}
    }

    /// The path of the stream.
    static let streamPath = "/v1/stream"

    /// The HTTP/1 channel of every connection: routes as before, and the stream's upgrade.
    func httpChannel(
        _ responder: @escaping HTTPChannelHandler.Responder,
        _ http1: HTTP1Channel.Configuration
    ) -> StreamUpgradableChannel {
        let ws = WebSocketServerConfiguration(
            maxFrameSize: 1 << 14, autoPing: .enabled(timePeriod: configuration.stream.pingInterval))
        let base = HTTP1WebSocketUpgradeChannel(responder: responder, configuration: .init(http1: http1, ws: ws)) {
            [self] head, channel, logger in
            try await streamUpgrade(head, channel: channel, logger: logger)
        }
        return StreamUpgradableChannel(base: base, idleTimeout: http1.idleTimeout)
    }

    /// Why a stream is closed as soon as it opens.
    struct StreamRefusal: Error, Sendable {
        var code: WebSocketErrorCode
        var reason: String
        /// Whether the request presented no credential at all to a route that a browser opens with the
        /// HTTP Basic credentials it holds (`/ws/last`): it is answered 401 with `WWW-Authenticate`, not
        /// upgraded, so that the browser sends them (it does not before it is challenged, unless the
        /// path is below the one they were first asked for).
        var challenge = false
    }

    /// What a stream client sees.
    struct StreamScope: Sendable, Equatable {
        /// The only device it sees (`nil`: all, or ``user``'s).
        var device: String?
        /// When ``device`` is `nil`, the OwnTracks Recorder user whose devices it sees (`/ws/last?user=U`).
        var user: String?
    }

    /// Who may see what on a stream request, or why not.
    func streamAccess(_ head: HTTPRequest) async throws -> Result<StreamScope, StreamRefusal> {
        let uri = URI(head.path ?? "/")
        let q = uri.queryParameters
        let wanted: String?
        var user: String?
        if uri.path == Self.recorderLivePath {
            let u = q["user"].map(String.init), d = q["device"].map(String.init)
            wanted = try await recorderLiveDevice(user: u, device: d)
            // The Recorder's `?user=U` alone: that user's devices (its `last_users` for LAST, and the
            // intent of its `http_ws_push_json` for what follows).
            if let u, !u.isEmpty, d?.isEmpty ?? true { user = u }
        } else {
            wanted = q["device"].flatMap { $0.isEmpty ? nil : String($0) }
        }
        // /ws/last is opened by web apps of other origins (the OwnTracks Frontend) that may hold HTTP
        // Basic credentials for this one: only the CORS origins (or this one) may use them.
        if uri.path == Self.recorderLivePath, let origin = head.headerFields[.origin] {
            let origins = configuration.corsOrigins
            // This server's own origin: its host (and port, when the origin says one).
            let from = origin.split(separator: "//", maxSplits: 1).last.map(String.init) ?? origin
            let authority = head.authority ?? ""
            let same = from == authority || from == authority.split(separator: ":").first.map(String.init)
            if !(same || origins.contains("*") || origins.contains(origin)) {
                return .failure(StreamRefusal(code: .policyViolation, reason: "forbidden: an origin not allowed"))
            }
        }
        var identity = Identity.admin
        let credentials = try await store.hasCredentials()
        if configuration.token != nil || credentials {
            let authorization = head.headerFields[.authorization]
            let bearer = authorization.flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
            let basic = authorization.flatMap {
                $0.hasPrefix("Basic ") ? AccessMiddleware.basicCredential(String($0.dropFirst(6))) : nil
            }
            let query = q["token"].map(String.init)
            let presented = [bearer, basic?.password, query].compactMap { $0 }.filter { !$0.isEmpty }
            if let token = configuration.token, presented.contains(where: { AccessMiddleware.sameSecret($0, token) }) {
                identity = .admin
            } else if let first = presented.first, let device = try await store.credentialDevice(token: first) {
                identity = .device(device)
            } else {
                return .failure(
                    StreamRefusal(
                        code: .policyViolation, reason: "unauthorized: a valid token is required",
                        challenge: uri.path == Self.recorderLivePath && authorization == nil && query == nil))
            }
        }
        if let own = identity.onlyDevice {
            // Another device, or a Recorder user it is not one of.
            var other: String?
            if let wanted, wanted != own { other = wanted }
            if wanted == nil, let user, !Self.recorderUser(user, owns: own) { other = user }
            if let other {
                // A close reason holds at most 123 bytes.
                let shown = String(decoding: other.utf8.prefix(40), as: UTF8.self)
                return .failure(
                    StreamRefusal(code: .policyViolation, reason: "forbidden: this token may not read '\(shown)'"))
            }
            return .success(StreamScope(device: own))
        }
        return .success(StreamScope(device: wanted, user: wanted == nil ? user : nil))
    }

    func streamUpgrade(_ head: HTTPRequest, channel: any Channel, logger: Logger) async throws
        -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>>
    {
        let path = URI(head.path ?? "/").path
        guard head.method == .get, path == Self.streamPath || path == Self.recorderLivePath else {
            return .dontUpgrade
        }
        // The OwnTracks Recorder's /ws/last: its location objects, and each device's latest on LAST.
        let recorder = path == Self.recorderLivePath
        let access = try await streamAccess(head)
        if case .failure(let refusal) = access, refusal.challenge {
            await Self.challengeNow(channel, reason: refusal.reason)
            return .dontUpgrade
        }
        return .upgrade([:]) { [self] inbound, outbound, _ in
            // The kernel's send buffer kept small (it grows to megabytes on its own): a client that does not
            // read holds up its writer, and overflows its bounded queue, after 64 KiB instead.
            _ = channel.setOption(.socketOption(.so_sndbuf), value: 1 << 16)
            // The connection left the HTTP connection cap at its 101 (ConnectionGate.leftForStream): the
            // streams have a cap of their own (StreamHub).
            let scope: StreamScope
            switch access {
            case .failure(let refusal):
                // Said and closed at once: no close handshake is waited for with a refused client.
                Self.closeNow(channel, code: refusal.code, reason: refusal.reason)
                return
            case .success(let s): scope = s
            }
            let device = scope.device
            let sees = scope.user.map { user in { @Sendable (id: String) in Self.recorderUser(user, owns: id) } }
            let limits = streamHub.limits
            let reason = "too slow: more than \(limits.maxMessages) messages or \(limits.maxBytes) bytes queued"
            guard
                let client = streamHub.register(
                    device: device, sees: sees, encoding: recorder ? .recorderLocation : .record,
                    onOverflow: { if $0 { Self.closeOverflowed(channel, reason: reason) } })
            else {
                Self.closeNow(
                    channel, code: .init(codeNumber: 1013),
                    reason: "the server serves its maximum of \(streamHub.limits.maxClients) streams")
                return
            }
            defer { streamHub.unregister(client) }
            if !recorder {
                try await outbound.write(
                    .custom(.init(fin: true, opcode: .text, data: try await snapshot(device: device))))
                streamHub.metrics.messages.increment()
            }
            let messages = streamHub.metrics.messages
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [self] in
                    // What the client sends is not used (but /ws/last's LAST); its end (a close, a reset)
                    // ends the stream. So does a message WSCore refuses (it throws: a continuation with no
                    // message begun, a data frame inside one, over 16 KiB), which it answers with a close
                    // once this handler returns: the writer, which no cancellation ends, must end too.
                    defer { client.close() }
                    if recorder {
                        for try await message in inbound.messages(maxSize: 1 << 14) {
                            guard case .text(let text) = message, text == Self.recorderLastRequest else { continue }
                            client.push(try await recorderLastFrames(scope))
                        }
                    } else {
                        for try await _ in inbound {}
                    }
                }
                group.addTask {
                    while let frame = await client.next() {
                        client.writing.store(true, ordering: .releasing)
                        try await outbound.write(.custom(.init(fin: true, opcode: .text, data: frame.text)))
                        client.writing.store(false, ordering: .releasing)
                        messages.increment()
                    }
                    // Overflowed while this writer was free: it says why itself (else closeOverflowed did).
                    if client.overflowed {
                        try await outbound.close(.policyViolation, reason: reason)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    /// Answers an upgrade 401 with `WWW-Authenticate: Basic` (as ``AccessMiddleware`` answers any request
    /// without a credential) and `Connection: close`: a browser that holds HTTP Basic credentials for this
    /// server then asks again with them. Written here, before the upgrade is declined, since a declined
    /// upgrade is answered with an empty 400 (Hummingbird's), which is then dropped (``DiscardWrites``)
    /// before Hummingbird closes the connection.
    static func challengeNow(_ channel: any Channel, reason: String) async {
        let body = ByteBuffer(string: reason + "\n")
        let head = HTTPResponseHead(
            version: .http1_1, status: .unauthorized,
            headers: [
                "WWW-Authenticate": AccessMiddleware.basicChallenge, "Content-Type": "text/plain; charset=utf-8",
                "Content-Length": String(body.readableBytes), "Connection": "close",
            ])
        let written = channel.eventLoop.flatSubmit {
            channel.write(HTTPServerResponsePart.head(head), promise: nil)
            channel.write(HTTPServerResponsePart.body(.byteBuffer(body)), promise: nil)
            return channel.writeAndFlush(HTTPServerResponsePart.end(nil)).flatMapThrowing {
                try channel.pipeline.syncOperations.addHandler(DiscardWrites(), position: .first)
            }
        }
        try? await written.get()
    }

    /// Closes a stream whose queue overflowed: a close frame (1008, with the reason) and the
    /// connection, without waiting for a writer the client does not let through.
    static func closeOverflowed(_ channel: any Channel, reason: String) {
        closeNow(channel, code: .policyViolation, reason: reason)
    }

    /// Writes a close frame (`code`, `reason`) straight to the connection and closes it once written
    /// (or after 2 s, when the client does not read).
    static func closeNow(_ channel: any Channel, code: WebSocketErrorCode, reason: String) {
        var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
        channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }

    /// The stream's first message: `{"type":"snapshot","devices":[{"id","time","lat","lon",...,"points",
    /// "lastReceived"}]}`, the shape of `GET /v1/devices/latest`'s devices.
    func snapshot(device: String?) async throws -> ByteBuffer {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"type\":\"snapshot\",\"devices\":[", to: &out)
        Self.appendDevices(try await store.latest(device: device), to: &out)
        ByteWriting.appendStatic("]}", to: &out)
        return ByteBuffer(bytes: out)
    }

    /// `GET /v1/stream` (or `path`, another WebSocket route: `/ws/last`) without an upgrade: 426,
    /// saying how to ask.
    static func streamWithoutUpgrade(_ path: String = streamPath) -> Response {
        Response(
            status: .upgradeRequired, headers: [.upgrade: "websocket", .contentType: "text/plain"],
            body: .init(byteBuffer: ByteBuffer(string: "GET \(path) is a WebSocket: ask with Upgrade: websocket\n")))
    }

    /// Counts what an ingest stored (the stream hears it from the store: ``StoredRecordsSource``).
    func noteStored(_ records: [TrailRecord], _ result: (accepted: Int, duplicates: Int), format: String) {
        metrics.stored(result.accepted, duplicates: result.duplicates, format: format)
    }

    /// Feeds the stream from the store while the server runs, declares devices offline (and online
    /// again) on it; at its graceful shutdown, ends every stream.
    func followStore() async {
        let hub = streamHub
        defer { hub.closeAll() }
        let watch = offlineWatch
        let source = store
        let subscription = source.storedRecords.subscribe { watch.stored($0) }
        let metrics = hub.metrics
        let reports = source.storedRecords.observe { report in
            switch report {
            case .failed: metrics.followFailures.increment()
            case .caughtUp(let records): metrics.caughtUp.increment(by: Int64(records))
            }
        }
        // Stops and trips the store found at ingest, as events (each instance its own on PostgreSQL).
        let found = store.stopEvents.subscribe { events in
            hub.publish(
                events: events.map { e in
                    switch e.kind {
                    case .stop(let visit): StreamEvent(device: e.device, kind: .stop(visit, decided: e.decided))
                    case .trip(let trip): StreamEvent(device: e.device, kind: .trip(trip, decided: e.decided))
                    }
                })
        }
        defer {
            source.storedRecords.unsubscribe(subscription)
            source.storedRecords.unsubscribe(reports)
            store.stopEvents.unsubscribe(found)
        }
        let clock = self.clock
        let logger = self.logger
        let store = self.store
        let follow = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // The devices known so far: online or offline, without an event.
                    if let known = try? await store.latest(device: nil) { watch.seed(known) }
                    await watch.run()
                }
                group.addTask {
                    do { try await source.followStored(clock: clock) } catch {
                        // Cancelled: the server stops (the listening connection's error says only that).
                        guard !Task.isCancelled, !(error is CancellationError) else { return }
                        logger.error(
                            "the live stream stopped following the store",
                            metadata: ["error.type": "\(type(of: error))"])
                    }
                }
            }
        }
        try? await gracefulShutdown()
        follow.cancel()
    }
}

/// The live stream's part of the server's service group: feeds it from the store, ends it at shutdown.
struct StreamService: Service {
    let server: TrackServer

    func run() async throws { await server.followStore() }
}

/// The HTTP/1 channel with the stream's upgrade (``TrackServer/httpChannel(_:_:)``), and a guard on
/// each connection's first request head, which the upgrade's parser reads before Hummingbird's own
/// limits apply: the head must be complete within the idle timeout (or the connection is closed) and
/// within ``HeadGuardHandler/maxHeadBytes`` (or it is answered 400 and closed).
struct StreamUpgradableChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let base: HTTP1WebSocketUpgradeChannel
    let idleTimeout: TimeAmount?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(HeadGuardHandler(timeout: idleTimeout))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async { await base.handle(value: value, logger: logger) }
}

/// Watches a connection's bytes until the end of its first request head (CR LF CR LF), then leaves
/// the pipeline. Closes the connection when the head takes longer than `timeout`; answers 400 and
/// closes when it is longer than ``maxHeadBytes``.
final class HeadGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The longest first head: what the HTTP parser refuses beyond (80 KiB) is refused here first.
    static let maxHeadBytes = 64 << 10

    let timeout: TimeAmount?
    var timer: Scheduled<Void>?
    var seen = 0
    /// The last bytes read, for a CR LF CR LF split across reads.
    var tail: [UInt8] = []
    var done = false

    init(timeout: TimeAmount?) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let timeout else { return }
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { loopContext.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return context.fireChannelRead(data) }
        let buffer = unwrapInboundIn(data)
        let bytes = tail + buffer.readableBytesView
        if let end = Self.headEnd(bytes) {
            done = true
            timer?.cancel()
            if seen + end - tail.count > Self.maxHeadBytes { return refuse(context) }
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        seen += buffer.readableBytes
        if seen > Self.maxHeadBytes { return refuse(context) }
        tail = Array(bytes.suffix(3))
        context.fireChannelRead(data)
    }

    /// Where CR LF CR LF ends in `bytes`, if it is there.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13
        {
            return i + 1
        }
        return nil
    }

    func refuse(_ context: ChannelHandlerContext) {
        done = true
        let answer = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: answer)), promise: nil)
        context.close(mode: .output, promise: nil)
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: .seconds(2)) { loopContext.value.close(promise: nil) }
    }
}

/// Drops every write after it is added, at the front of a connection's pipeline: what Hummingbird
/// answers a declined upgrade with, after ``TrackServer/challengeNow(_:reason:)`` answered it.
final class DiscardWrites: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        promise?.succeed(())
    }
}
