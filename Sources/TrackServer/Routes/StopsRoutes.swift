import Formats
import Geo
import Hummingbird
import LocationService
import NIOCore
import TrackStore

/// A device's stops and the trips between them over `from`-`to`, found by the device's own
/// `VisitDetector` in its stored locations, however they arrived (our batch, OsmAnd, OwnTracks, MQTT),
/// as the store kept them at ingest (`StoredStops`): every instance on one database gives the same
/// answer (docs/visits.md, "The cost").
///
/// - `GET /v1/devices/{id}/stops`: `{"device":ID,"stops":[{"start":ISO,"end":ISO|null,"duration":S|null,
///   "lat":..,"lon":..,"radius":M,"fixes":N}]}` (`end` null: still there at the last point).
/// - `GET /v1/devices/{id}/trips`: `{"device":ID,"trips":[{"start":ISO,"end":ISO,"duration":S,
///   "distance":M,"avgSpeed":..,"maxSpeed":..,"startLat":..,"startLon":..,"endLat":..,"endLon":..}]}`;
///   `format=gpx`: GPX with one `<trk>` per trip, its locations.
///
/// A device token reads only its own device; an unknown device is 404.
struct StopsRoutes: Sendable {
    let store: any TrackStore
    let places: PlaceNaming

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.get("/v1/devices/{id}/stops") { request, context in try await answer(request, context, trips: false) }
        routes.get("/v1/devices/{id}/trips") { request, context in try await answer(request, context, trips: true) }
        return routes
    }

    func answer(_ request: Request, _ context: ServerContext, trips: Bool) async throws -> Response {
        let device = try context.pathDevice()
        try context.authorize(device: device)
        let q = request.uri.queryParameters
        let asked = try QueryTime.range { q[$0[...]].map(String.init) }
        var (from, to) = (asked.from ?? -.infinity, asked.to ?? .infinity)
        if let window = context.identity.window { (from, to) = (max(from, window.from), min(to, window.to)) }
        let format = q["format"].map(String.init) ?? "json"
        guard format == "json" || (trips && format == "gpx") else {
            throw HTTPError(.badRequest, message: "format: '\(format)' is not \(trips ? "json or gpx" : "json")")
        }
        guard try await store.device(device) != nil else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        let report = try await store.stops(device: device, from: from, to: to)
        let bytes: [UInt8]
        if format == "gpx" {
            var tracks: [TrailExport.TripTrack] = []
            for trip in report.trips {
                tracks.append(
                    TrailExport.TripTrack(
                        start: trip.start, end: trip.end, distance: trip.distance,
                        locations: try await store.track(device: device, of: trip)))
            }
            bytes = try await offLoop { [tracks] in TrailExport.gpx(device: device, trips: tracks) }
        } else if trips {
            // A trip's ends are named as the visits it leaves and reaches (its start is the one's
            // departure, its end the other's arrival), so that /stops and /trips name a place alike;
            // an end without its visit in the answer (before the first, or clipped) by its own point.
            var left: [Double: Coordinate] = [:], reached: [Double: Coordinate] = [:]
            for v in report.stops {
                reached[v.arrival] = v.coordinate
                if let d = v.departure { left[d] = v.coordinate }
            }
            let ends = report.trips.flatMap {
                [left[$0.start] ?? $0.startCoordinate, reached[$0.end] ?? $0.endCoordinate]
            }
            let names = try await places.names(device: device, of: ends)
            bytes = StopsJSON.trips(device: device, report.trips, places: names)
        } else {
            let names = try await places.names(device: device, of: report.stops.map(\.coordinate))
            bytes = StopsJSON.stops(device: device, report.stops, places: names)
        }
        return Answer.ok(bytes, contentType: format == "gpx" ? "application/gpx+xml" : "application/json")
    }
}

extension StopEvent {
    /// `{"kind":"stop",...}` or `{"kind":"trip",...}`: the route's object with its kind first.
    public var json: [UInt8] {
        var out: [UInt8] = []
        switch kind {
        case .stop(let v):
            ByteWriting.appendStatic("{\"kind\":\"stop\",", to: &out)
            StopsJSON.stopMembers(v, to: &out)
        case .trip(let t):
            ByteWriting.appendStatic("{\"kind\":\"trip\",", to: &out)
            StopsJSON.tripMembers(t, to: &out)
        }
        return out
    }
}

/// The JSON of the stops and trips routes.
public enum StopsJSON {
    /// `{"device":ID,"stops":[...]}`.
    public static func stops(device: String, _ visits: [Visit]) -> [UInt8] {
        document(device: device, key: "stops", visits, stopMembers)
    }

