import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import SystemIO
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The map (each `GET` with its `HEAD`), its files compiled in from `Resources/` and served with an
/// `ETag` (``WebAsset``):
///
/// - `GET /map` (and `GET /` for a browser asking for HTML): one page of our own on Leaflet
///   (``MapShell``, `Resources/map.html`), its script `/map/app.js` (`Resources/map.js`) and style
///   `/map/app.css` (`Resources/map.css`); nothing comes from a CDN. The page takes its token from
///   `?token=` once and keeps it in `sessionStorage`: it holds no token and no data, so it is served
///   without one. The device list and markers come from the live stream, trails from
///   `/v1/devices/{id}/trail`, page by page (docs/live.md).
/// - `GET /map/leaflet/{name}`, `GET /map/leaflet/images/{name}`: Leaflet's files, read from Debian's
///   `libjs-leaflet` (``TrackServer/MapSettings/leafletDirectory``).
/// - `GET /map/dygraphs/{name}`: dygraphs' files (the replay's speed chart), read from Debian's
///   `libjs-dygraphs` (``TrackServer/MapSettings/chartDirectory``).
/// - `GET /map/svg`: the stored trails drawn as SVG by the server (``TrailsPage``).
struct MapRoutes: Sendable {
    let shell: MapShell
    let leaflet: LibraryFiles
    let chart: LibraryFiles
    let trails: TrailsPage

    /// The page's script.
    static let script = WebAsset(PackageResources.map_js, contentType: "text/javascript; charset=utf-8")
    /// The page's style.
    static let style = WebAsset(PackageResources.map_css, contentType: "text/css; charset=utf-8")

    /// Paths served without a credential: the page and its files carry no data.
    static func isPublic(_ path: String) -> Bool {
        path == "/map" || path == "/map/app.js" || path == "/map/app.css" || path.hasPrefix("/map/leaflet/")
            || path.hasPrefix("/map/dygraphs/")
    }

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.get("/map") { request, _ in shell.page.response(to: request) }
        routes.head("/map") { request, _ in try await Answer.head(shell.page.response(to: request)) }
        // HEAD / never stores (GET / is OsmAnd's ingest): the head of what a browser gets there.
        routes.head("/") { request, _ in try await Answer.head(shell.page.response(to: request)) }
        for (path, asset) in [("/map/app.js", Self.script), ("/map/app.css", Self.style)] {
            routes.get(RouterPath(path)) { request, _ in asset.response(to: request) }
            routes.head(RouterPath(path)) { request, _ in try await Answer.head(asset.response(to: request)) }
        }
        routes.get("/map/leaflet/{name}") { request, context in try leaflet.file(request, context, images: false) }
        routes.head("/map/leaflet/{name}") { request, context in
            try await Answer.head(leaflet.file(request, context, images: false))
        }
        routes.get("/map/leaflet/images/{name}") { request, context in
            try leaflet.file(request, context, images: true)
        }
        routes.head("/map/leaflet/images/{name}") { request, context in
            try await Answer.head(leaflet.file(request, context, images: true))
        }
        routes.get("/map/dygraphs/{name}") { request, context in try chart.file(request, context, images: false) }
        routes.head("/map/dygraphs/{name}") { request, context in
            try await Answer.head(chart.file(request, context, images: false))
        }
        routes.get("/map/svg") { request, context in try await trails.response(request, context) }
        routes.head("/map/svg") { request, context in try await Answer.head(trails.response(request, context)) }
        return routes
    }
}

/// The map page, `/map` (`Resources/map.html`): its markup and the settings its script reads (tiles,
/// attribution, the offline delay, the outlier accuracy), no token, no data. Browsers ask again each time (`no-cache`) and
/// get a 304 while the page is the same. The chart library's style and script are in the page when
/// its directory holds them (the page replays without a chart otherwise).
struct MapShell: Sendable {
    let page: WebAsset

    /// The page for `settings`, with the notice that Leaflet is missing when its directory has no
    /// `leaflet.js`, and dygraphs' files when its directory has `dygraph.min.js`.
    init(settings map: TrackServer.MapSettings, offlineAfter: Duration, maxAccuracy: Double) {
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
        // The accuracy worse than which the server marks a fix at once: the live map does not draw one.
        ByteWriting.appendStatic(",\"maxAccuracy\":", to: &settings)
        ByteWriting.appendFixed(maxAccuracy, decimals: 1, to: &settings)
        let chart = access(map.chartDirectory + "/dygraph.min.js", R_OK) == 0
        ByteWriting.appendStatic(chart ? ",\"chart\":true}" : ",\"chart\":false}", to: &settings)
        let template = HTMLTemplate(PackageResources.map_html)
        let leaflet = access(map.leafletDirectory + "/leaflet.js", R_OK) == 0
        let notice = leaflet ? [] : template.part("no-leaflet", ["directory": .text(map.leafletDirectory)])
        page = WebAsset(
            template.render([
                "settings": .scriptJSON(settings), "notice": .markup(notice),
                "chartStyle": .markup(chart ? template.part("chart-style") : []),
                "chartScript": .markup(chart ? template.part("chart-script") : []),
            ]),
            contentType: "text/html; charset=utf-8", cacheControl: "no-cache")
    }

    /// Whether a request to `/` is a browser's that asks for a page (OsmAnd's clients never ask for HTML
    /// nor send a device id without one).
    static func isWanted(by request: Request) -> Bool {
        guard request.method == .get || request.method == .head else { return false }
        let q = request.uri.queryParameters
        guard q["id"] == nil, q["deviceid"] == nil else { return false }
        return request.headers[.accept]?.contains("text/html") == true
    }

    func response(to request: Request) -> Response { page.response(to: request) }
}

/// A library's files (Leaflet's `leaflet.js`, `leaflet.css`, `images/NAME.png`; dygraphs'
/// `dygraph.min.js`, `dygraph.min.css`) from its directory: only plain names, each read once (a few
/// hundred KB) and served with an `ETag` (``WebAsset``).
final class LibraryFiles: Sendable {
    let directory: String
    /// The library's name, for the 404's message.
    let library: String
    let cache = Mutex([String: WebAsset]())

    init(directory: String, library: String) {
        self.directory = directory
        self.library = library
    }

    /// A file of the library's: `name` in the directory, or in its `images` directory.
    func file(_ request: Request, _ context: ServerContext, images: Bool) throws -> Response {
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
        guard plain, let type else { throw HTTPError(.notFound, message: "not a file of \(library)'s") }
        let path = directory + (images ? "/images/" : "/") + name
        if let cached = cache.withLock({ $0[path] }) { return cached.response(to: request) }
        guard let bytes = try? readFile(path) else {
            throw HTTPError(.notFound, message: "no \(name) in \(library)'s directory")
        }
        let asset = WebAsset(bytes, contentType: type)
        cache.withLock { $0[path] = asset }
        return asset.response(to: request)
    }
}
