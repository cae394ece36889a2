import EndpointEvents
import Delivery
import Geo
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import MQTT
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization
import TrackStore

/// The endpoint: a real HTTP server over a store (`TrackStore`) that stores what trackers send and
/// answers queries over it. It composes the route collections, each a concern a page long:
///
/// - ``IngestRoutes``: our JSON batch, Traccar's OsmAnd, OwnTracks (plain and encrypted), Overland.
/// - ``TrailRoutes``: devices, trails, each device's latest position, positions by area.
/// - ``StopsRoutes``: stops and trips.
/// - ``RecorderRoutes``: the OwnTracks Recorder's read API (`/api/0/...`).
/// - ``StreamRoutes`` and ``LiveStream``: the live stream (`/v1/stream`) and the Recorder's `/ws/last`.
/// - ``MapRoutes``: the map page, its assets, Leaflet's files, the trails as SVG.
/// - ``AdminRoutes``: `/healthz`, `/metrics`, `/openapi.json`, `PUT /v1/faults`.
///
/// and owns the server's life: its ``Configuration``, the middlewares every route goes through (CORS,
/// error answers, the early body limit, fault injection, access), connection limits
/// (``ConnectionGate``), and one service group (the HTTP server, the stream's feed, MQTT ingest,
/// the Home Assistant relay, retention). docs/http-api.md and docs/openapi.yaml describe the routes.
///
/// Bad requests get a 400 whose body names the problem (`records[3].lat: 95 is out of range
/// [-90, 90]`), every refusal in one body (``ErrorAnswer``); bodies over
/// ``Configuration/maxBodyBytes`` a 413 (at once when `Content-Length` says so); a missing or wrong
/// token a 401. The limits under hostile load (connections, timeouts, bodies in memory, page sizes)
/// are in ``Configuration``.
public final class TrackServer: Sendable {
    public let configuration: Configuration
    /// The store the server reads and writes; the caller opened it and closes it.
    public let store: any TrackStore
    let metrics = ServerMetrics()
    let logger: Logger
    /// Receipt times, the retention's cutoff and sweeps, MQTT reconnections, injected delays.
    let clock: any EpochClock
    let faults: FaultInjection
    let gate: ConnectionGate
    let bodies: BodyBudget
    /// The live stream's clients (``StreamHub``).
    let streamHub: StreamHub
    /// Every stored batch on its way to the stream, and the offline events (``OfflineWatch``).
    let offlineWatch: OfflineWatch
    /// The MQTT subscription's state (``MQTTIngest``).
    let mqtt = MQTTStatus()
    let boundPort = Atomic<Int>(0)
    /// Fired when the server listens (``listeningPort()`` waits for it).
    let listening = Signal()
    let serviceGroup = Mutex(GroupState())
    /// Share links' tokens and rates (``ShareAccess``).
    let shareAccess: ShareAccess
    /// The reverse geocoder, when one is configured (``ReverseGeocoder``).
    let geocoder: ReverseGeocoder?
    /// How hooks are reached (``Configuration/EventSettings``).
    let deliveryKinds: DeliveryKinds
    /// The hooks' lanes (``DeliveryWorker``), run in the service group when the server delivers.
    public let deliveryWorker: DeliveryWorker

    struct GroupState {
        var group: ServiceGroup?
        var stopRequested = false
    }

