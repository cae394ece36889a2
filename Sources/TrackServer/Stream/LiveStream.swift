import Formats
import Geo
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import ServiceLifecycle
import Synchronization
import TrackStore

/// The live stream, `GET /v1/stream` upgraded to a WebSocket (docs/live.md):
/// `{"type":"snapshot","devices":[...]}` first (each visible device's latest position), then
/// `{"type":"record","device":ID,"record":{...}}` for every record stored after it, in storage order,
/// whatever route stored it. Credentials as the rest of the API (`Authorization: Bearer`, or `?token=`
/// since browsers cannot set headers on a WebSocket); `?device=ID` narrows. A refused stream is
/// upgraded and closed at once with a code and a reason a browser can read: 1008 (no or a wrong
/// token, another device's id), 1013 (at ``TrackServer/StreamSettings/maxClients``). A client whose
/// queue overflows (it does not read) is closed with 1008. The OwnTracks Recorder's `/ws/last` is
/// served the same way (``RecorderLive``).
///
/// The upgrade is the connection's channel's, before any route: ``channel(_:_:)`` is the HTTP/1
/// channel of every connection.
struct LiveStream: Sendable {
    /// The path of the stream.
    static let streamPath = "/v1/stream"

    let store: any TrackStore
    let hub: StreamHub
    /// Who a request is (the admin token, device tokens).
    let credentials: Credentials
    /// Share links (`?share=TOKEN`): one device, closed when the share expires or is revoked.
    let shares: ShareAccess
    let clock: any EpochClock
    /// The origins whose pages may use this server's HTTP Basic credentials on `/ws/last`.
    let corsOrigins: [String]
    /// How often a ping goes to each client.
    let pingInterval: Duration

    /// The HTTP/1 channel of every connection: the routes, and the stream's upgrade.
    func channel(
        _ responder: @escaping HTTPChannelHandler.Responder,
        _ http1: HTTP1Channel.Configuration
    ) -> StreamUpgradableChannel {
        let ws = WebSocketServerConfiguration(maxFrameSize: 1 << 14, autoPing: .enabled(timePeriod: pingInterval))
        let base = HTTP1WebSocketUpgradeChannel(responder: responder, configuration: .init(http1: http1, ws: ws)) {
            [self] head, channel, logger in
            try await upgrade(head, channel: channel, logger: logger)
        }
        return StreamUpgradableChannel(base: base, idleTimeout: http1.idleTimeout)
    }

    /// Why a stream is closed as soon as it opens.
    struct Refusal: Error, Sendable {
        var code: WebSocketErrorCode
        var reason: String
        /// Whether the request presented no credential at all to a route that a browser opens with the
        /// HTTP Basic credentials it holds (`/ws/last`): it is answered 401 with `WWW-Authenticate`, not
        /// upgraded, so that the browser sends them (it does not before it is challenged, unless the
        /// path is below the one they were first asked for).
        var challenge = false
    }

    /// What a stream client sees.
    struct Scope: Sendable, Equatable {
        /// The only device it sees (`nil`: all, or ``user``'s).
        var device: String?
        /// When ``device`` is `nil`, the OwnTracks Recorder user whose devices it sees (`/ws/last?user=U`).
        var user: String?
        /// The share link it was opened with, if it was: closed when it ends.
        var share: String?
        /// The share link's window: the points whose outlier marks it is told (``StreamEvent/within(from:to:)``).
        var window: ClosedRange<Double>?
    }

    /// The scope of a stream opened with a share link's token, or why not.
    func shareAccess(token: String, wanted: String?) async throws -> Result<Scope, Refusal> {
        let identity: Identity
        do {
            identity = try await shares.identity(token: token, method: .get, path: Self.streamPath)
        } catch let error as HTTPError {
            let reason =
                switch error.status {
                case .gone: "gone: the share link expired or was revoked"
                case .tooManyRequests: "too many requests on this share link"
                default: "unauthorized: not a share link of this server"
                }
            return .failure(Refusal(code: .policyViolation, reason: reason))
        }
        guard case .share(let grant) = identity, wanted == nil || wanted == grant.device else {
            return .failure(Refusal(code: .policyViolation, reason: "forbidden: this share link shows one device"))
        }
        let now = clock.now.secondsSince1970
        guard grant.from <= now, now < grant.to else {
            return .failure(Refusal(code: .policyViolation, reason: "forbidden: this share link's window is not now"))
        }
        return .success(Scope(device: grant.device, share: grant.id, window: grant.from...grant.to))
    }

