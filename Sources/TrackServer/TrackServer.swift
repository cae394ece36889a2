import FoundationEssentials
import Formats
import Geo
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import MQTT
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

/// The test endpoint: a real HTTP server that stores what trackers send.
///
/// Ingest (each needs the token, as `Authorization: Bearer TOKEN` or `?token=TOKEN`, when one is
/// set):
/// - `POST /v1/locations`: our JSON batch (``JSONBatch``), gzip bodies accepted; answers
///   `{"accepted":N,"duplicates":M}`.
/// - `GET /` or `POST /` (query or form): Traccar's OsmAnd (``OsmAnd``); answers 200.
/// - `POST /owntracks`: OwnTracks JSON (``OwnTracks``) from `X-Limit-U`/`X-Limit-D` (or `?u=`/`?d=`),
///   stored as device `user/device`; answers `[]`. An encrypted payload is decrypted with the
///   device's secret and answered `[]` encrypted (403 when it does not authenticate, 415 when the
///   device has no secret).
/// - `POST /api/v1/overland/batches`: Overland's batch (``Overland``, Dawarich's path); answers
///   `{"result":"ok"}`.
/// - With ``Configuration/mqtt``: OwnTracks JSON from a broker, subscribed to `owntracks/+/+`
///   (``MQTTIngest``), stored exactly as the HTTP route stores it.
///
/// Queries: `GET /v1/devices`, `GET /v1/devices/{id}/trail?from=&to=&format=geojson|gpx|json&limit=&cursor=&invalid=true`
/// (paginated), `GET /v1/devices/{id}/stops|trips?from=&to=` (``addStopsRoutes(to:)``), `GET /map` (the live
/// map, docs/live.md) and `GET /map/svg` (trails as SVG), `GET /v1/stream` (the live stream, a WebSocket:
/// ``StreamHub``), the OwnTracks Recorder's `/api/0/...` (``addRecorderRoutes(to:)``), `GET /healthz`,
/// `GET /metrics` (Prometheus text). `PUT /v1/faults` sets
/// ``Faults`` when ``Configuration/faultInjection`` is on.
///
/// Bad requests get a 400 whose body names the problem (`records[3].lat: 95 is out of range
/// [-90, 90]`); bodies over ``Configuration/maxBodyBytes`` a 413 (at once when `Content-Length`
/// says so); a missing or wrong token a 401. The limits under hostile load (connections, timeouts,
/// bodies in memory, page sizes) are in ``Configuration``.
public final class TrackServer: Sendable {
    public struct Configuration: Sendable {
        /// The default is 127.0.0.1.
        public var host = "127.0.0.1"
        /// 0 (the default) picks a free port.
        public var port = 0
        /// The token devices must present; `nil` (the default) accepts anyone.
        public var token: String?
        /// The origins whose web pages may call the API (`https://owntracks.example.org`, or `*`): CORS
        /// headers and preflight answers (``CrossOriginMiddleware``). The default is none.
        public var corsOrigins: [String] = []
        /// The largest request body, after decompression. The default is 8 MiB.
        public var maxBodyBytes = 8 << 20
        /// Whether faults are injected (``faults`` and `PUT /v1/faults`); off, the route does not
        /// exist. The default is false (`keeptrack serve --faults` turns it on).
        public var faultInjection = false
        /// The faults injected from the start, when ``faultInjection`` is on.
        public var faults = Faults()
        /// The most connections served at once. At the cap, a new connection takes the place of the
        /// oldest one without a complete request head, else of the one idle the longest between
        /// requests (that one is closed); when every connection is busy, it gets `503` with
        /// `Retry-After` and is closed (over TLS: closed). The default, nil, sizes it from the soft
        /// descriptor limit (``connectionCap(descriptors:)``: 716 for 1,024 descriptors).
        public var maxConnections: Int?
        /// How long a new connection has to send its first complete request head; then it is closed.
        /// The default is 10 seconds.
        public var firstRequestTimeout: Duration = .seconds(10)
        /// Whether ``TrackServer/run(signals:onReady:)`` raises the process's soft descriptor limit
        /// (`RLIMIT_NOFILE`) to its hard limit first, as servers do. The default is true.
        public var raiseDescriptorLimit = true
        /// How long a connection may stay without a complete request head when idle between
        /// requests (and from its opening, when longer than ``firstRequestTimeout``). Then it is
        /// closed. The default is 30 seconds.
        public var idleTimeout: Duration = .seconds(30)
        /// How long a request's body may take to arrive, from the end of its head; past it the
        /// request is answered 408 and the connection closed. The default is 60 seconds.
        public var bodyTimeout: Duration = .seconds(60)
        /// The bytes of request bodies read into memory at once (declared lengths, the largest body
        /// for one without a length, what a gzip body inflates to); a request that would go over it
        /// gets `503` with `Retry-After: 1`. Never less than ``maxBodyBytes``. The default is 32 MiB.
        public var maxBodyBytesInFlight = 32 << 20
        /// The records in a trail page when the request gives no `limit`. The default is 10,000.
        public var defaultPageSize = 10_000
        /// The largest `limit` a trail or map page may ask for. The default is 100,000.
        public var maxPageSize = 100_000
        /// The most points `/map` draws a trail's line through (more are thinned out evenly, and the
        /// page says so). The default is 5,000.
        public var maxPointsDrawn = 5_000
        /// The most devices `/map` draws without `?device=` (the rest are listed). The default is 20.
        public var maxDevicesDrawn = 20
        /// PEM certificate chain and private key: serve HTTPS. The default is plain HTTP.
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// A broker to take OwnTracks messages from as well (``MQTTIngest``). The default is none.
        public var mqtt: MQTTIngest.Configuration?
        /// Whether OsmAnd requests without a credential are stored for devices without a token once
        /// a token or a device credential exists (otherwise they get Traccar's answer to an unknown
        /// device, 400). The default is false.
        public var openRegistration = false
        /// How old a point may get, in seconds, before ``RetentionService`` deletes it. The default
        /// is nil: points are kept.
        public var retention: Double?
        /// The live stream's limits (`GET /v1/stream`).
        public var stream = StreamSettings()
        /// The map page's base map and library (`/map`).
        public var map = MapSettings()