    /// A server over `store`, which the caller opened (`TrackStorePostgres`' `TrackDatabase` opens the
    /// store a `--db` value names; `SQLiteTrackStore(path:)` one file) and closes after the server
    /// stopped.
    ///
    /// - Parameters:
    ///   - clock: receipt times, the retention's cutoff and the waits (retention sweeps, MQTT
    ///     reconnections, injected delays). The default is the wall clock.
    /// - Throws: `MQTTError` for a broker URL that cannot work: a setting to fix now, not a retry loop
    ///   later.
    public init(
        configuration: Configuration, store: any TrackStore, logger: Logger = Logger(label: "keeptrack.serve"),
        clock: any EpochClock = WallClock()
    ) throws {
        if let mqtt = configuration.mqtt { _ = try MQTTEndpoint(parsing: mqtt.url, wildcards: true) }
        if let homeAssistant = configuration.homeAssistant { _ = try HomeAssistantRelay.endpoint(homeAssistant) }
        self.configuration = configuration
        self.store = store
        self.faults = FaultInjection(configuration.faults)
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
        self.offlineWatch = OfflineWatch(
            hub: streamHub, after: stream.offlineAfter, clock: clock, store: store, logger: logger)
        self.shareAccess = ShareAccess(store: store, clock: clock, limits: configuration.shares)
        self.geocoder = configuration.geocoder.map {
            ReverseGeocoder(base: $0, store: store, clock: clock, logger: logger)
        }
        var rules = EventRules()
        if let limit = configuration.events.overspeedLimit { rules.overspeed = OverspeedRule(limit: limit) }
        store.setEventRules(rules)
        store.setMaximumAccuracy(configuration.maxAccuracy)
        let kinds = DeliveryKinds(
            allowPrivate: configuration.events.allowPrivateHooks,
            instance: String(UInt32.random(in: 0...UInt32.max), radix: 16))
        self.deliveryKinds = kinds
        self.deliveryWorker = DeliveryWorker(
            queue: StoreDeliveryQueue(store: store), makeKind: { kinds.make($0) },
            clock: clock, configuration: configuration.events.delivery,
            logger: Logger(label: "keeptrack.delivery"))
    }

    // MARK: - The parts

    var credentials: Credentials { Credentials(token: configuration.token, store: store) }

    var ingest: Ingest { Ingest(store: store, metrics: metrics, clock: clock, logger: logger) }

    var bodyReader: BodyReader {
        BodyReader(
            limit: configuration.maxBodyBytes, timeout: configuration.bodyTimeout, budget: bodies,
            gzipRequests: metrics.gzipRequests)
    }

    var paging: Paging { Paging(defaultSize: configuration.defaultPageSize, maxSize: configuration.maxPageSize) }

    var liveStream: LiveStream {
        LiveStream(
            store: store, hub: streamHub, credentials: credentials, shares: shareAccess, clock: clock,
            corsOrigins: configuration.corsOrigins,
            pingInterval: configuration.stream.pingInterval)
    }

