import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// Trails and the fleet, read from the store (each route with its `HEAD`):
///
/// - `GET /v1/devices`: `{"devices":[{"id","points","first","last","lastReceived"}]}`, from the device
///   summaries.
/// - `GET /v1/devices/{id}/trail?from=&to=&format=geojson|gpx|json&limit=&cursor=&invalid=true
///   &outliers=show&smooth=kalman`: one page of a device's trail, and where the next starts
///   (`Link: <...>; rel="next"`, and a `"next"` member in JSON and GeoJSON). Locations marked outliers
///   only with `outliers=show` (marked: `"outlier":REASON`, and out of GeoJSON's line); smoothed
///   positions with `smooth=kalman` (raw by default).
/// - `GET /v1/devices/latest`: each device's latest position.
/// - `GET /v1/positions?bbox=W,S,E,N|near=LAT,LON&radius=M&from=&to=&device=&limit=&cursor=`: who was
///   where, a page at a time.
///
/// A device token sees its own device only.
struct TrailRoutes: Sendable {
    let store: any TrackStore
    let paging: Paging

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.get("/v1/devices") { _, context in try await devices(context) }
        routes.head("/v1/devices") { _, context in try await Answer.head(devices(context)) }
        routes.get("/v1/devices/latest") { _, context in try await latest(context) }
        routes.head("/v1/devices/latest") { _, context in try await Answer.head(latest(context)) }
        routes.get("/v1/positions") { request, context in try await positions(request, context) }
        routes.head("/v1/positions") { request, context in try await Answer.head(positions(request, context)) }
        routes.get("/v1/devices/{id}/trail") { request, context in try await trail(request, context) }
        routes.head("/v1/devices/{id}/trail") { request, context in try await Answer.head(trail(request, context)) }
        return routes
    }

    /// `GET /v1/devices`, from the device summaries.
    func devices(_ context: ServerContext) async throws -> Response {
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
        return Answer.json(out)
    }

    /// `GET /v1/devices/{id}/trail`: one page, and where the next starts.
    func trail(_ request: Request, _ context: ServerContext) async throws -> Response {
        let device = try context.pathDevice()
        try context.authorize(device: device)
        let q = request.uri.queryParameters
        let asked = try QueryTime.range({ q[$0[...]].map(String.init) }, finite: false)
        var (from, to) = (asked.from ?? -.infinity, asked.to ?? .infinity)
        if let window = context.identity.window { (from, to) = (max(from, window.from), min(to, window.to)) }
        let format = q["format"].map(String.init) ?? "geojson"
        guard ["geojson", "gpx", "json"].contains(format) else {
            throw HTTPError(.badRequest, message: "format: '\(format)' is not geojson, gpx or json")
        }
        let (limit, cursor) = try paging.page(q)
        let includeInvalid = q["invalid"] == "true"
        let outliers = q["outliers"].map(String.init) ?? "hide"
        guard ["hide", "show"].contains(outliers) else {
            throw HTTPError(.badRequest, message: "outliers: '\(outliers)' is not hide or show")
        }
        let smooth = q["smooth"].map(String.init) ?? "none"
        guard ["none", "kalman"].contains(smooth) else {
            throw HTTPError(.badRequest, message: "smooth: '\(smooth)' is not none or kalman")
        }
        guard try await store.device(device) != nil else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        let (stored, next) = try await store.trail(
            device: device, from: from, to: to, after: cursor, limit: limit,
            includeInvalid: includeInvalid, includeOutliers: outliers == "show")
        var headers: HTTPFields = [:]
        var nextMember: [UInt8] = []
        if let next {
            var link = "/v1/devices/\(PercentEncoding.encode(device))/trail?"
            var items = ["format=\(format)", "limit=\(limit)", "cursor=\(next.token)"]
            if includeInvalid { items.append("invalid=true") }
            if outliers == "show" { items.append("outliers=show") }
            if smooth == "kalman" { items.append("smooth=kalman") }
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
        // Encoding a page of up to the largest page of records is work for the blocking pool.
        let bytes = try await offLoop { [nextMember] in
            let records = smooth == "kalman" ? TrailRecord.smoothed(stored) : stored
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

    /// `GET /v1/devices/latest`: `{"devices":[{"id","time","lat","lon","alt"?,"accuracy"?,"speed"?,
    /// "course"?,"points","lastReceived"}]}`, from the device summaries.
    func latest(_ context: ServerContext) async throws -> Response {
        var out: [UInt8] = []
        out.reserveCapacity(64 << 10)
        ByteWriting.appendStatic("{\"devices\":[", to: &out)
        var latest = try await store.latest(device: context.identity.onlyDevice)
        // A share link with a window shows the latest position only within it.
        if let window = context.identity.window {
            latest = latest.filter { $0.time >= window.from && $0.time <= window.to }
        }
        FleetJSON.appendDevices(latest, to: &out)
        ByteWriting.appendStatic("]}\n", to: &out)
        return Answer.ok(out, contentType: "application/json")
    }

    /// `GET /v1/positions`: one page of `{"positions":[{"device","time","lat","lon",...}],"next":CURSOR}`
    /// by time, with a `Link: <...>; rel="next"` header when more follow.
    func positions(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        var query = try PositionsQuery { q[$0[...]].map(String.init) }
        if let own = context.identity.onlyDevice {
            if let asked = query.device, asked != own { try context.authorize(device: asked) }
            query.device = own
        }
        let (limit, cursor) = try paging.page(q)
        let (records, next) = try await store.positions(
            in: query.area, from: query.from, to: query.to, device: query.device,
            after: cursor, limit: limit)
        var out: [UInt8] = []
        out.reserveCapacity(records.count * 110 + 64)
        ByteWriting.appendStatic("{\"positions\":[", to: &out)
        for (i, r) in records.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendStatic("{\"device\":", to: &out)
            ByteWriting.appendJSONString(r.device, to: &out)
            FleetJSON.appendPosition(
                time: r.time, latitude: r.latitude, longitude: r.longitude, altitude: r.altitude,
                accuracy: r.horizontalAccuracy, speed: r.speed, course: r.course, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("]", to: &out)
        var headers: HTTPFields = [:]
        if let next {
            ByteWriting.appendStatic(",\"next\":", to: &out)
            ByteWriting.appendJSONString(next.token, to: &out)
            var items: [String] = []
            for key in ["bbox", "near", "radius", "from", "to", "device"] {
                if let v = q[key[...]], !v.isEmpty { items.append("\(key)=\(PercentEncoding.encode(String(v)))") }
            }
            items += ["limit=\(limit)", "cursor=\(next.token)"]
            headers[HTTPField.Name("Link")!] = "</v1/positions?\(items.joined(separator: "&"))>; rel=\"next\""
        }
        ByteWriting.appendStatic("}\n", to: &out)
        return Answer.ok(out, contentType: "application/json", headers: headers)
    }
}
