import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import SystemIO
import Synchronization
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

/// The map page, `/map` (and `/` for a browser asking for HTML): one page of our own on Leaflet,
/// which `serve` reads from Debian's `libjs-leaflet` (``MapSettings/leafletDirectory``) and serves
/// under `/map/leaflet/`; nothing comes from a CDN. The page takes its token from `?token=` once
/// and keeps it in `sessionStorage`: the HTML holds no token and no data, so it is served without
/// one. The device list and markers come from the live stream, trails from
/// `/v1/devices/{id}/trail`, page by page (docs/live.md).
extension TrackServer {
    /// The map page's base map and library.
    public struct MapSettings: Sendable, Hashable {
        /// The raster tiles' URL template (`{z}`, `{x}`, `{y}`, `{s}`), or `nil` for a plain
        /// background. The default is OpenStreetMap's standard tiles.
        public var tiles: String? = MapSettings.openStreetMapTiles
        /// The tiles' attribution, shown on the map (HTML). The default is OpenStreetMap's.
        public var tilesAttribution =
            "&copy; <a href=\"https://www.openstreetmap.org/copyright\">OpenStreetMap</a> contributors"
        /// Where Leaflet is installed. The default is Debian's `libjs-leaflet`, /usr/share/javascript/leaflet.
        public var leafletDirectory = "/usr/share/javascript/leaflet"

        public static let openStreetMapTiles = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"

        public init() {}
    }

