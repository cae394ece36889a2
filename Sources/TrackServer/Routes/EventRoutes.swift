import Delivery
import EndpointEvents
import Formats
import Geo
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// The endpoint's events (docs/events.md): geofences, the event history, hooks.
///
/// - `GET /v1/geofences`: every geofence as a GeoJSON FeatureCollection (what `PUT` takes).
/// - `PUT /v1/geofences`: replaces every geofence by the document's, whole or not at all (400 naming
///   each invalid geofence; 413 past a bound).
/// - `GET|PUT|DELETE /v1/geofences/{name}`: one geofence as a GeoJSON Feature whose `id` is `name`.
/// - `GET /v1/events?device=&kind=&from=&to=&limit=&cursor=`: `{"events":[...],"next":TOKEN|null}` by
///   time then id, paged as trails are; a device token sees only its own device's.
/// - `GET /v1/hooks`, `GET|PUT|DELETE /v1/hooks/{name}`: hooks, their secret never shown;
///   `POST /v1/hooks/{name}/retry` queues its dead letters again; `POST /v1/hooks/{name}/test`
///   delivers a `test` event at once and answers what came of it.
///
/// Geofences and hooks are the admin's: a device token gets 403.
struct EventRoutes: Sendable {
    let store: any TrackStore
    let body: BodyReader
    let paging: Paging
    let clock: any EpochClock
    let kinds: DeliveryKinds
    /// Told when the hooks changed (the delivery worker reads them again).
    let hooksChanged: @Sendable () -> Void

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        Self.getAndHead(routes, "/v1/geofences") { _, context in
            try context.requireAdmin()
            return Answer.ok(GeofenceDocument.geoJSON(try await store.geofences()), contentType: "application/geo+json")
        }
        routes.put("/v1/geofences") { request, context in
            try context.requireAdmin()
            let bytes = try await body.read(request, context)
            let geofences = try Self.parse(bytes)
            // A bare Feature here would replace every geofence by that one: meant for its own route.
            if geofences.count == 1,
                let root = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                root["type"] as? String == "Feature"
            {
                throw HTTPError(
                    .badRequest,
                    message: "PUT /v1/geofences replaces every geofence and takes a FeatureCollection; "
                        + "to add or replace one, PUT /v1/geofences/\(geofences[0].name.prefix(64))")
            }
            try await store.replaceGeofences(geofences)
            return Answer.json("{\"geofences\":\(geofences.count)}\n")
        }
        Self.getAndHead(routes, "/v1/geofences/{name}") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard let g = try await store.geofences().first(where: { $0.name == name }) else {
                throw HTTPError(.notFound, message: "no geofence '\(name)'")
            }
            return Answer.ok(GeofenceDocument.feature(g), contentType: "application/geo+json")
        }
        routes.put("/v1/geofences/{name}") { request, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            var document: [UInt8] = Array("{\"type\":\"FeatureCollection\",\"features\":[".utf8)
            document += try await body.read(request, context)
            document += Array("]}".utf8)
            let geofences = try Self.parse(document)
            guard geofences.count == 1, let g = geofences.first else {
                throw HTTPError(.badRequest, message: "one GeoJSON Feature, its id the geofence's name")
            }
            guard g.name == name else {
                throw HTTPError(.badRequest, message: "the feature's id '\(g.name)' is not the path's '\(name)'")
            }
            let created: Bool
            do {
                created = try await store.putGeofence(g)
            } catch let error as EventsError where error.code == .tooLarge {
                throw HTTPError(.contentTooLarge, message: error.description)
            }
            return Response(
                status: created ? .created : .ok, headers: [.contentType: "application/geo+json"],
                body: .init(byteBuffer: ByteBuffer(bytes: GeofenceDocument.feature(g))))
        }
        routes.delete("/v1/geofences/{name}") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard try await store.removeGeofence(name) else {
                throw HTTPError(.notFound, message: "no geofence '\(name)'")
            }
            return Response(status: .noContent)
        }
        Self.getAndHead(routes, "/v1/events") { request, context in try await events(request, context) }
        Self.getAndHead(routes, "/v1/hooks") { _, context in
            try context.requireAdmin()
            let counts = try await store.deliveryCounts()
            var out = Array("{\"hooks\":[".utf8)
            for (i, stored) in try await store.storedHooks().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.appendHook(stored, counts[stored.name], to: &out)
            }
            out += Array("]}\n".utf8)
            return Answer.ok(out, contentType: "application/json")
        }
        Self.getAndHead(routes, "/v1/hooks/{name}") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard let stored = try await store.storedHooks().first(where: { $0.name == name }) else {
                throw HTTPError(.notFound, message: "no hook '\(name)'")
            }
            var out: [UInt8] = []
            Self.appendHook(stored, try await store.deliveryCounts()[name], to: &out)
            out.append(UInt8(ascii: "\n"))
            return Answer.ok(out, contentType: "application/json")
        }
        routes.put("/v1/hooks/{name}") { request, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            let bytes = try await body.read(request, context)
            try Self.refuseUnknownKeys(bytes)
            let settings: HookSettings
            do {
                settings = try JSONDecoder().decode(HookSettings.self, from: Data(bytes))
            } catch {
                throw HTTPError(
                    .badRequest,
                    message: "a hook is {\"type\":...,\"url\":...,\"secret\":...} (kinds, devices, topic optional)")
            }
            let hook: Hook
            switch settings.newHook(name: name) {
            case .success(let h): hook = h
            case .failure(let p): throw HTTPError(.badRequest, message: "\(p.field): \(p.message)")
            }
            try await Self.checkAddress(hook, allowPrivate: kinds.allowPrivate)
            let created = try await store.putHook(HookSettings.stored(hook))
            hooksChanged()
            var out: [UInt8] = []
            // A replaced hook keeps its queue: its counts, as GET gives them.
            let counts = created ? nil : try await store.deliveryCounts()[name]
            Self.appendHook(HookSettings.stored(hook), counts, to: &out)
            out.append(UInt8(ascii: "\n"))
            return Response(
                status: created ? .created : .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
        routes.delete("/v1/hooks/{name}") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard try await store.removeHook(name) else { throw HTTPError(.notFound, message: "no hook '\(name)'") }
            hooksChanged()
            return Response(status: .noContent)
        }
        routes.post("/v1/hooks/{name}/retry") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard try await store.storedHooks().contains(where: { $0.name == name }) else {
                throw HTTPError(.notFound, message: "no hook '\(name)'")
            }
            let n = try await store.retryDeadDeliveries(hook: name, now: clock.now.secondsSince1970)
            hooksChanged()
            return Answer.json("{\"requeued\":\(n)}\n")
        }
        routes.post("/v1/hooks/{name}/test") { _, context in
            try context.requireAdmin()
            let name = try Self.name(context)
            guard let stored = try await store.storedHooks().first(where: { $0.name == name }),
                let hook = HookSettings.hook(stored)
            else { throw HTTPError(.notFound, message: "no hook '\(name)'") }
            let answer = await HookTest.deliver(hook, kinds: kinds, now: clock.now.secondsSince1970)
            switch answer {
            case .delivered: return Answer.json("{\"delivered\":true}\n")
            case .retry(_, let failure), .dead(let failure):
                throw HTTPError(.badGateway, message: "the hook's receiver: \(failure.message)")
            }
        }
        return routes
    }

    func events(_ request: Request, _ context: ServerContext) async throws -> Response {
        let q = request.uri.queryParameters
        var query = EventQuery()
        if let d = q["device"].map(String.init), !d.isEmpty {
            try context.authorize(device: d)
            query.device = d
        } else if case .device(let own) = context.identity {
            query.device = own
        } else if context.identity == .anonymous {
            throw HTTPError(.unauthorized, message: "a token is needed")
        }
        if let k = q["kind"].map(String.init), !k.isEmpty {
            var kinds: Set<EventKind> = []
            for name in k.split(separator: ",") {
                guard let kind = EventKind(rawValue: String(name)) else {
                    throw HTTPError(
                        .badRequest, message: "kind: '\(name)' is not an event kind (\(EventKind.namesSentence))")
                }
                kinds.insert(kind)
            }
            query.kinds = kinds
        }
        // A `from` after `to` is a 400, as on every route that takes them.
        let range = try QueryTime.range { q[$0[...]].map(String.init) }
        query.from = range.from ?? -.infinity
        query.to = range.to ?? .infinity
        var limit = paging.defaultSize
        if let text = q["limit"], !text.isEmpty {
            guard let n = Int(text), (1...paging.maxSize).contains(n) else {
                throw HTTPError(.badRequest, message: "limit: '\(text)' is not a number from 1 to \(paging.maxSize)")
            }
            limit = n
        }
        var cursor: EventCursor?
        if let text = q["cursor"], !text.isEmpty {
            guard let c = EventCursor(token: String(text)) else {
                throw HTTPError(.badRequest, message: "cursor: not a cursor this server gave")
            }
            cursor = c
        }
        let page = try await store.events(query, after: cursor, limit: limit)
        var out = Array("{\"events\":[".utf8)
        for (i, e) in page.events.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out += e.body
        }
        out += Array("],\"next\":".utf8)
        if let next = page.next {
            ByteWriting.appendJSONString(next.token, to: &out)
        } else {
            out += Array("null".utf8)
        }
        out += Array("}\n".utf8)
        return Answer.ok(out, contentType: "application/json")
    }

    static func name(_ context: ServerContext) throws -> String {
        guard let decoded = PercentEncoding.decode(context.parameters.get("name") ?? ""),
            TrailRecord.identifierProblem(decoded) == nil
        else { throw HTTPError(.badRequest, message: "the name in the path is not a valid name") }
        return decoded
    }

    /// A geofence document, or 400/413 in its words (nothing stored).
    static func parse(_ bytes: [UInt8]) throws -> [Geofence] {
        do {
            return try GeofenceDocument.parse(bytes)
        } catch {
            throw HTTPError(error.code == .tooLarge ? .contentTooLarge : .badRequest, message: error.description)
        }
    }

    /// `GET path` and its `HEAD` (the GET's status and headers, no body), as every route that reads.
    static func getAndHead(
        _ routes: RouteCollection<ServerContext>, _ path: RouterPath,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        routes.get(path, use: handler)
        routes.head(path) { request, context in try await Answer.head(handler(request, context)) }
    }

    /// The keys a hook's settings have.
    static let hookKeys: Set<String> = ["type", "url", "kinds", "devices", "secret", "topic"]

    /// 400 for a key a hook does not have: a misspelt `kind` would otherwise leave the hook taking
    /// every kind.
    static func refuseUnknownKeys(_ bytes: [UInt8]) throws {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { return }
        for key in object.keys.sorted() where !hookKeys.contains(key) {
            let guess = hookKeys.contains(key + "s") ? " (did you mean '\(key)s'?)" : ""
            throw HTTPError(
                .badRequest,
                message: "unknown key '\(key.prefix(40))'\(guess): a hook has "
                    + hookKeys.sorted().joined(separator: ", "))
        }
    }

    /// 400 when the hook's host is (or resolves to) an address it may not reach.
    static func checkAddress(_ hook: Hook, allowPrivate: Bool) async throws {
        let host = hook.target.host
        do throws(DeliveryFailure) {
            _ = try await HookAddresses.checked(host, allowPrivate: allowPrivate)
        } catch  where error.code == .addressRefused {
            throw HTTPError(.badRequest, message: "url: \(error.message)")
        } catch {
            // A name that does not resolve now may later: deliveries say so.
        }
    }

    static func appendHook(_ stored: StoredHook, _ counts: DeliveryCounts?, to out: inout [UInt8]) {
        var settings = HookSettings.hook(stored).map(HookSettings.init)
        settings?.secret = nil
        out += Array("{\"name\":".utf8)
        ByteWriting.appendJSONString(stored.name, to: &out)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let settings, let json = try? encoder.encode(settings), json.count > 2 {
            out.append(UInt8(ascii: ","))
            out += Array(json.dropFirst().dropLast())
        }
        out += Array(",\"pending\":\(counts?.pending ?? 0),\"dead\":\(counts?.dead ?? 0),\"lastError\":".utf8)
        if let error = counts?.lastError {
            ByteWriting.appendJSONString(error, to: &out)
        } else {
            out += Array("null".utf8)
        }
        out.append(UInt8(ascii: "}"))
    }
}