    /// `{"device":ID,"stops":[...]}`, each stop with its `place` (`places[i]`, `null` for none).
    static func stops(device: String, _ visits: [Visit], places: [String?]) -> [UInt8] {
        document(device: device, key: "stops", Array(zip(visits, places))) { item, out in
            stopMembers(item.0, to: &out)
            out.removeLast()
            ByteWriting.appendStatic(",\"place\":", to: &out)
            place(item.1, &out)
            out.append(UInt8(ascii: "}"))
        }
    }

    /// `{"device":ID,"trips":[...]}`, each trip with its `startPlace` and `endPlace` (`places[2i]`
    /// and `places[2i + 1]`).
    static func trips(device: String, _ trips: [Trip], places: [String?]) -> [UInt8] {
        let items = trips.indices.map { (trips[$0], places[2 * $0], places[2 * $0 + 1]) }
        return document(device: device, key: "trips", items) { item, out in
            tripMembers(item.0, to: &out)
            out.removeLast()
            ByteWriting.appendStatic(",\"startPlace\":", to: &out)
            place(item.1, &out)
            ByteWriting.appendStatic(",\"endPlace\":", to: &out)
            place(item.2, &out)
            out.append(UInt8(ascii: "}"))
        }
    }

    static func place(_ name: String?, _ out: inout [UInt8]) {
        guard let name else { return ByteWriting.appendStatic("null", to: &out) }
        ByteWriting.appendJSONString(name, to: &out)
    }

    /// `{"device":ID,"KEY":[{...},...]}` and a line end, each object's members written by `members`.
    static func document<T>(
        device: String, key: StaticString, _ items: [T], _ members: (T, inout [UInt8]) -> Void
    ) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendDeviceDocument(device: device, key: key, items, to: &out) { item, out in
            out.append(UInt8(ascii: "{"))
            members(item, &out)
        }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// A stop's members and its closing brace: `"start":ISO,...,"fixes":N}`.
    public static func stopMembers(_ v: Visit, to out: inout [UInt8]) {
        ByteWriting.appendStatic("\"start\":\"", to: &out)
        ISOTime.append(v.arrival, to: &out)
        ByteWriting.appendStatic("\",\"end\":", to: &out)
        ISOTime.appendQuoted(v.departure, to: &out)
        ByteWriting.appendStatic(",\"duration\":", to: &out)
        number(v.duration, 3, &out)
        ByteWriting.appendStatic(",\"lat\":", to: &out)
        ByteWriting.appendFixed(v.coordinate.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"lon\":", to: &out)
        ByteWriting.appendFixed(v.coordinate.longitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"radius\":", to: &out)
        ByteWriting.appendFixed(v.horizontalAccuracy, decimals: 1, to: &out)
        ByteWriting.appendStatic(",\"fixes\":", to: &out)
        ByteWriting.appendInt(Int64(v.fixCount), to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// `{"device":ID,"trips":[...]}`.
    public static func trips(device: String, _ trips: [Trip]) -> [UInt8] {
        document(device: device, key: "trips", trips, tripMembers)
    }

    /// A trip's members and its closing brace: `"start":ISO,...,"endLon":..}`.
    public static func tripMembers(_ t: Trip, to out: inout [UInt8]) {
        ByteWriting.appendStatic("\"start\":\"", to: &out)
        ISOTime.append(t.start, to: &out)
        ByteWriting.appendStatic("\",\"end\":\"", to: &out)
        ISOTime.append(t.end, to: &out)
        ByteWriting.appendStatic("\",\"duration\":", to: &out)
        number(t.duration, 3, &out)
        ByteWriting.appendStatic(",\"distance\":", to: &out)
        number(t.distance, 1, &out)
        ByteWriting.appendStatic(",\"avgSpeed\":", to: &out)
        number(t.averageSpeed, 3, &out)
        ByteWriting.appendStatic(",\"maxSpeed\":", to: &out)
        number(t.maximumSpeed, 3, &out)
        ByteWriting.appendStatic(",\"startLat\":", to: &out)
        ByteWriting.appendFixed(t.startCoordinate.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"startLon\":", to: &out)
        ByteWriting.appendFixed(t.startCoordinate.longitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"endLat\":", to: &out)
        ByteWriting.appendFixed(t.endCoordinate.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"endLon\":", to: &out)
        ByteWriting.appendFixed(t.endCoordinate.longitude, decimals: 7, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    static func number(_ v: Double?, _ decimals: Int, _ out: inout [UInt8]) {
        guard let v, v.isFinite else { return ByteWriting.appendStatic("null", to: &out) }
        ByteWriting.appendFixed(v, decimals: decimals, to: &out)
    }
}