    /// Adds the map page's routes, and `HEAD` for every `GET` route of the API.
    func addMapRoutes(_ router: Router<ServerContext>) {
        router.get("/map") { _, _ in self.mapShell() }
        router.get("/map/app.js") { _, _ in
            Self.asset(Array(MapScript.source.utf8), type: "text/javascript; charset=utf-8")
        }
        router.get("/map/leaflet/{name}") { _, context in try self.leafletFile(context, images: false) }
        router.get("/map/leaflet/images/{name}") { _, context in try self.leafletFile(context, images: true) }
        // HEAD answers as GET does, without the body.
        router.head("/map") { _, _ in try await Self.head(self.mapShell()) }
        // HEAD / never stores (GET / is OsmAnd's ingest): the head of what a browser gets there.
        router.head("/") { _, _ in try await Self.head(self.mapShell()) }
        router.head("/map/app.js") { _, _ in
            try await Self.head(Self.asset(Array(MapScript.source.utf8), type: "text/javascript; charset=utf-8"))
        }
        router.head("/map/leaflet/{name}") { _, context in try await Self.head(self.leafletFile(context, images: false))
        }
        router.head("/map/leaflet/images/{name}") { _, context in
            try await Self.head(self.leafletFile(context, images: true))
        }
        router.head("/map/svg") { request, context in try await Self.head(self.mapPage(request, context)) }
        router.head("/v1/devices") { _, context in try await Self.head(self.devicesResponse(context)) }
        router.head("/v1/devices/latest") { _, context in try await Self.head(self.latestResponse(context)) }
        router.head("/v1/positions") { request, context in try await Self.head(self.positionsResponse(request, context))
        }
        router.head("/v1/devices/{id}/trail") { request, context in
            try await Self.head(self.trailResponse(request, context))
        }
        router.head("/healthz") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .contentLength: "16"])
        }
        router.head("/metrics") { _, _ in
            let text = await self.metricsText()
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/plain; version=0.0.4",
                    .contentLength: String(text.utf8.count),
                ])
        }
        router.head("/v1/stream") { _, _ in try await Self.head(Self.streamWithoutUpgrade()) }
        router.head(.init(Self.recorderLivePath)) { _, _ in
            try await Self.head(Self.streamWithoutUpgrade(Self.recorderLivePath))
        }
    }

    /// `response`'s head: its status and headers, `Content-Length` the length of the body it drops.
    static func head(_ response: Response) async throws -> Response {
        var r = response
        let writer = CountingWriter()
        try await response.body.write(writer)
        // The body first: setting it sets Content-Length to its own length.
        r.body = .init()
        r.headers[.contentLength] = String(writer.count.load(ordering: .relaxed))
        return r
    }

    /// Whether a request to `/` is a browser's that asks for a page (OsmAnd's clients never ask for HTML
    /// nor send a device id without one).
    static func wantsMapPage(_ request: Request) -> Bool {
        guard request.method == .get || request.method == .head else { return false }
        let q = request.uri.queryParameters
        guard q["id"] == nil, q["deviceid"] == nil else { return false }
        return request.headers[.accept]?.contains("text/html") == true
    }

    /// The page: its markup, the settings its script reads (tiles, attribution), no token, no data.
    func mapShell() -> Response {
        let map = configuration.map
        let leaflet = access(map.leafletDirectory + "/leaflet.js", R_OK) == 0
        var settings: [UInt8] = []
        ByteWriting.appendStatic("{\"tiles\":", to: &settings)
        if let tiles = map.tiles {
            ByteWriting.appendJSONString(tiles, to: &settings)
        } else {
            ByteWriting.appendStatic("null", to: &settings)
        }
        ByteWriting.appendStatic(",\"attribution\":", to: &settings)
        ByteWriting.appendJSONString(map.tilesAttribution, to: &settings)
        ByteWriting.appendStatic(",\"offlineAfter\":", to: &settings)
        ByteWriting.appendInt(configuration.stream.offlineAfter.components.seconds, to: &settings)
        ByteWriting.appendStatic("}", to: &settings)
        // In a <script> element: "</" would end it.
        let json = String(decoding: settings, as: UTF8.self).replacing("</", with: "<\\/")
        let missing =
            leaflet
            ? ""
            : """
            <p id="no-leaflet" role="alert">Leaflet is not installed on the server (\(map.leafletDirectory)): \
            install Debian's libjs-leaflet. <a href="/map/svg">The trails without a map</a>.</p>
            """
        let html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>keeptrack: live map</title>
            <link rel="stylesheet" href="/map/leaflet/leaflet.css">
            <style>
            html,body{height:100%;margin:0;font:14px/1.4 system-ui,sans-serif}
            body{display:flex}
            #side{width:280px;overflow:auto;border-right:1px solid #ccc;padding:8px;box-sizing:border-box}
            #map{flex:1;background:#eef1f4}
            #devices{list-style:none;margin:0;padding:0}
            #devices li{padding:4px 6px;border-radius:4px;cursor:pointer;display:flex;
              justify-content:space-between;gap:6px}
            #devices li.selected{background:#dde8f6}
            #devices .state{font-size:12px;color:#777}
            #devices li[data-live="true"] .state{color:#2e9e44}
            #status{font-size:12px;color:#777;margin-top:8px}
            fieldset{margin:8px 0;border:1px solid #ddd}
            h1{font-size:16px;margin:4px 0 8px}
            </style></head>
            <body>
            <aside id="side">
            <h1>keeptrack</h1>\(missing)
            <ul id="devices" aria-label="Devices"></ul>
            <fieldset id="trail-controls" disabled>
            <legend>Trail of <span id="trail-device">(choose a device)</span></legend>
            <label>Range <select id="trail-range"><option value="">none</option><option value="today">today</option>
            <option value="yesterday">yesterday</option><option value="date">a date</option>
            <option value="all">all</option></select></label>
            <input type="date" id="trail-date" hidden>
            <div><button type="button" id="fit">Fit to trail</button>
            <label><input type="checkbox" id="follow"> Follow</label></div>
            <div id="trail-status" aria-live="polite"></div>
            </fieldset>
            <div id="status" aria-live="polite"></div>
            </aside>
            <div id="map" role="application" aria-label="Map"></div>
            <script id="settings" type="application/json">\(json)</script>
            <script src="/map/leaflet/leaflet.js"></script>
            <script src="/map/app.js"></script>
            </body></html>

            """
        return Response(
            status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// A file of Leaflet's (`leaflet.js`, `leaflet.css`, `images/NAME.png`): only plain names, read once.
    func leafletFile(_ context: ServerContext, images: Bool) throws -> Response {
        let name = context.parameters.get("name") ?? ""
        let plain =
            !name.isEmpty && !name.hasPrefix(".")
            && name.utf8.allSatisfy { c in
                (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                    || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-")
                    || c == UInt8(ascii: ".") || c == UInt8(ascii: "_")
            }
        let type: String? =
            if name.hasSuffix(".js") { "text/javascript; charset=utf-8" } else if name.hasSuffix(".css") {
                "text/css; charset=utf-8"
            } else if name.hasSuffix(".png") { "image/png" } else if name.hasSuffix(".svg") { "image/svg+xml" } else {
                nil
            }
        guard plain, let type else { throw HTTPError(.notFound) }
        let path = configuration.map.leafletDirectory + (images ? "/images/" : "/") + name
        if let cached = leafletCache.withLock({ $0[path] }) { return Self.asset(cached, type: type) }
        guard let bytes = try? readFile(path) else {
            throw HTTPError(.notFound, message: "no \(name) in Leaflet's directory")
        }
        leafletCache.withLock { $0[path] = bytes }
        return Self.asset(bytes, type: type)
    }

    static func asset(_ bytes: [UInt8], type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// Leaflet's files, read once (a few hundred KB).
let leafletCache = Mutex([String: [UInt8]]())

/// Counts the bytes of a response body (``TrackServer/head(_:)``).
final class CountingWriter: ResponseBodyWriter, Sendable {
    let count = Atomic<Int>(0)

    func write(_ buffer: ByteBuffer) async throws { count.add(buffer.readableBytes, ordering: .relaxed) }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
