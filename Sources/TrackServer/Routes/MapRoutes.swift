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

/// The map (each `GET` with its `HEAD`):
///
/// - `GET /map` (and `GET /` for a browser asking for HTML): one page of our own on Leaflet
///   (``MapShell``), with its script (`/map/app.js`); nothing comes from a CDN. The page takes its
///   token from `?token=` once and keeps it in `sessionStorage`: it holds no token and no data, so it
///   is served without one. The device list and markers come from the live stream, trails from
///   `/v1/devices/{id}/trail`, page by page (docs/live.md).
/// - `GET /map/leaflet/{name}`, `GET /map/leaflet/images/{name}`: Leaflet's files, read from Debian's
///   `libjs-leaflet` (``TrackServer/MapSettings/leafletDirectory``).
/// - `GET /map/svg`: the stored trails drawn as SVG by the server (``TrailsPage``).
struct MapRoutes: Sendable {
    let shell: MapShell
    let leaflet: LeafletFiles
    let trails: TrailsPage

    /// Paths served without a credential: the page and its scripts carry no data.
    static func isPublic(_ path: String) -> Bool {
        path == "/map" || path == "/map/app.js" || path.hasPrefix("/map/leaflet/")
    }

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        let script = Self.asset(Array(MapScript.source.utf8), type: "text/javascript; charset=utf-8")
        routes.get("/map") { request, _ in shell.response(to: request) }
        routes.head("/map") { request, _ in try await Answer.head(shell.response(to: request)) }
        // HEAD / never stores (GET / is OsmAnd's ingest): the head of what a browser gets there.
        routes.head("/") { request, _ in try await Answer.head(shell.response(to: request)) }
        routes.get("/map/app.js") { _, _ in script }
        routes.head("/map/app.js") { _, _ in try await Answer.head(script) }
        routes.get("/map/leaflet/{name}") { _, context in try leaflet.file(context, images: false) }
        routes.head("/map/leaflet/{name}") { _, context in try await Answer.head(leaflet.file(context, images: false)) }
        routes.get("/map/leaflet/images/{name}") { _, context in try leaflet.file(context, images: true) }
        routes.head("/map/leaflet/images/{name}") { _, context in
            try await Answer.head(leaflet.file(context, images: true))
        }
        routes.get("/map/svg") { request, context in try await trails.response(request, context) }
        routes.head("/map/svg") { request, context in try await Answer.head(trails.response(request, context)) }
        return routes
    }

    static func asset(_ bytes: [UInt8], type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "max-age=3600"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// The map page, `/map`: its markup, the settings its script reads, no token, no data.
struct MapShell: Sendable {
    let html: [UInt8]

    /// Whether a request to `/` is a browser's that asks for a page (OsmAnd's clients never ask for HTML
    /// nor send a device id without one).
    static func isWanted(by request: Request) -> Bool {
        guard request.method == .get || request.method == .head else { return false }
        let q = request.uri.queryParameters
        guard q["id"] == nil, q["deviceid"] == nil else { return false }
        return request.headers[.accept]?.contains("text/html") == true
    }

    /// The page for `settings`: its markup, the settings its script reads (tiles, attribution, the
    /// offline delay), no token, no data.
    init(settings map: TrackServer.MapSettings, offlineAfter: Duration) {
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
        ByteWriting.appendInt(offlineAfter.components.seconds, to: &settings)
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
        self.html = Array(html.utf8)
    }

    func response(to request: Request) -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: html)))
    }
}

/// Leaflet's files (`leaflet.js`, `leaflet.css`, `images/NAME.png`) from its directory: only plain
/// names, each read once (a few hundred KB).
final class LeafletFiles: Sendable {
    let directory: String
    let cache = Mutex([String: [UInt8]]())

    init(directory: String) { self.directory = directory }

    /// A file of Leaflet's: `name` in the directory, or in its `images` directory.
    func file(_ context: ServerContext, images: Bool) throws -> Response {
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
        let path = directory + (images ? "/images/" : "/") + name
        if let cached = cache.withLock({ $0[path] }) { return MapRoutes.asset(cached, type: type) }
        guard let bytes = try? readFile(path) else {
            throw HTTPError(.notFound, message: "no \(name) in Leaflet's directory")
        }
        cache.withLock { $0[path] = bytes }
        return MapRoutes.asset(bytes, type: type)
    }
}
