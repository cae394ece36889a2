import FoundationEssentials
import Formats
import Geo
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

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
/// - `POST /owntracks`: OwnTracks JSON (``OwnTracks``), the device from `X-Limit-D` (or `?d=`);
///   answers `[]`.
///
/// Queries: `GET /v1/devices`, `GET /v1/devices/{id}/trail?from=&to=&format=geojson|gpx|json`,
/// `GET /healthz`, `GET /metrics` (Prometheus text). `PUT /v1/faults` sets ``Faults``.
///
/// Bad requests get a 400 whose body names the problem (`records[3].lat: 95 is out of range
/// [-90, 90]`); bodies over ``Configuration/maxBodyBytes`` a 413; a missing or wrong token a 401.
public final class TrackServer: Sendable {
    public struct Configuration: Sendable {
        /// The default is 127.0.0.1.
        public var host = "127.0.0.1"
        /// 0 (the default) picks a free port.
        public var port = 0
        /// The SQLite file.
        public var database: String
        /// The token devices must present; `nil` (the default) accepts anyone.
        public var token: String?
        /// The largest request body, after decompression. The default is 8 MiB.
        public var maxBodyBytes = 8 << 20
        public var faults = Faults()
        /// PEM certificate chain and private key: serve HTTPS. The default is plain HTTP.
        public var tlsCertificate: String?
        public var tlsKey: String?

        public init(database: String) { self.database = database }
    }

    public let configuration: Configuration
    public let store: TrackStore
    let faults: Mutex<Faults>
    let metrics = ServerMetrics()
    let logger: Logger
    let boundPort = Atomic<Int>(0)
    let now: @Sendable () -> Double

    public init(configuration: Configuration, logger: Logger = Logger(label: "keeptrack.serve"),
                now: @escaping @Sendable () -> Double = WallClock.seconds) throws {
        self.configuration = configuration
        self.store = try TrackStore(path: configuration.database)
        self.faults = Mutex(configuration.faults)
        self.logger = logger
        self.now = now
    }

