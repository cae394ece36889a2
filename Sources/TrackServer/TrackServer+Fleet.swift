import Formats
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import TrackStore

/// The fleet queries: `GET /v1/devices/latest` and `GET /v1/positions?bbox=|near=`, and the
/// overview `/map` draws.
extension TrackServer {
    /// The largest `radius` of `near`, in metres.
    public static let maxRadius = 1_000_000.0

    /// `GET /v1/devices/latest`: `{"devices":[{"id","time","lat","lon","alt"?,"accuracy"?,"speed"?,
    /// "course"?,"points","lastReceived"}]}`, from the devices table; a device token sees its own.
    func latestResponse(_ context: ServerContext) async throws -> Response {
        var out: [UInt8] = []
        out.reserveCapacity(64 << 10)
        ByteWriting.appendStatic("{\"devices\":[", to: &out)
        Self.appendDevices(try await store.latest(device: context.identity.onlyDevice), to: &out)
        ByteWriting.appendStatic("]}\n", to: &out)
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: out)))
    }

    /// The devices of `GET /v1/devices/latest` (and of the stream's snapshot), comma-separated:
    /// `{"id","time","lat","lon",...,"points","lastReceived"}` each.
    static func appendDevices(_ devices: [LatestPosition], to out: inout [UInt8]) {
        for (i, d) in devices.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendStatic("{\"id\":", to: &out)
            ByteWriting.appendJSONString(d.device, to: &out)
            appendPosition(
                time: d.time, latitude: d.latitude, longitude: d.longitude, altitude: d.altitude,
                accuracy: d.horizontalAccuracy, speed: d.speed, course: d.course, to: &out)
            ByteWriting.appendStatic(",\"points\":", to: &out)
            ByteWriting.appendInt(Int64(d.points), to: &out)
            ByteWriting.appendStatic(",\"lastReceived\":\"", to: &out)
            ISOTime.append(d.lastReceived, to: &out)
            ByteWriting.appendStatic("\"}", to: &out)
        }
    }

    /// `,"time":ISO,"lat":..,"lon":..` and the optional members.
    static func appendPosition(
        time: Double, latitude: Double, longitude: Double, altitude: Double?,
        accuracy: Double?, speed: Double?, course: Double?, to out: inout [UInt8]
    ) {
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(time, to: &out)
        ByteWriting.appendStatic("\",\"lat\":", to: &out)
        ByteWriting.appendFixed(latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(longitude, decimals: 7, to: &out)
        // One member at a time, no array of names per position (10,000 of them in devices/latest).
        func member(_ name: StaticString, _ value: Double?) {
            guard let value, value.isFinite else { return }
            ByteWriting.appendStatic(name, to: &out)
            ByteWriting.appendFixed(value, decimals: 2, to: &out)
        }
        member(",\"alt\":", altitude)
        member(",\"accuracy\":", accuracy)
        member(",\"speed\":", speed)
        member(",\"course\":", course)
    }

    /// The area, time range and device of a `GET /v1/positions` query.
    public struct PositionsQuery: Hashable, Sendable {
        public var area: PositionArea
        public var from: Double
        public var to: Double
        public var device: String?
    }

    /// Reads `bbox=W,S,E,N` or `near=LAT,LON&radius=M`, `from`, `to` (ISO 8601 or Unix seconds) and
    /// `device` from a query's parameters.
    ///
    /// - Throws: ``HTTPError`` 400 whose message names the parameter and what is wrong with it.
    public static func positionsQuery(_ parameter: (String) -> String?) throws -> PositionsQuery {
        func bad(_ message: String) -> HTTPError { HTTPError(.badRequest, message: message) }
        func numbers(_ text: String, count: Int) -> [Double]? {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
            guard parts.count == count, parts.allSatisfy({ $0?.isFinite == true }) else { return nil }
            return parts.map { $0! }
        }
        func inRange(_ name: String, _ what: String, _ value: Double, _ limit: Double) throws {
            guard abs(value) <= limit else {
                throw bad("\(name): \(what) \(value) is out of range [-\(Int(limit)), \(Int(limit))]")
            }
        }
        let bbox = parameter("bbox").flatMap { $0.isEmpty ? nil : $0 }
        let near = parameter("near").flatMap { $0.isEmpty ? nil : $0 }
        let radius = parameter("radius").flatMap { $0.isEmpty ? nil : $0 }
        let area: PositionArea
        switch (bbox, near) {
        case (nil, nil):
            throw bad("an area is required: bbox=WEST,SOUTH,EAST,NORTH or near=LAT,LON&radius=METRES")
        case (.some, .some):
            throw bad("bbox and near: give one of them, not both")
        case (let text?, nil):
            guard radius == nil else { throw bad("radius: only with near=LAT,LON") }
            guard let v = numbers(text, count: 4) else {
                throw bad("bbox: '\(text)' is not four numbers WEST,SOUTH,EAST,NORTH (degrees)")
            }
            try inRange("bbox", "west", v[0], 180)
            try inRange("bbox", "south", v[1], 90)
            try inRange("bbox", "east", v[2], 180)
            try inRange("bbox", "north", v[3], 90)
            guard v[1] <= v[3] else {
                throw bad("bbox: south \(v[1]) is north of north \(v[3]) (the order is WEST,SOUTH,EAST,NORTH)")
            }
            guard v[0] <= v[2] else {
                throw bad(
                    "bbox: west \(v[0]) is east of east \(v[2]) (the order is WEST,SOUTH,EAST,NORTH; "
                        + "a box across the antimeridian is two queries)")
            }
            area = .box(west: v[0], south: v[1], east: v[2], north: v[3])
        case (nil, let text?):
            guard let v = numbers(text, count: 2) else { throw bad("near: '\(text)' is not LAT,LON (degrees)") }
            try inRange("near", "latitude", v[0], 90)
            try inRange("near", "longitude", v[1], 180)
            guard let radius else { throw bad("radius: required with near (metres, 1 to \(Int(maxRadius)))") }
            guard let r = Double(radius), r.isFinite, (1...maxRadius).contains(r) else {
                throw bad("radius: '\(radius)' is not a distance in metres from 1 to \(Int(maxRadius))")
            }
            area = .near(latitude: v[0], longitude: v[1], radius: r)
        }
        func time(_ key: String) throws -> Double? {
            guard let text = parameter(key), !text.isEmpty else { return nil }
            if let t = ISOTime.parse(text) ?? Double(text), t.isFinite { return t }
            throw bad("\(key): '\(text)' is neither ISO 8601 UTC nor Unix seconds")
        }
        let from = try time("from") ?? -.infinity
        let to = try time("to") ?? .infinity
        guard from <= to else { throw bad("from: \(parameter("from") ?? "") is after to: \(parameter("to") ?? "")") }
        let device = parameter("device").flatMap { $0.isEmpty ? nil : $0 }
        return PositionsQuery(area: area, from: from, to: to, device: device)
    }

    /// `GET /v1/positions?bbox=W,S,E,N|near=LAT,LON&radius=M&from=&to=&device=&limit=&cursor=`: one page
    /// of `{"positions":[{"device","time","lat","lon",...}],"next":CURSOR}` by time, with a
    /// `Link: <...>; rel="next"` header when more follow. A device token sees its own positions.
    func positionsResponse(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        var query = try Self.positionsQuery { q[$0[...]].map(String.init) }
        if let own = context.identity.onlyDevice {
            if let asked = query.device, asked != own { try authorize(context, device: asked) }
            query.device = own
        }
        let (limit, cursor) = try page(q)
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
            Self.appendPosition(
                time: r.time, latitude: r.latitude, longitude: r.longitude, altitude: r.altitude,
                accuracy: r.horizontalAccuracy, speed: r.speed, course: r.course, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("]", to: &out)
        var headers: HTTPFields = [.contentType: "application/json"]
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
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: out)))
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