    /// The routes, behind the middlewares every request goes through, in order: CORS (a preflight is
    /// answered before anything else), error answers (every refusal in one body), the early body
    /// limit, fault injection (when on), access (who the request is).
    func router() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        let origins = configuration.corsOrigins
        if !origins.isEmpty { router.add(middleware: CrossOriginMiddleware(origins: origins)) }
        router.add(middleware: ErrorAnswerMiddleware(logger: logger))
        router.add(middleware: EarlyLimitMiddleware(maxBodyBytes: configuration.maxBodyBytes))
        if configuration.faultInjection {
            router.add(middleware: FaultMiddleware(faults: faults, clock: clock, metrics: metrics))
        }
        router.add(middleware: AccessMiddleware(credentials: credentials, shares: shareAccess))
        let map = configuration.map
        let shell = MapShell(
            settings: map, offlineAfter: configuration.stream.offlineAfter, maxAccuracy: configuration.maxAccuracy)
        router.addRoutes(
            IngestRoutes(
                ingest: ingest, body: bodyReader, openRegistration: configuration.openRegistration,
                mapShell: shell
            ).routes)
        router.addRoutes(TrailRoutes(store: store, paging: paging).routes)
        let places = PlaceNaming(store: store, geocoder: geocoder)
        router.addRoutes(StopsRoutes(store: store, places: places).routes)
        router.addRoutes(StatsRoutes(store: store, places: places).routes)
        router.addRoutes(ShareRoutes(store: store, access: shareAccess, shell: shell, clock: clock).routes)
        router.addRoutes(
            EventRoutes(
                store: store, body: bodyReader, paging: paging, clock: clock, kinds: deliveryKinds,
                hooksChanged: { [deliveryWorker] in deliveryWorker.hooksChanged() }
            ).routes)
        router.addRoutes(RecorderRoutes(store: store, body: bodyReader, clock: clock, paging: paging).routes)
        router.addRoutes(StreamRoutes().routes)
        router.addRoutes(
            MapRoutes(
                shell: shell, leaflet: LibraryFiles(directory: map.leafletDirectory, library: "Leaflet"),
                chart: LibraryFiles(directory: map.chartDirectory, library: "dygraphs"),
                trails: TrailsPage(
                    store: store, paging: paging, maxPointsDrawn: configuration.maxPointsDrawn,
                    maxDevicesDrawn: configuration.maxDevicesDrawn)
            ).routes)
        router.addRoutes(
            AdminRoutes(
                metricsText: { [self] in await metricsText() },
                faults: configuration.faultInjection ? faults : nil, body: bodyReader
            ).routes)
        return router
    }

    // MARK: - The server's life

    /// Whether listening on `host` with `token` exposes the store: no token on an address other than
    /// loopback lets anyone on the network read every trail.
    public static func isExposed(host: String, token: String?) -> Bool {
        guard token == nil else { return false }
        return !(host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127."))
    }

    /// The port the server listens on, once it does (0 before).
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// The port, once the server listens (it waits until then; one caller at a time).
    public func listeningPort() async -> Int {
        while port == 0 && !Task.isCancelled { await listening.wait() }
        return port
    }

    /// Runs until ``shutdown()`` (or, with `signals`, SIGINT, SIGTERM or SIGHUP) and a graceful stop. `onReady`
    /// gets the port once the server listens.
    public func run(signals: Bool = false, onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let bodyTimeout = TimeAmount(configuration.bodyTimeout)
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [BodyTimeoutHandler(timeout: bodyTimeout)],
            idleTimeout: TimeAmount(configuration.idleTimeout))
        _ = gate.prepare(
            maxConnections: configuration.maxConnections, raiseDescriptorLimit: configuration.raiseDescriptorLimit,
            logger: logger)
        let gate = self.gate
        let stream = liveStream
        var server = HTTPServerBuilder { responder in
            CappedChannel(base: stream.channel(responder, http1), gate: gate, answerInClear: true)
        }
        if let cert = configuration.tlsCertificate, let key = configuration.tlsKey {
            let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            server = HTTPServerBuilder { responder in
                CappedChannel(
                    base: try TLSChannel(stream.channel(responder, http1), tlsConfiguration: tls),
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
        var services: [any Service] = [
            app,
            StreamService(store: store, hub: streamHub, watch: offlineWatch, clock: clock, logger: logger),
        ]
        if let mqtt = configuration.mqtt {
            services.append(
                try MQTTIngest(
                    ingest: ingest, status: self.mqtt, configuration: mqtt, clock: clock, logger: logger))
        }
        if let homeAssistant = configuration.homeAssistant {
            services.append(
                try HomeAssistantRelay(
                    configuration: homeAssistant, store: store, watch: offlineWatch, clock: clock, logger: logger))
        }
        if let geocoder { services.append(geocoder) }
        if configuration.events.deliver {
            services.append(
                EventDeliveryService(
                    store: store, worker: deliveryWorker, clock: clock, logger: Logger(label: "keeptrack.delivery")))
        }
        if let retention = configuration.retention {
            services.append(RetentionService(store: store, retention: retention, clock: clock, logger: logger))
        }
        services.insert(ConnectionSweeper(gate: gate), at: 0)  // stopped after the server
        let group = ServiceGroup(
            configuration: .init(
                services: services, gracefulShutdownSignals: signals ? [.sigterm, .sigint, .sighup] : [], logger: logger
            ))
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

    /// What `GET /metrics` shows (Prometheus text).
    public func metricsText() async -> String {
        metrics.prometheus(
            stored: (try? await store.count()) ?? -1, connections: gate.served,
            bodyBytesInFlight: bodies.inUse)
    }

    /// Stores one OwnTracks message from `user`'s `device`, as `POST /owntracks` does with a request's
    /// body (``Ingest/ownTracks(_:user:device:)``), for a caller that has one without a request.
    public func ingestOwnTracks(_ bytes: [UInt8], user: String?, device: String?) async throws
        -> (accepted: Int, duplicates: Int)
    {
        let result = try await ingest.ownTracks(bytes, user: user, device: device)
        return (result.accepted, result.duplicates)
    }
}

/// The endpoint as a service of a program's group (`keeptrack replay --upload embedded` runs it
/// beside the tracker and its uploader): it listens until the group stops it, after the uploader
/// that sends to it.
extension TrackServer: Service {
    public func run() async throws {
        try await run(signals: false, onReady: { _ in })
    }
}
