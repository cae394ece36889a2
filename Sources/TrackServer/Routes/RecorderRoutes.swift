import BuildInfo
import Geo
import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// The OwnTracks Recorder's read API (`/api/0/...`), so that the OwnTracks Frontend and other
/// Recorder clients work against this server unchanged. Shapes as the Recorder's `http.c` and
/// `storage.c` write them:
///
/// - `GET /api/0/version`: `{"version":...,"git":...}` (keeptrack's).
/// - `GET /api/0/list`: `{"results":[USER,...]}`; `?user=U`: `{"results":[DEVICE,...]}`.
/// - `GET /api/0/last[?user=U[&device=D]][&fields=a,b]`: `[{"_type":"location","username":...,
///   "device":...,"topic":...,"lat":...,"lon":...,"tst":...,"acc":...,...}]`, each device's latest
///   location.
/// - `GET /api/0/locations?user=U&device=D&from=&to=[&limit=N][&fields=a,b][&format=json]`:
///   `{"data":[...],"count":N,"status":200,"version":...}`, by time (newest first with `limit`, as
///   the Recorder's reverse search), written a page at a time.
///
/// Parameters come from the query, a form body (`POST`, as `curl -d user=...` sends them) or
/// `X-Limit-User`, `X-Limit-Device`, `X-Limit-From`, `X-Limit-To`, `X-Limit-Fields` headers (which
/// win, as in the Recorder). Users and devices are ``RecorderAPI/names(of:)`` of the stored ids. A
/// device token sees its own device only (403 for another's locations); the admin token sees all.
struct RecorderRoutes: Sendable {
    /// The longest value of a parameter, in bytes (the Recorder reads them into 8 KiB).
    static let maxValueBytes = 4096