    /// Returns when the share `id` of `device` has ended (expired or revoked), checking at its expiry
    /// and every 30 seconds of `clock` before.
    func shareEnded(id: String, device: String) async throws {
        while !Task.isCancelled {
            let now = clock.now.secondsSince1970
            guard let share = try await store.shares(device: device).first(where: { $0.id == id }),
                share.state(at: now) == .active
            else { return }
            if let to = share.to, now >= to { return }
            let end = min(share.expires, share.to ?? .infinity, now + 30)
            try await clock.sleep(until: EpochInstant(secondsSince1970: end), tolerance: nil)
        }
    }

    /// Who may see what on a stream request, or why not.
    func access(_ head: HTTPRequest) async throws -> Result<Scope, Refusal> {
        let uri = URI(head.path ?? "/")
        let q = uri.queryParameters
        let wanted: String?
        var user: String?
        if uri.path == Self.recorderPath {
            let u = q["user"].map(String.init), d = q["device"].map(String.init)
            wanted = try await recorderDevice(user: u, device: d)
            // The Recorder's `?user=U` alone: that user's devices (its `last_users` for LAST, and the
            // intent of its `http_ws_push_json` for what follows).
            if let u, !u.isEmpty, d?.isEmpty ?? true { user = u }
        } else {
            wanted = q["device"].flatMap { $0.isEmpty ? nil : String($0) }
        }
        // /ws/last is opened by web apps of other origins (the OwnTracks Frontend) that may hold HTTP
        // Basic credentials for this one: only the CORS origins (or this one) may use them.
        if uri.path == Self.recorderPath, let origin = head.headerFields[.origin] {
            let origins = corsOrigins
            // This server's own origin: its host (and port, when the origin says one).
            let from = origin.split(separator: "//", maxSplits: 1).last.map(String.init) ?? origin
            let authority = head.authority ?? ""
            let same = from == authority || from == authority.split(separator: ":").first.map(String.init)
            if !(same || origins.contains("*") || origins.contains(origin)) {
                return .failure(Refusal(code: .policyViolation, reason: "forbidden: an origin not allowed"))
            }
        }
        if uri.path == Self.streamPath, let token = q["share"] {
            return try await shareAccess(token: String(token), wanted: wanted)
        }
        var identity = Identity.admin
        if try await credentials.required() {
            let authorization = head.headerFields[.authorization]
            let query = q["token"].map(String.init)
            let presented = Credentials.presented(authorization: authorization, query: query)
            guard let known = try await credentials.identity(of: presented.credentials) else {
                return .failure(
                    Refusal(
                        code: .policyViolation, reason: "unauthorized: a valid token is required",
                        challenge: uri.path == Self.recorderPath && authorization == nil && query == nil))
            }
            identity = known
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
                    Refusal(code: .policyViolation, reason: "forbidden: this token may not read '\(shown)'"))
            }
            return .success(Scope(device: own))
        }
        return .success(Scope(device: wanted, user: wanted == nil ? user : nil))
    }

    /// Whether to upgrade a request: the stream's and `/ws/last`'s, each with its handler, refused ones
    /// closed at once.
    func upgrade(_ head: HTTPRequest, channel: any Channel, logger: Logger) async throws
        -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>>
    {
        let path = URI(head.path ?? "/").path
        guard head.method == .get, path == Self.streamPath || path == Self.recorderPath else {
            return .dontUpgrade
        }
        // The OwnTracks Recorder's /ws/last: its location objects, and each device's latest on LAST.
        let recorder = path == Self.recorderPath
        let access = try await access(head)
        if case .failure(let refusal) = access, refusal.challenge {
            await Self.challengeNow(channel)
            return .dontUpgrade
        }
        return .upgrade([:]) { [self] inbound, outbound, _ in
            // The kernel's send buffer kept small (it grows to megabytes on its own): a client that does not
            // read holds up its writer, and overflows its bounded queue, after 64 KiB instead.
            _ = channel.setOption(.socketOption(.so_sndbuf), value: 1 << 16)
            // The connection left the HTTP connection cap at its 101 (ConnectionGate.leftForStream): the
            // streams have a cap of their own (StreamHub).
            let scope: Scope
            switch access {
            case .failure(let refusal):
                // Said and closed at once: no close handshake is waited for with a refused client.
                Self.closeNow(channel, code: refusal.code, reason: refusal.reason)
                return
            case .success(let s): scope = s
            }
            let device = scope.device
            let sees = scope.user.map { user in { @Sendable (id: String) in Self.recorderUser(user, owns: id) } }
            let limits = hub.limits
            let reason = "too slow: more than \(limits.maxMessages) messages or \(limits.maxBytes) bytes queued"
            guard
                let client = hub.register(
                    device: device, sees: sees,
                    encoding: recorder ? .recorderLocation : scope.window.map { .record(within: $0) } ?? .record,
                    onOverflow: { if $0 { Self.closeOverflowed(channel, reason: reason) } })
            else {
                Self.closeNow(
                    channel, code: .init(codeNumber: 1013),
                    reason: "the server serves its maximum of \(hub.limits.maxClients) streams")
                return
            }
            defer { hub.unregister(client) }
            if !recorder {
                try await outbound.write(
                    .custom(.init(fin: true, opcode: .text, data: try await snapshot(device: device))))
                hub.metrics.messages.increment()
            }
            let messages = hub.metrics.messages
            try await withThrowingTaskGroup(of: Void.self) { group in
                // What ended the reader, thrown by this handler whichever task the group returns first.
                let refused = Mutex<(any Error)?>(nil)
                group.addTask { [self] in
                    // What the client sends is not used (but /ws/last's LAST); its end (a close, a reset)
                    // ends the stream. So does a message or frame WSCore refuses (it throws: a continuation
                    // with no message begun, a data frame inside one, over 16 KiB, a reserved opcode),
                    // which it answers with that close code once this handler throws it (returning, the
                    // handler would be answered 1000): the writer, which no cancellation ends, must end too,
                    // and may end first.
                    defer { client.close() }
                    do {
                        if recorder {
                            for try await message in inbound.messages(maxSize: 1 << 14) {
                                guard case .text(let text) = message, text == Self.recorderLastRequest else {
                                    continue
                                }
                                client.push(try await recorderLastFrames(scope))
                            }
                        } else {
                            for try await _ in inbound {}
                        }
                    } catch {
                        refused.withLock { $0 = error }
                        throw error
                    }
                }
                if let id = scope.share, let device = scope.device {
                    group.addTask { [self] in
                        try await shareEnded(id: id, device: device)
                        // Said by the handler's own writer (a close frame written around it races with
                        // the close that ends the handler).
                        try await outbound.close(
                            .policyViolation, reason: "gone: the share link expired or was revoked")
                        client.close()
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
                if let error = refused.withLock({ $0 }), !(error is CancellationError) { throw error }
            }
        }
    }

    /// Answers an upgrade 401 with `WWW-Authenticate: Basic` and `Connection: close`, as
    /// ``AccessMiddleware`` answers any request without a credential (the same ``ErrorAnswer``): a
    /// browser that holds HTTP Basic credentials for this server then asks again with them. Written here, before the upgrade is declined, since a declined
    /// upgrade is answered with an empty 400 (Hummingbird's), which is then dropped (``DiscardWrites``)
    /// before Hummingbird closes the connection.
    static func challengeNow(_ channel: any Channel) async {
        let answer = ErrorAnswer(AccessMiddleware.unauthorized())
        let body = ByteBuffer(bytes: answer.body)
        var headers: HTTPHeaders = [
            "Content-Type": ErrorAnswer.contentType, "Content-Length": String(body.readableBytes),
            "Connection": "close",
        ]
        for field in answer.headers { headers.add(name: field.name.rawName, value: field.value) }
        let head = HTTPResponseHead(version: .http1_1, status: .unauthorized, headers: headers)
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
    /// (or after 2 s, when the client does not read). Nothing is sent after it (RFC 6455, 5.5.1): a
    /// message the stream's writer had under way, or its own close, is dropped (``DiscardWrites``).
    static func closeNow(_ channel: any Channel, code: WebSocketErrorCode, reason: String) {
        channel.eventLoop.execute {
            var data = channel.allocator.buffer(capacity: 2 + reason.utf8.count)
            data.write(webSocketErrorCode: code)
            data.writeString(reason)
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
            channel.writeAndFlush(frame).whenComplete { _ in channel.close(promise: nil) }
            // On the event loop, the frame has gone through the pipeline to the socket: what is written
            // after it stops here.
            try? channel.pipeline.syncOperations.addHandler(DiscardWrites(), position: .first)
        }
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
    }

    /// The stream's first message: `{"type":"snapshot","devices":[{"id","time","lat","lon",...,"points",
    /// "lastReceived"}]}`, the shape of `GET /v1/devices/latest`'s devices.
    func snapshot(device: String?) async throws -> ByteBuffer {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"type\":\"snapshot\",\"devices\":[", to: &out)
        FleetJSON.appendDevices(try await store.latest(device: device), to: &out)
        ByteWriting.appendStatic("]}", to: &out)
        return ByteBuffer(bytes: out)
    }
}
