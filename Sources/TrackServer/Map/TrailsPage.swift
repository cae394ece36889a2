import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// `GET /map/svg`: the stored trails as a page of SVGs, drawn on the server (nothing fetched, no
/// script): every device's latest position, and each device's trail.
struct TrailsPage: Sendable {
    let store: any TrackStore
    let paging: Paging
    /// The most points a trail's line is drawn through (more are thinned out evenly).
    let maxPointsDrawn: Int
    /// The most devices drawn without `?device=` (the rest are listed).
    let maxDevicesDrawn: Int

    /// The page's template (`Resources/trails.html`).
    static let template = HTMLTemplate(PackageResources.trails_html)

    /// An HTML page with every device's latest position (each a link to its trail) and each
    /// device's trail drawn (SVG inline, nothing fetched), or one device's with `?device=ID` (one
    /// page of it: `limit`, `cursor`, and a link to the next page). Each trail is read a page at a time
    /// and its line drawn through at most ``maxPointsDrawn`` points; at most ``maxDevicesDrawn`` devices.
    func response(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        var wanted = q["device"].map(String.init)
        if let own = context.identity.onlyDevice {
            if let wanted { try context.authorize(device: wanted) }
            wanted = own
        }
        let (limit, cursor) = try paging.page(q)
        let template = Self.template
        let tokenQuery = q["token"].map { "&token=\(PercentEncoding.encode(String($0)))" } ?? ""
        var content: [UInt8] = []
        let latest = try await store.latest(device: context.identity.onlyDevice)
        if !latest.isEmpty {
            content += template.part(
                "latest",
                [
                    "count": .text(String(latest.count)),
                    "svg": .markup(Array(Self.latestSVG(latest, selected: wanted, tokenQuery: tokenQuery).utf8)),
                ])
        }
        let devices: [DeviceSummary]
        if let wanted {
            devices = try await store.device(wanted).map { [$0] } ?? []
        } else {
            devices = try await store.devices()
        }
        if devices.isEmpty { content += template.part(wanted == nil ? "nothing-stored" : "no-such-device") }
        for (n, d) in devices.enumerated() {
            let href = HTMLTemplate.Value.text("/map/svg?device=\(PercentEncoding.encode(d.id))\(tokenQuery)")
            guard n < maxDevicesDrawn else {
                if n == maxDevicesDrawn {
                    content += template.part(
                        "more-devices", ["count": .text(String(devices.count - n)), "drawn": .text(String(n))])
                }
                content += template.part("listed-device", ["href": href, "device": .text(d.id)])
                continue
            }
            let (records, next) = try await store.trail(device: d.id, after: wanted == nil ? nil : cursor, limit: limit)
            var page: [UInt8] = []
            if next != nil || cursor != nil && wanted != nil {
                page = template.part(
                    "page",
                    [
                        "shown": .text(String(records.count)), "stored": .text(String(d.points)),
                        "limit": .text(String(limit)),
                    ])
            }
            let maxPoints = maxPointsDrawn
            let svg = try await offLoop {
                TrailSVG.render(title: d.id, records: records, width: 900, maxPoints: maxPoints)
            }
            var nextLink: [UInt8] = []
            if let next {
                let nextHref =
                    "/map/svg?device=\(PercentEncoding.encode(d.id))&limit=\(limit)&cursor=\(next.token)\(tokenQuery)"
                nextLink = template.part("next", ["href": .text(nextHref)])
            }
            content += template.part(
                "device",
                [
                    "href": href, "device": .text(d.id), "page": .markup(page), "svg": .markup(Array(svg.utf8)),
                    "next": .markup(nextLink),
                ])
        }
        return Answer.ok(template.render(["content": .markup(content)]), contentType: "text/html; charset=utf-8")
    }

    /// An SVG of every device's latest position (`selected` larger and red), each a link to its
    /// trail on `/map`, in an equirectangular frame fitted to them.
    static func latestSVG(
        _ latest: [LatestPosition], selected: String?, tokenQuery: String,
        width: Double = 900, height: Double = 360
    ) -> String {
        guard !latest.isEmpty else { return "" }
        var (west, east) = (latest[0].longitude, latest[0].longitude)
        var (south, north) = (latest[0].latitude, latest[0].latitude)
        for d in latest {
            west = min(west, d.longitude)
            east = max(east, d.longitude)
            south = min(south, d.latitude)
            north = max(north, d.latitude)
        }
        let padLon = max((east - west) * 0.05, 0.005), padLat = max((north - south) * 0.05, 0.005)
        (west, east, south, north) = (west - padLon, east + padLon, south - padLat, north + padLat)
        func text(_ s: String) -> String {
            var out: [UInt8] = []
            ByteWriting.appendXMLEscaped(s, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        var svg =
            "<svg class=\"latest\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" "
            + "height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">"
            + "<rect width=\"100%\" height=\"100%\" fill=\"#f4f6f8\"/>\n"
        for d in latest {
            let x = (d.longitude - west) / (east - west) * width
            let y = (north - d.latitude) / (north - south) * height
            let isSelected = d.device == selected
            let href = text("/map/svg?device=\(PercentEncoding.encode(d.device))\(tokenQuery)")
            svg +=
                "<a href=\"\(href)\"><circle class=\"device\" cx=\"\(formatFixed(x, 1))\" cy=\"\(formatFixed(y, 1))\" "
                + "r=\"\(isSelected ? 7 : 4)\" fill=\"\(isSelected ? "#d62728" : "#1f77b4")\">"
                + "<title>\(text(d.device)) \(ISOTime.string(d.time))</title></circle></a>\n"
        }
        return svg + "</svg>\n"
    }
}