    /// The port the server listens on, once it does (0 before).
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// Runs until ``shutdown()`` (or, with `signals`, SIGINT/SIGTERM) and a graceful stop. `onReady`
    /// gets the port once the server listens.
    public func run(signals: Bool = false, onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        var server: HTTPServerBuilder = .http1()
        if let cert = configuration.tlsCertificate, let key = configuration.tlsKey {
            let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
            let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            server = try .tls(.http1(), tlsConfiguration: tls)
        }
        let app = Hummingbird.Application(
            router: router(),
            server: server,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port),
                                 serverName: "keeptrack-serve"),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? 0
                self.boundPort.store(port, ordering: .releasing)
                await onReady(port)
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(
            services: [app], gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [], logger: logger))
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
    public func metricsText() -> String { metrics.prometheus(stored: (try? store.count()) ?? -1) }

    /// The current faults.
    public var currentFaults: Faults {
        get { faults.withLock { $0 } }
        set { faults.withLock { $0 = newValue } }
    }

    func router() -> Router<ServerContext> {
        let router = Router(context: ServerContext.self)
        router.add(middleware: FaultMiddleware(server: self))
        router.add(middleware: AuthMiddleware(token: configuration.token))
        router.post("/v1/locations") { request, context in try await self.ingestBatch(request, context) }
        router.get("/") { request, context in try await self.ingestOsmAnd(request, context) }
        router.post("/") { request, context in try await self.ingestOsmAnd(request, context) }
        router.post("/owntracks") { request, context in try await self.ingestOwnTracks(request, context) }
        router.get("/v1/devices") { _, _ in try self.devicesResponse() }
        router.get("/v1/devices/{id}/trail") { request, context in try self.trailResponse(request, context) }
        router.get("/healthz") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: .init(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}\n")))
        }
        router.get("/metrics") { _, _ in
            let stored = (try? self.store.count()) ?? -1
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: .init(byteBuffer: ByteBuffer(string: self.metrics.prometheus(stored: stored))))
        }
        router.put("/v1/faults") { request, context in try await self.setFaults(request, context) }
        router.get("/map") { request, _ in try self.mapPage(request) }
        return router
    }

    // MARK: - Ingest

    /// The body, inflated when gzip, within the size limit.
    func body(_ request: Request) async throws -> [UInt8] {
        let limit = configuration.maxBodyBytes
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch {
            throw HTTPError(.contentTooLarge, message: "the body is larger than \(limit) bytes")
        }
        let bytes = Array(buffer: buffer)
        if request.headers[.contentEncoding]?.lowercased() == "gzip" {
            metrics.gzipRequests.add(1, ordering: .relaxed)
            do {
                return try Gzip.decompress(bytes, limit: limit)
            } catch where error.code == .tooLarge {
                throw HTTPError(.contentTooLarge, message: "\(error)")
            } catch {
                throw HTTPError(.badRequest, message: "\(error)")
            }
        }
        return bytes
    }

    func ingestBatch(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body(request)
        let batch: (device: String, records: [TrailRecord])
        do {
            batch = try JSONBatch.decode(bytes, now: now())
        } catch {
            metrics.rejected(1)
            throw HTTPError(.badRequest, message: "\(error)")
        }
        let result = try store.insert(batch.records, format: "json", received: now())
        metrics.stored(result.accepted, duplicates: result.duplicates, format: "json")
        let reply = "{\"accepted\":\(result.accepted),\"duplicates\":\(result.duplicates)}\n"
        return try respond(reply, contentType: "application/json", context: context)
    }

    func ingestOsmAnd(_ request: Request, _ context: ServerContext) async throws -> Response {
        var query = request.uri.query ?? ""
        if request.method == .post {
            let form = String(decoding: try await body(request), as: UTF8.self)
            if !form.isEmpty { query += (query.isEmpty ? "" : "&") + form }
        }
        let record: TrailRecord
        do {
            record = try OsmAnd.decode(query, now: now())
        } catch {
            metrics.rejected(1)
            throw HTTPError(.badRequest, message: "\(error)")
        }
        let result = try store.insert([record], format: "osmand", received: now())
        metrics.stored(result.accepted, duplicates: result.duplicates, format: "osmand")
        return try respond("", contentType: "text/plain", context: context)
    }

    func ingestOwnTracks(_ request: Request, _ context: ServerContext) async throws -> Response {
        let device = request.headers[HTTPField.Name("X-Limit-D")!] ?? request.uri.queryParameters["d"].map(String.init)
        guard let device, !device.isEmpty else {
            metrics.rejected(1)
            throw HTTPError(.badRequest, message: "the device is missing: send X-Limit-D (or ?d=)")
        }
        let bytes = try await body(request)
        let record: TrailRecord?
        do {
            record = try OwnTracks.decode(bytes, device: device, now: now())
        } catch {
            metrics.rejected(1)
            throw HTTPError(.badRequest, message: "\(error)")
        }
        if let record {
            let result = try store.insert([record], format: "owntracks", received: now())
            metrics.stored(result.accepted, duplicates: result.duplicates, format: "owntracks")
        }
        return try respond("[]", contentType: "application/json", context: context)
    }

    /// The answer to an ingest, or — when the faults say drop — half of it and a closed
    /// connection (the records are stored; the client can't know).
    func respond(_ text: String, contentType: String, context: ServerContext) throws -> Response {
        var headers: HTTPFields = [.contentType: contentType, .acceptEncoding: "gzip"]
        if context.drop {
            let full = ByteBuffer(string: text.isEmpty ? "ok" : text)
            headers[.contentLength] = String(full.readableBytes + 64)
            return Response(status: .ok, headers: headers, body: .init { writer in
                try await writer.write(full.getSlice(at: 0, length: max(1, full.readableBytes / 2))!)
                throw DroppedConnection()
            })
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    struct DroppedConnection: Error {}

    // MARK: - Queries

    func devicesResponse() throws -> Response {
        var out = "{\"devices\":["
        for (i, d) in try store.devices().enumerated() {
            if i > 0 { out += "," }
            var name: [UInt8] = []
            ByteWriting.appendJSONString(d.id, to: &name)
            out += "{\"id\":\(String(decoding: name, as: UTF8.self)),\"points\":\(d.points),"
                + "\"first\":\"\(ISOTime.string(d.first))\",\"last\":\"\(ISOTime.string(d.last))\","
                + "\"lastReceived\":\"\(ISOTime.string(d.lastReceived))\"}"
        }
        out += "]}\n"
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: out)))
    }

    func trailResponse(_ request: Request, _ context: ServerContext) throws -> Response {
        let device = context.parameters.get("id") ?? ""
        let q = request.uri.queryParameters
        func time(_ key: String) throws -> Double? {
            guard let text = q[key[...]].map(String.init), !text.isEmpty else { return nil }
            if let t = ISOTime.parse(text) ?? Double(text) { return t }
            throw HTTPError(.badRequest, message: "\(key): '\(text)' is neither ISO 8601 UTC nor Unix seconds")
        }
        let from = try time("from") ?? -.infinity
        let to = try time("to") ?? .infinity
        let records = try store.trail(device: device, from: from, to: to)
        guard try !records.isEmpty || store.devices().contains(where: { $0.id == device }) else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        let format = q["format"].map(String.init) ?? "geojson"
        switch format {
        case "geojson":
            return Response(status: .ok, headers: [.contentType: "application/geo+json"],
                            body: .init(byteBuffer: ByteBuffer(bytes: TrailExport.geoJSON(device: device, records: records))))
        case "gpx":
            return Response(status: .ok, headers: [.contentType: "application/gpx+xml"],
                            body: .init(byteBuffer: ByteBuffer(bytes: TrailExport.gpx(device: device, records: records))))
        case "json":
            return Response(status: .ok, headers: [.contentType: "application/json"],
                            body: .init(byteBuffer: ByteBuffer(bytes: JSONBatch.encode(device: device, records: records))))
        default:
            throw HTTPError(.badRequest, message: "format: '\(format)' is not geojson, gpx or json")
        }
    }

    /// An HTML page with each device's trail drawn (SVG inline, nothing fetched), or one device's
    /// with `?device=ID`.
    func mapPage(_ request: Request) throws -> Response {
        let wanted = request.uri.queryParameters["device"].map(String.init)
        var html = """
            <!DOCTYPE html>
            <html><head><meta charset="utf-8"><title>keeptrack trails</title>
            <style>body{font-family:sans-serif;margin:24px;background:#fff} h1{font-size:20px} section{margin-bottom:32px}</style>
            </head><body><h1>keeptrack: stored trails</h1>

            """
        let devices = try store.devices().filter { wanted == nil || $0.id == wanted }
        if devices.isEmpty { html += "<p>No trail stored yet.</p>\n" }
        for d in devices {
            let records = try store.trail(device: d.id)
            var id: [UInt8] = []
            ByteWriting.appendXMLEscaped(d.id, to: &id)
            html += "<section><h2><a href=\"/map?device=\(String(decoding: id, as: UTF8.self))\">\(String(decoding: id, as: UTF8.self))</a></h2>\n"
            html += TrailSVG.render(title: d.id, records: records, width: 900)
            html += "</section>\n"
        }
        html += "</body></html>\n"
        return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    func setFaults(_ request: Request, _ context: ServerContext) async throws -> Response {
        let bytes = try await body(request)
        let new: Faults
        do {
            new = try JSONDecoder().decode(Faults.self, from: Data(bytes))
        } catch {
            throw HTTPError(.badRequest, message: "faults: \(error)")
        }
        if let problem = new.problem { throw HTTPError(.badRequest, message: "faults: \(problem)") }
        faults.withLock { $0 = new }
        return Response(status: .ok, headers: [.contentType: "application/json"],
                        body: .init(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}\n")))
    }
}

/// The request context: Hummingbird's, plus the connection (to refuse or drop it) and the fault
/// decision.
struct ServerContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    var drop = false

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

    func handle(_ request: Request, context: ServerContext,
                next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        // Health, metrics and the fault switch stay reachable.
        let path = request.uri.path
        if path == "/healthz" || path == "/metrics" || path == "/v1/faults" {
            return try await next(request, context)
        }
        let (decision, faults) = server.faults.withLock { f in (f.decide(), f) }
        if faults.delay > 0 { try await Task.sleep(for: .seconds(faults.delay)) }
        server.metrics.request(decision)
        switch decision {
        case .refuse:
            try await context.channel.close()
            throw HTTPError(.serviceUnavailable)
        case .fail:
            var headers: HTTPFields = [.contentType: "text/plain"]
            if let r = faults.retryAfter { headers[.retryAfter] = String(r) }
            return Response(status: .init(code: faults.failStatus), headers: headers,
                            body: .init(byteBuffer: ByteBuffer(string: "injected failure (\(faults.failStatus))\n")))
        case .garbage:
            return Response(status: .ok, headers: [.contentType: "text/html"],
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

/// Devices authenticate with the token, as a bearer or a `token` query parameter.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let token: String?

    func handle(_ request: Request, context: ServerContext,
                next: (Request, ServerContext) async throws -> Response) async throws -> Response {
        // Health and metrics carry no personal data; everything else (the map included: open it as
        // /map?token=TOKEN) needs the token.
        guard let token, request.uri.path != "/healthz", request.uri.path != "/metrics" else {
            return try await next(request, context)
        }
        let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let query = request.uri.queryParameters["token"].map(String.init)
        guard bearer == token || query == token else {
            throw HTTPError(.unauthorized, message: "a valid token is required (Authorization: Bearer TOKEN)")
        }
        return try await next(request, context)
    }
}

/// Counters for `GET /metrics`.
final class ServerMetrics: Sendable {
    let requests = Mutex<[String: Int]>([:])
    let accepted = Mutex<[String: Int]>([:])
    let duplicates = Atomic<Int>(0)
    let rejected = Atomic<Int>(0)
    let gzipRequests = Atomic<Int>(0)

    func request(_ d: Faults.Decision) {
        let name = switch d {
        case .refuse: "refused"
        case .fail: "failed"
        case .drop: "dropped"
        case .garbage: "garbage"
        case .serve: "served"
        }
        requests.withLock { $0[name, default: 0] += 1 }
    }

    func stored(_ n: Int, duplicates d: Int, format: String) {
        accepted.withLock { $0[format, default: 0] += n }
        duplicates.add(d, ordering: .relaxed)
    }

    func rejected(_ n: Int) { rejected.add(n, ordering: .relaxed) }

    func prometheus(stored: Int) -> String {
        var out = "# HELP keeptrack_serve_requests_total Ingest requests by what the fault injection did.\n"
        out += "# TYPE keeptrack_serve_requests_total counter\n"
        for (k, v) in requests.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            out += "keeptrack_serve_requests_total{outcome=\"\(k)\"} \(v)\n"
        }
        out += "# HELP keeptrack_serve_records_accepted_total Records stored, by format.\n"
        out += "# TYPE keeptrack_serve_records_accepted_total counter\n"
        for (k, v) in accepted.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            out += "keeptrack_serve_records_accepted_total{format=\"\(k)\"} \(v)\n"
        }
        out += "# HELP keeptrack_serve_records_duplicate_total Records received again and not stored twice.\n"
        out += "# TYPE keeptrack_serve_records_duplicate_total counter\n"
        out += "keeptrack_serve_records_duplicate_total \(duplicates.load(ordering: .relaxed))\n"
        out += "# HELP keeptrack_serve_requests_rejected_total Requests answered 400.\n"
        out += "# TYPE keeptrack_serve_requests_rejected_total counter\n"
        out += "keeptrack_serve_requests_rejected_total \(rejected.load(ordering: .relaxed))\n"
        out += "# HELP keeptrack_serve_gzip_requests_total Requests with a gzip body.\n"
        out += "# TYPE keeptrack_serve_gzip_requests_total counter\n"
        out += "keeptrack_serve_gzip_requests_total \(gzipRequests.load(ordering: .relaxed))\n"
        out += "# HELP keeptrack_serve_records_stored Records in the store.\n"
        out += "# TYPE keeptrack_serve_records_stored gauge\n"
        out += "keeptrack_serve_records_stored \(stored)\n"
        return out
    }
}