        public init() {}
    }

    public let configuration: Configuration
    public let store: any TrackStore
    let faults: Mutex<Faults>
    let metrics = ServerMetrics()
    let logger: Logger
    let boundPort = Atomic<Int>(0)
    /// Receipt times, the retention's cutoff and sweeps, MQTT reconnections, injected delays.
    let clock: any EpochClock
    let gate: ConnectionGate
    let bodies: BodyBudget
    /// The live stream's clients (``StreamHub``).
    let streamHub: StreamHub
    /// Every stored batch on its way to the stream, and the offline events (``OfflineWatch``).
    let offlineWatch: OfflineWatch

    /// A server over `store`, which the caller opened (`TrackStorePostgres`' `TrackDatabase` opens the
    /// store a `--db` value names; ``SQLiteTrackStore`` one file) and closes after the server stopped.
    ///
    /// - Parameters:
    ///   - clock: receipt times, the retention's cutoff and the waits (retention sweeps, MQTT
    ///     reconnections, injected delays). The default is the wall clock.
    public init(
        configuration: Configuration, store: any TrackStore, logger: Logger = Logger(label: "keeptrack.serve"),
        clock: any EpochClock = WallClock()
    ) throws {
        // A broker URL that cannot work is a setting to fix now, not a retry loop later.
        if let mqtt = configuration.mqtt { _ = try MQTTEndpoint(parsing: mqtt.url, wildcards: true) }
        self.configuration = configuration
        self.store = store
        self.faults = Mutex(configuration.faults)
        self.logger = logger
        self.clock = clock
        self.gate = ConnectionGate(
            settings: .init(
                cap: max(1, configuration.maxConnections ?? 512),
                firstRequestTimeout: configuration.firstRequestTimeout),
            clock: clock, metrics: metrics)
        self.bodies = BodyBudget(
            capacity: max(configuration.maxBodyBytesInFlight, configuration.maxBodyBytes),
            refusals: metrics.bodiesRefused)
        let stream = configuration.stream
        self.streamHub = StreamHub(
            limits: .init(
                maxClients: max(1, stream.maxClients),
                maxMessages: max(1, stream.maxQueuedMessages),
                maxBytes: max(1, stream.maxQueuedBytes)),
            metrics: StreamMetrics(registry: metrics.registry))
        self.offlineWatch = OfflineWatch(hub: streamHub, after: stream.offlineAfter, clock: clock)
    }