    let store: any TrackStore
    let body: BodyReader
    /// The default range ends now, on this clock.
    let clock: any EpochClock
    /// `/api/0/locations` is written a page of this many at a time; `limit` is at most its maximum.
    let paging: Paging

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        for method in [HTTPRequest.Method.get, .post] {
            routes.on("/api/0/version", method: method) { _, _ in Self.version() }
            routes.on("/api/0/list", method: method) { request, context in
                try await list(try await parameters(request, context), context)
            }
            routes.on("/api/0/last", method: method) { request, context in
                try await last(try await parameters(request, context), context)
            }
            routes.on("/api/0/locations", method: method) { request, context in
                try await locations(try await parameters(request, context), context)
            }
        }
        return routes
    }

    /// The JSON answer with the Recorder's content type.
    static func json(_ bytes: [UInt8]) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func version() -> Response {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"version\":", to: &out)
        ByteWriting.appendJSONString(BuildInfo.version, to: &out)
        ByteWriting.appendStatic(",\"git\":", to: &out)
        ByteWriting.appendJSONString(BuildInfo.commit, to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
        return json(out)
    }

    /// A request's parameters: the query, then a form body's (for `POST`), the first of each name;
    /// `X-Limit-NAME` headers win.
    func parameters(_ request: Request, _ context: ServerContext) async throws -> RecorderParameters {
        var parameters = try RecorderParameters(form: request.uri.query ?? "")
        if request.method == .post {
            let form = try RecorderParameters(
                form: String(decoding: try await body.read(request, context), as: UTF8.self))
            for (name, value) in form.values where parameters.values[name] == nil { parameters.values[name] = value }
        }
        for name in ["user", "device", "from", "to", "fields"] {
            if let value = request.headers[HTTPField.Name("X-Limit-" + name)!] { parameters.values[name] = value }
        }
        return parameters
    }

    /// The devices the request may see, by id: its own for a device token, else every one.
    func devices(_ context: ServerContext) async throws -> [DeviceSummary] {
        if let own = context.identity.onlyDevice { return try await store.device(own).map { [$0] } ?? [] }
        return try await store.devices()
    }

    /// `/api/0/list`: the users, or with `user` that user's devices (with `device` too, the Recorder
    /// lists its monthly files: there are none here, so the list is empty).
    func list(_ p: RecorderParameters, _ context: ServerContext) async throws -> Response {
        let user = p["user"].flatMap { $0.isEmpty ? nil : $0 }
        let device = p["device"].flatMap { $0.isEmpty ? nil : $0 }
        var names: [String] = []
        if device == nil {
            for d in try await devices(context) {
                let (u, dev) = RecorderAPI.names(of: d.id)
                let name: String
                if let user {
                    guard u == user || u.lowercased() == user.lowercased() else { continue }
                    name = dev
                } else {
                    name = u
                }
                if !names.contains(name) { names.append(name) }
            }
        }
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"results\":[", to: &out)
        for (i, name) in names.sorted().enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            ByteWriting.appendJSONString(name, to: &out)
        }
        ByteWriting.appendStatic("]}\n", to: &out)
        return Self.json(out)
    }

    /// `/api/0/last`: each visible device's latest location; with `user`, that user's; with `user`
    /// and `device`, that device's; with `device` alone, none (as the Recorder).
    func last(_ p: RecorderParameters, _ context: ServerContext) async throws -> Response {
        let user = p["user"].flatMap { $0.isEmpty ? nil : $0 }
        let device = p["device"].flatMap { $0.isEmpty ? nil : $0 }
        let fields = p.fields
        var positions: [LatestPosition] = []
        if device != nil && user == nil {
            positions = []
        } else if let user, let device {
            for id in RecorderAPI.deviceIDs(user: user, device: device) {
                if let own = context.identity.onlyDevice, own != id { continue }
                positions = try await store.latest(device: id)
                if !positions.isEmpty { break }
            }
        } else {
            positions = try await store.latest(device: context.identity.onlyDevice)
            if let user {
                positions = positions.filter {
                    let u = RecorderAPI.names(of: $0.device).user
                    return u == user || u.lowercased() == user.lowercased()
                }
            }
        }
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, position) in positions.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            RecorderAPI.appendLocation(
                try await store.latestRecord(position), received: false, fields: fields,
                to: &out)
        }
        ByteWriting.appendStatic("]\n", to: &out)
        return Self.json(out)
    }

    /// An answer as the Recorder gives it for a request it can't serve: `status` and a line of text.
    static func refusal(_ status: HTTPResponse.Status, _ message: String) -> HTTPError {
        HTTPError(status, message: message)
    }

    /// `/api/0/locations`: a device's locations between `from` and `to` (both included; UTC; the
    /// Recorder's defaults: the last 6 hours up to now), every one or (`limit=N`) the last N,
    /// newest first. Written a page of ``Paging/defaultSize`` at a time, so the answer's size is not
    /// held in memory.
    func locations(_ p: RecorderParameters, _ context: ServerContext) async throws -> Response {
        guard let user = p["user"], !user.isEmpty, let device = p["device"], !device.isEmpty else {
            throw Self.refusal(.rangeNotSatisfiable, "user and device are required")
        }
        switch p["format"] ?? "json" {
        case "json", "": break
        case let format where ["geojson", "geojsonpoi", "linestring", "csv", "xml", "gpx"].contains(format):
            throw HTTPError(
                .badRequest,
                message: "format: '\(format)' is not served here: use format=json, or "
                    + "/v1/devices/ID/trail?format=geojson|gpx")
        case let format:
            throw HTTPError(.badRequest, message: "unrecognized format '\(format.prefix(64))'")
        }
        let now = clock.now.secondsSince1970
        func time(_ name: String, _ fallback: Double) throws -> Double {
            guard let text = p[name], !text.isEmpty else { return fallback }
            guard let t = RecorderAPI.parseTime(text) else {
                throw Self.refusal(
                    .rangeNotSatisfiable,
                    "impossible date/time ranges: \(name) '\(text.prefix(64))' is not a UTC time "
                        + "YYYY-MM-DDTHH:MM:SS (or YYYY-MM-DDTHH:MM, YYYY-MM-DDTHH, YYYY-MM-DD, YYYY-MM)"
                )
            }
            return t
        }
        let from = try time("from", now - 6 * 3600), to = try time("to", now)
        guard from <= to else {
            throw Self.refusal(.rangeNotSatisfiable, "impossible date/time ranges: from is after to")
        }
        var limit = 0
        if let text = p["limit"], !text.isEmpty {
            guard let n = Int(text), n >= 0, n <= paging.maxSize else {
                throw HTTPError(
                    .badRequest,
                    message: "limit: '\(text.prefix(64))' is not a number from 0 to "
                        + "\(paging.maxSize)")
            }
            limit = n
        }
        let candidates = RecorderAPI.deviceIDs(user: user, device: device)
        var id: String?
        if let own = context.identity.onlyDevice {
            guard candidates.contains(own) else {
                throw HTTPError(
                    .forbidden, message: "this token belongs to device '\(own)': it may not read another device")
            }
            id = own
        } else {
            for candidate in candidates where try await store.device(candidate) != nil {
                id = candidate
                break
            }
        }
        let fields = p.fields
        let last = limit
        let pageSize = max(1, paging.defaultSize)
        let store = self.store
        let headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        return Response(
            status: .ok, headers: headers,
            body: .init { [id] writer in
                var count = 0
                var out: [UInt8] = []
                ByteWriting.appendStatic("{\"data\":[", to: &out)
                func add(_ r: TrailRecord) {
                    if count > 0 { out.append(UInt8(ascii: ",")) }
                    RecorderAPI.appendLocation(r, fields: fields, to: &out)
                    count += 1
                }
                if let id {
                    var cursor: TrailCursor?
                    // With a limit, the last `limit` locations, kept in a ring as the pages go by.
                    var ring: [TrailRecord] = []
                    var next = 0
                    repeat {
                        let page = try await store.trail(
                            device: id, from: from, to: to, after: cursor, limit: pageSize,
                            includeInvalid: false)
                        for r in page.records where r.kind == .location {
                            if last == 0 {
                                add(r)
                            } else if ring.count < last {
                                ring.append(r)
                            } else {
                                ring[next] = r
                                next = (next + 1) % last
                            }
                        }
                        if out.count >= 256 << 10 {
                            try await writer.write(ByteBuffer(bytes: out))
                            out.removeAll(keepingCapacity: true)
                        }
                        cursor = page.next
                    } while cursor != nil
                    if last > 0 {
                        for k in 0..<ring.count { add(ring[(next + ring.count - 1 - k) % ring.count]) }
                    }
                }
                ByteWriting.appendStatic("],\"count\":", to: &out)
                ByteWriting.appendInt(Int64(count), to: &out)
                ByteWriting.appendStatic(",\"status\":200,\"version\":", to: &out)
                ByteWriting.appendJSONString(BuildInfo.version, to: &out)
                ByteWriting.appendStatic("}\n", to: &out)
                try await writer.write(ByteBuffer(bytes: out))
                try await writer.finish(nil)
            })
    }
}