    /// Whether listening on `host` with `token` exposes the store: no token on an address other than
    /// loopback lets anyone on the network read every trail.
    public static func isExposed(host: String, token: String?) -> Bool {
        guard token == nil else { return false }
        return !(host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127."))
    }

    /// The port the server listens on, once it does (0 before).
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// Fired when the server listens (``listeningPort()`` waits for it).
    let listening = Signal()
    /// Whether the MQTT subscription is in place, and its change (``mqttSubscription()``).
    let mqttState = Mutex((subscribed: false, count: 0))
    let mqttSignal = Signal()

    /// The port, once the server listens (it waits until then; one caller at a time).
    public func listeningPort() async -> Int {
        while port == 0 && !Task.isCancelled { await listening.wait() }
        return port
    }

    /// Runs until ``shutdown()`` (or, with `signals`, SIGINT/SIGTERM) and a graceful stop. `onReady`
    /// gets the port once the server listens.
    public func run(signals: Bool = false, onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let bodyTimeout = TimeAmount(configuration.bodyTimeout)
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [BodyTimeoutHandler(timeout: bodyTimeout)],
            idleTimeout: TimeAmount(configuration.idleTimeout))
        _ = prepareConnectionLimits()
        let gate = self.gate
        var server = HTTPServerBuilder { responder in
            CappedChannel(base: self.httpChannel(responder, http1), gate: gate, answerInClear: true)
        }
        if let cert = configuration.tlsCertificate, let key = configuration.tlsKey {
            let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            server = HTTPServerBuilder { responder in
                CappedChannel(
                    base: try TLSChannel(self.httpChannel(responder, http1), tlsConfiguration: tls),
                    gate: gate, answerInClear: false)
            }
        }
        // Past the cap plus this many refusals in progress, connections wait in the kernel's
        // backlog instead of taking descriptors. Live streams, which leave the cap, have their own.
        let accepting = MaximumAvailableConnections(
            gate.limit + max(64, gate.limit / 4) + streamHub.limits.maxClients, logger: logger)
        let app = Hummingbird.Application(
            router: router(),
            server: server,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: "keeptrack-serve", availableConnectionsDelegate: accepting),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? 0
                self.boundPort.store(port, ordering: .releasing)
                self.listening.fire()
                await onReady(port)
            },
            logger: logger
        )
        var services: [any Service] = [app, StreamService(server: self)]
        if let mqtt = configuration.mqtt { services.append(try MQTTIngest(server: self, configuration: mqtt)) }
        if let retention = configuration.retention {
            services.append(RetentionService(store: store, retention: retention, clock: clock, logger: logger))
        }
        services.insert(ConnectionSweeper(gate: gate), at: 0)  // stopped after the server
        let group = ServiceGroup(
            configuration: .init(
                services: services, gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [], logger: logger))
        let stopNow = serviceGroup.withLock { s -> Bool in
            s.group = group
            return s.stopRequested
        }
        if stopNow { await group.triggerGracefulShutdown() }
        try await group.run()
    }

    /// Stops a running server gracefully (requests in flight finish).
    public func shutdown() async {
        let group = serviceGroup.withLock { s -> ServiceGroup? in
            s.stopRequested = true
            return s.group
        }
        await group?.triggerGracefulShutdown()
    }

    struct GroupState {
        var group: ServiceGroup?
        var stopRequested = false
    }

    let serviceGroup = Mutex(GroupState())

    /// What `GET /metrics` shows (Prometheus text).
    public func metricsText() async -> String {
        metrics.prometheus(
            stored: (try? await store.count()) ?? -1, connections: gate.served,
            bodyBytesInFlight: bodies.inUse)
    }

    func router() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        let origins = configuration.corsOrigins
        if !origins.isEmpty { router.add(middleware: CrossOriginMiddleware(origins: origins)) }
        router.add(middleware: ErrorAnswerMiddleware(logger: logger))
        router.add(middleware: EarlyLimitMiddleware(maxBodyBytes: configuration.maxBodyBytes))
        if configuration.faultInjection { router.add(middleware: FaultMiddleware(server: self)) }
        router.add(middleware: AccessMiddleware(server: self))
        router.post("/v1/locations") { request, context in try await self.ingestBatch(request, context) }
        router.get("/") { request, context in
            if Self.wantsMapPage(request) { return self.mapShell() }
            return try await self.ingestOsmAnd(request, context)
        }
        router.post("/") { request, context in try await self.ingestOsmAnd(request, context) }
        router.post("/owntracks") { request, context in try await self.ingestOwnTracks(request, context) }
        router.post("/api/v1/overland/batches") { request, context in try await self.ingestOverland(request, context) }
        router.get("/v1/devices") { _, context in try await self.devicesResponse(context) }
        router.get("/v1/devices/latest") { _, context in try await self.latestResponse(context) }
        router.get("/v1/positions") { request, context in try await self.positionsResponse(request, context) }
        router.get("/v1/devices/{id}/trail") { request, context in try await self.trailResponse(request, context) }
        addStopsRoutes(to: router)
        router.get("/healthz") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}\n")))
        }
        router.get("/metrics") { _, _ in
            let text = await self.metricsText()
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        if configuration.faultInjection {
            router.put("/v1/faults") { request, context in
                try self.requireAdmin(context)
                return try await self.setFaults(request, context)
            }
        }
        router.get("/map/svg") { request, context in try await self.mapPage(request, context) }
        router.get("/v1/stream") { _, _ in Self.streamWithoutUpgrade() }
        router.get(.init(Self.recorderLivePath)) { _, _ in Self.streamWithoutUpgrade(Self.recorderLivePath) }
        addMapRoutes(router)
        addRecorderRoutes(to: router)
        addOpenAPIRoutes(to: router)
        return router
    }

    /// Runs blocking work (rendering) on NIO's blocking pool, not on the threads that
    /// serve connections and run Swift tasks.
    func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    /// Closes the connection once the answer to its current request is written and the rest of its
    /// body read and thrown away, or ``BodyTimeoutHandler/linger`` after the answer.
    static func closeAfterAnswer(_ context: ServerContext) {
        context.channel.pipeline.fireUserInboundEventTriggered(CloseAfterAnswer())
    }

    // MARK: - Ingest

    /// The body, inflated when gzip, within the size limit and the bytes-in-flight budget.
    func body(_ request: Request, _ context: ServerContext) async throws -> [UInt8] {
        let limit = configuration.maxBodyBytes
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > limit {
            Self.closeAfterAnswer(context)
            throw HTTPError(.contentTooLarge, message: "the body is larger than \(limit) bytes")
        }
        let reservation = declared ?? limit
        guard bodies.reserve(reservation) else { throw busy(context) }
        defer { bodies.release(reservation) }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            Self.closeAfterAnswer(context)
            throw HTTPError(.contentTooLarge, message: "the body is larger than \(limit) bytes")
        } catch is BodyTimeout {
            throw HTTPError(.requestTimeout, message: "the body did not arrive within \(configuration.bodyTimeout)")
        }
        let bytes = Array(buffer: buffer)
        if request.headers[.contentEncoding]?.lowercased() == "gzip" {
            metrics.gzipRequests.increment()
            // What it says it inflates to (ISIZE, the trailer's last 4 bytes), within the limit:
            // inflating stops at the limit whatever it says.
            let inflated =
                bytes.count >= 18
                ? min(limit, bytes.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }) : limit
            guard bodies.reserve(inflated) else { throw busy(context) }
            defer { bodies.release(inflated) }
            do {
                return try Gzip.decompress(bytes, limit: limit)
            } catch {
                throw ErrorAnswer(error, status: error.code == .tooLarge ? .contentTooLarge : .badRequest)
            }
        }
        return bytes
    }

    /// The answer when the bodies in flight would go over their budget (the body is not read).
    func busy(_ context: ServerContext) -> HTTPError {
        Self.closeAfterAnswer(context)
        return HTTPError(
            .serviceUnavailable, headers: [.retryAfter: "1", .contentType: "application/json"],
            message: "the server is receiving too many large bodies at once; try again shortly")
    }

    func ingestBatch(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body(request, context)
        let batch: (device: String, records: [TrailRecord])
        do {
            batch = try JSONBatch.decode(bytes, now: clock.now.secondsSince1970)
        } catch {
            metrics.rejected(1)
            throw ErrorAnswer(error)
        }
        try authorize(context, device: batch.device)
        let result = try await store.insert(batch.records, format: "json", received: clock.now.secondsSince1970)
        noteStored(batch.records, result, format: "json")
        let reply = "{\"accepted\":\(result.accepted),\"duplicates\":\(result.duplicates)}\n"
        return try respond(reply, contentType: "application/json", context: context)
    }

    func ingestOsmAnd(_ request: Request, _ context: ServerContext) async throws -> Response {
        let record: TrailRecord
        let json =
            request.method == .post
            && request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true
        // As Traccar: a JSON body (Traccar Client) by its Content-Type; else the query, with a form
        // body's parameters added.
        if json {
            let bytes = try await body(request, context)
            do {
                record = try OsmAnd.decodeJSON(bytes, now: clock.now.secondsSince1970)
            } catch {
                metrics.rejected(1)
                throw ErrorAnswer(error)
            }
        } else {
            var query = request.uri.query ?? ""
            if request.method == .post {
                let form = String(decoding: try await body(request, context), as: UTF8.self)
                if !form.isEmpty { query += (query.isEmpty ? "" : "&") + form }
            }
            do {
                record = try OsmAnd.decode(query, now: clock.now.secondsSince1970)
            } catch {
                metrics.rejected(1)
                throw ErrorAnswer(error)
            }
        }
        if context.identity == .anonymous {
            guard try await admitsAnonymousOsmAnd(device: record.device) else {
                metrics.rejected(1)
                return Self.unknownOsmAndDevice(json: json)
            }
        } else {
            try authorize(context, device: record.device)
        }
        let result = try await store.insert([record], format: "osmand", received: clock.now.secondsSince1970)
        noteStored([record], result, format: "osmand")
        return try respond("", contentType: "text/plain", context: context)
    }

    func ingestOwnTracks(_ request: Request, _ context: ServerContext) async throws -> Response {
        // As the Recorder: the first X-Limit-U / X-Limit-D, else ?u= / ?d=, else owntracks/phone.
        let q = request.uri.queryParameters
        let user = request.headers[values: HTTPField.Name("X-Limit-U")!].first ?? q["u"].map(String.init)
        let device = request.headers[values: HTTPField.Name("X-Limit-D")!].first ?? q["d"].map(String.init)
        if context.identity != .admin {
            // A device token: the device the request names (as stored, user/device), and the Basic
            // user, when one is given, its user.
            let id = OwnTracks.deviceID(user: user, device: device)
            try authorize(context, device: id)
            if let basic = context.basicUser, !basic.isEmpty, !id.hasPrefix(basic.lowercased() + "/") {
                throw HTTPError(.forbidden, message: "the Basic user '\(basic)' is not the user of device '\(id)'")
            }
        }
        return try await ingestOwnTracksBody(
            try await body(request, context), user: user, device: device, context: context)
    }

    /// Stores one OwnTracks message (``OwnTracks``) from `user`'s `device`: what `POST /owntracks`
    /// does with a request's body, callable without one (an MQTT subscriber hands over what arrives
    /// on `owntracks/USER/DEVICE`). The device is stored as `user/device`, lowercased, `owntracks`
    /// and `phone` when absent (``OwnTracks/deviceID(user:device:)``). Messages without a position
    /// (an empty body, `lwt`, `card`, `waypoint`...) store nothing.
    ///
    /// - Returns: how many records were new and how many already stored (0 and 0 for nothing).
    /// An encrypted message (`_type: encrypted`) is decrypted with the device's secret
    /// (``DeviceSecretStore``) first.
    ///
    /// - Throws: ``FormatsError`` for a message that can't be read (``FormatsError/Code/unsupported``
    ///   for an encrypted one from a device without a secret), ``OwnTracksCryptoError`` for an encrypted
    ///   one that can't be read or does not authenticate, or the store's error.
    public func ingestOwnTracks(_ bytes: [UInt8], user: String?, device: String?) async throws
        -> (accepted: Int, duplicates: Int)
    {
        let t = clock.now.secondsSince1970
        let bytes = try await openOwnTracks(bytes, device: OwnTracks.deviceID(user: user, device: device)).plain
        guard let record = try OwnTracks.decode(bytes, user: user, device: device, now: t) else { return (0, 0) }
        let result = try await store.insert([record], format: "owntracks", received: t)
        noteStored([record], result, format: "owntracks")
        return result
    }

    /// The answer to an ingest, or — when the faults say drop — half of it and a closed
    /// connection (the records are stored; the client can't know).
    func respond(_ text: String, contentType: String, context: ServerContext) throws -> Response {
        var headers: HTTPFields = [.contentType: contentType, .acceptEncoding: "gzip"]
        if context.drop {
            let full = ByteBuffer(string: text.isEmpty ? "ok" : text)
            headers[.contentLength] = String(full.readableBytes + 64)
            return Response(
                status: .ok, headers: headers,
                body: .init { writer in
                    try await writer.write(full.getSlice(at: 0, length: max(1, full.readableBytes / 2))!)
                    throw DroppedConnection()
                })
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    struct DroppedConnection: Error {}

    // MARK: - Queries

    /// `GET /v1/devices`, from the devices table.
    func devicesResponse(_ context: ServerContext) async throws -> Response {
        var out = "{\"devices\":["
        let devices: [DeviceSummary]
        if let own = context.identity.onlyDevice {
            devices = try await store.device(own).map { [$0] } ?? []
        } else {
            devices = try await store.devices()
        }
        for (i, d) in devices.enumerated() {
            if i > 0 { out += "," }
            var name: [UInt8] = []
            ByteWriting.appendJSONString(d.id, to: &name)
            out +=
                "{\"id\":\(String(decoding: name, as: UTF8.self)),\"points\":\(d.points),"
                + "\"first\":\"\(ISOTime.string(d.first))\",\"last\":\"\(ISOTime.string(d.last))\","
                + "\"lastReceived\":\"\(ISOTime.string(d.lastReceived))\"}"
        }
        out += "]}\n"
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: out)))
    }

    /// The query's page: `limit` (``Configuration/defaultPageSize`` when absent, at most
    /// ``Configuration/maxPageSize``) and `cursor` (a token from a previous page).
    func page(_ q: FlatDictionary<Substring, Substring>) throws -> (limit: Int, cursor: TrailCursor?) {
        var limit = configuration.defaultPageSize
        if let text = q["limit"], !text.isEmpty {
            guard let n = Int(text), (1...configuration.maxPageSize).contains(n) else {
                throw HTTPError(
                    .badRequest, message: "limit: '\(text)' is not a number from 1 to \(configuration.maxPageSize)")
            }
            limit = n
        }
        var cursor: TrailCursor?
        if let text = q["cursor"], !text.isEmpty {
            guard let c = TrailCursor(token: String(text)) else {
                throw HTTPError(.badRequest, message: "cursor: not a cursor this server gave")
            }
            cursor = c
        }
        return (limit, cursor)
    }

    /// The device id of a `{id}` path segment, percent-decoded.
    static func deviceID(_ context: ServerContext) throws -> String {
        let raw = context.parameters.get("id") ?? ""
        guard let id = PercentEncoding.decode(raw) else {
            throw HTTPError(.badRequest, message: "the device id in the path is not valid percent-encoded UTF-8")
        }
        return id
    }

    /// `GET /v1/devices/{id}/trail`: one page, and where the next starts (a `Link: <...>; rel="next"`
    /// header, and a `"next"` member in JSON and GeoJSON).
    func trailResponse(_ request: Request, _ context: ServerContext) async throws -> Response {
        let device = try Self.deviceID(context)
        try authorize(context, device: device)
        let q = request.uri.queryParameters
        func time(_ key: String) throws -> Double? {
            guard let text = q[key[...]].map(String.init), !text.isEmpty else { return nil }
            if let t = ISOTime.parse(text) ?? Double(text) { return t }
            throw HTTPError(.badRequest, message: "\(key): '\(text)' is neither ISO 8601 UTC nor Unix seconds")
        }
        let from = try time("from") ?? -.infinity
        let to = try time("to") ?? .infinity
        let format = q["format"].map(String.init) ?? "geojson"
        guard ["geojson", "gpx", "json"].contains(format) else {
            throw HTTPError(.badRequest, message: "format: '\(format)' is not geojson, gpx or json")
        }
        let (limit, cursor) = try page(q)
        let includeInvalid = q["invalid"] == "true"
        guard try await store.device(device) != nil else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        let (records, next) = try await store.trail(
            device: device, from: from, to: to, after: cursor, limit: limit,
            includeInvalid: includeInvalid)
        var headers: HTTPFields = [:]
        var nextMember: [UInt8] = []
        if let next {
            var link = "/v1/devices/\(PercentEncoding.encode(device))/trail?"
            var items = ["format=\(format)", "limit=\(limit)", "cursor=\(next.token)"]
            if includeInvalid { items.append("invalid=true") }
            if let f = q["from"], !f.isEmpty { items.append("from=\(PercentEncoding.encode(String(f)))") }
            if let t = q["to"], !t.isEmpty { items.append("to=\(PercentEncoding.encode(String(t)))") }
            link += items.joined(separator: "&")
            headers[HTTPField.Name("Link")!] = "<\(link)>; rel=\"next\""
            nextMember = Array(",\"next\":\"\(next.token)\"".utf8)
        }
        headers[.contentType] =
            switch format {
            case "geojson": "application/geo+json"
            case "gpx": "application/gpx+xml"
            default: "application/json"
            }
        // Encoding a page of up to maxPageSize records is work for the blocking pool.
        let bytes = try await offLoop { [nextMember] in
            /// Adds `"next":CURSOR` to a JSON object.
            func withNext(_ object: [UInt8]) -> [UInt8] {
                guard !nextMember.isEmpty, let close = object.lastIndex(of: UInt8(ascii: "}")) else { return object }
                var out = object
                out.insert(contentsOf: nextMember, at: close)
                return out
            }
            return switch format {
            case "geojson": withNext(TrailExport.geoJSON(device: device, records: records))
            case "gpx": TrailExport.gpx(device: device, records: records)
            default: withNext(JSONBatch.encode(device: device, records: records))
            }
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// An HTML page with every device's latest position (each a link to its trail) and each
    /// device's trail drawn (SVG inline, nothing fetched), or one device's with `?device=ID` (one
    /// page of it: `limit`, `cursor`, and a link to the next page). Each
    /// trail is read a page at a time and its line drawn through at most
    /// ``Configuration/maxPointsDrawn`` points; at most ``Configuration/maxDevicesDrawn`` devices.
    func mapPage(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        var wanted = q["device"].map(String.init)
        if let own = context.identity.onlyDevice {
            if let wanted { try authorize(context, device: wanted) }
            wanted = own
        }
        let (limit, cursor) = try page(q)
        func text(_ s: String) -> String {
            var out: [UInt8] = []
            ByteWriting.appendXMLEscaped(s, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        let tokenQuery = q["token"].map { "&token=\(PercentEncoding.encode(String($0)))" } ?? ""
        var html = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>keeptrack trails</title>
            <style>body{font-family:sans-serif;margin:24px;background:#fff} h1{font-size:20px} section{margin-bottom:32px}</style>
            </head><body><h1>keeptrack: stored trails</h1>

            """
        let latest = try await store.latest(device: context.identity.onlyDevice)
        if !latest.isEmpty {
            html +=
                "<section><h2>Latest positions (\(latest.count) devices)</h2>\n"
                + Self.latestSVG(latest, selected: wanted, tokenQuery: tokenQuery) + "</section>\n"
        }
        let devices: [DeviceSummary]
        if let wanted {
            devices = try await store.device(wanted).map { [$0] } ?? []
        } else {
            devices = try await store.devices()
        }
        if devices.isEmpty { html += wanted == nil ? "<p>No trail stored yet.</p>\n" : "<p>No such device.</p>\n" }
        for (n, d) in devices.enumerated() {
            let href = text("/map/svg?device=\(PercentEncoding.encode(d.id))\(tokenQuery)")
            guard n < configuration.maxDevicesDrawn else {
                if n == configuration.maxDevicesDrawn {
                    html += "<p>\(devices.count - n) more devices, not drawn here (at most \(n) a page):</p>\n"
                }
                html += "<p><a href=\"\(href)\">\(text(d.id))</a></p>\n"
                continue
            }
            let (records, next) = try await store.trail(device: d.id, after: wanted == nil ? nil : cursor, limit: limit)
            html += "<section><h2><a href=\"\(href)\">\(text(d.id))</a></h2>\n"
            if next != nil || cursor != nil && wanted != nil {
                html += "<p>Points \(records.count) of \(d.points) stored, a page of at most \(limit).</p>\n"
            }
            let maxPoints = configuration.maxPointsDrawn
            html += try await offLoop {
                TrailSVG.render(title: d.id, records: records, width: 900, maxPoints: maxPoints)
            }
            if let next {
                let nextHref = text(
                    "/map/svg?device=\(PercentEncoding.encode(d.id))&limit=\(limit)&cursor=\(next.token)\(tokenQuery)")
                html += "<p><a rel=\"next\" href=\"\(nextHref)\">next page</a></p>\n"
            }
            html += "</section>\n"
        }
        html += "</body></html>\n"
        return Response(
            status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    func setFaults(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body(request, context)
        let new: Faults
        do {
            new = try JSONDecoder().decode(Faults.self, from: Data(bytes))
        } catch {
            let code = ErrorAnswer.Code(rawValue: TrackServerError.Code.invalidFaults.rawValue)
            throw ErrorAnswer(.badRequest, code: code, message: "faults: " + Faults.decodingProblem(error))
        }
        if let problem = new.problem {
            throw ErrorAnswer(.badRequest, code: .init(rawValue: problem.code.rawValue), message: "faults: \(problem)")
        }
        faults.withLock { $0 = new }
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}\n")))
    }
}

/// The request context: Hummingbird's, plus the connection (to refuse or drop it) and the fault
/// decision.
struct ServerContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    var drop = false
    /// Who sent the request (``AccessMiddleware``); everyone is the admin when no credential exists.
    var identity = Identity.admin
    /// The user of an HTTP Basic credential, if any.
    var basicUser: String?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    var maxUploadSize: Int { 8 << 20 }
}

/// Injects the configured faults before a request reaches its route.
struct FaultMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let server: TrackServer

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        // Health, metrics and the fault switch stay reachable.
        let path = request.uri.path
        if path == "/healthz" || path == "/metrics" || path == "/v1/faults" {
            return try await next(request, context)
        }
        let (decision, faults) = server.faults.withLock { f in (f.decide(), f) }
        if faults.delay > 0 {
            try await server.clock.sleep(until: server.clock.now.advanced(by: .seconds(faults.delay)), tolerance: nil)
        }
        server.metrics.request(decision)
        switch decision {
        case .refuse:
            try await context.channel.close()
            throw HTTPError(.serviceUnavailable)
        case .fail:
            var headers: HTTPFields = [.contentType: "text/plain"]
            if let r = faults.retryAfter { headers[.retryAfter] = String(r) }
            return Response(
                status: .init(code: faults.failStatus), headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: "injected failure (\(faults.failStatus))\n")))
        case .garbage:
            return Response(
                status: .ok, headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(string: "<html><body>Welcome to the hotel WiFi</body></html>\n")))
        case .drop:
            var c = context
            c.drop = true
            return try await next(request, c)
        case .serve:
            return try await next(request, context)
        }
    }
}

/// Answers 413 from the head when `Content-Length` is over the limit, and closes the connection
/// without waiting for the body.
struct EarlyLimitMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let maxBodyBytes: Int

    func handle(
        _ request: Request, context: ServerContext,
        next: (Request, ServerContext) async throws -> Response
    ) async throws -> Response {
        if let text = request.headers[.contentLength] {
            guard let length = Int(text), length >= 0 else {
                TrackServer.closeAfterAnswer(context)
                throw HTTPError(.badRequest, message: "Content-Length: '\(text)' is not a length")
            }
            if length > maxBodyBytes {
                TrackServer.closeAfterAnswer(context)
                throw HTTPError(.contentTooLarge, message: "the body is larger than \(maxBodyBytes) bytes")
            }
        }
        return try await next(request, context)
    }
}