/// The parameters of a Recorder API request, by name (the first of each).
struct RecorderParameters: Sendable {
    var values: [String: String] = [:]

    /// Reads `a=1&b=2` as a form does (`+` is a space, `%XX` a byte; UTF-8).
    ///
    /// - Throws: `HTTPError` 400 for an escape that is not one or a value over
    ///   ``RecorderRoutes/maxValueBytes``.
    init(form: String) throws {
        for pair in form.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) throws -> String {
                guard let text = PercentEncoding.decode(s.replacing("+", with: " ")) else {
                    throw HTTPError(.badRequest, message: "the parameters are not valid percent-encoded UTF-8")
                }
                return text
            }
            let name = try decode(parts[0])
            let value = parts.count > 1 ? try decode(parts[1]) : ""
            guard value.utf8.count <= RecorderRoutes.maxValueBytes else {
                throw HTTPError(
                    .badRequest,
                    message: "\(name.prefix(64)): longer than "
                        + "\(RecorderRoutes.maxValueBytes) bytes")
            }
            if values[name] == nil { values[name] = value }
        }
    }

    subscript(name: String) -> String? { values[name] }

    /// `fields=a,b`: the members to keep, or `nil` for all.
    var fields: Set<String>? {
        guard let text = values["fields"], !text.isEmpty else { return nil }
        return Set(text.split(separator: ",").map { String($0.filter { $0 != " " }) })
    }
}

/// What the OwnTracks Recorder API (`/api/0/...`, `/ws/last`) reads from any store, built on the
/// store's own queries.
extension TrackStore {
    /// The record of a device's latest position (``FleetStore/latest(device:)``): the location
    /// stored at its time, with the attributes the sender gave (`batt`, `tid`...), read with one
    /// trail query; a record made from the position alone when none is found (a transition's
    /// position).
    public func latestRecord(_ position: LatestPosition) async throws -> TrailRecord {
        // A millisecond either side: a store may round the time it keeps (PostgreSQL: microseconds).
        let page = try await trail(
            device: position.device, from: position.time - 0.001, to: position.time + 0.001,
            after: nil, limit: 64, includeInvalid: false)
        let closest = page.records.filter { $0.kind == .location }
            .min { abs($0.time - position.time) < abs($1.time - position.time) }
        if let closest { return closest }
        return TrailRecord(
            device: position.device, sequence: 1, time: position.time, latitude: position.latitude,
            longitude: position.longitude, altitude: position.altitude,
            horizontalAccuracy: position.horizontalAccuracy, speed: position.speed,
            course: position.course)
    }
}
