import Foundation
import Hummingbird
import HummingbirdWSClient
import KeepTrackTesting
import Logging
import NIOCore
import NIOHTTP1
import Testing
import TrackServerTesting
import TrackStore

@testable import TrackServer

/// Issue 26, item 6: docs/openapi.yaml is the HTTP API's reference, checked against a real server.
///
/// Adding a route: document it in docs/openapi.yaml (its path with `options: *preflight`, each method,
/// each answer's status and schema), add a request per status to ``cases`` (or mark an answer
/// `x-keeptrack-not-exercised: why`), and run `KEEPTRACK_WRITE_OPENAPI=1 swift test --filter
/// OpenAPITests` to write Sources/TrackServer/Resources/openapi.json, which the server compiles in.
@Suite("OpenAPI: docs/openapi.yaml is the server's HTTP API", .serialized)
struct OpenAPITests {
    static func document() throws -> (json: String, value: JSON) {
        let yaml = try String(contentsOfFile: OpenAPISource.yamlPath, encoding: .utf8)
        let json = try OpenAPISource.json(yaml: yaml)
        return (json, try JSON.parse(json))
    }

    /// The methods an OpenAPI path item may hold, but OPTIONS (a CORS preflight, answered by a
    /// middleware before routing: checked apart).
    static let routedMethods = ["get", "put", "post", "delete", "head", "patch", "trace"]

    @Test func theJSONTheServerCompilesInIsDocsOpenAPIYAML() throws {
        let (json, _) = try Self.document()
        let current = (try? String(contentsOfFile: OpenAPISource.jsonPath, encoding: .utf8)) ?? ""
        if current != json, ProcessInfo.processInfo.environment["KEEPTRACK_WRITE_OPENAPI"] == "1" {
            try json.write(toFile: OpenAPISource.jsonPath, atomically: true, encoding: .utf8)
            return
        }
        let inStep = current == json
        #expect(
            inStep,
            """
            Sources/TrackServer/Resources/openapi.json is not docs/openapi.yaml as JSON: run
            KEEPTRACK_WRITE_OPENAPI=1 swift test --filter OpenAPITests, and build again
            """)
        let compiled = PackageResources.openapi_json == Array(json.utf8)
        #expect(compiled, "the compiled document is an older one: build again")
    }

    @Test func theDocumentIsOpenAPI31WithEveryReferenceResolved() throws {
        let (_, document) = try Self.document()
        #expect(document["openapi"]?.string == "3.1.0")
        let validator = SchemaValidator(document: document)
        func references(_ value: JSON, _ path: String) -> [String] {
            switch value {
            case .object(let members):
                members.flatMap { key, member in
                    if key == "$ref", let target = member.string {
                        return validator.resolve(target) == nil ? ["\(path): '\(target)' resolves to nothing"] : []
                    }
                    return references(member, path + "." + key)
                }
            case .array(let items): items.enumerated().flatMap { references($1, "\(path)[\($0)]") }
            default: []
            }
        }
        let broken = references(document, "$")
        #expect(broken.isEmpty, "\(broken.joined(separator: "\n"))")
        var operationIDs: [String] = []
        for (path, item) in document["paths"]?.members ?? [] {
            #expect(item["options"] != nil, "\(path) has no options (the CORS preflight every path answers)")
            for method in Self.routedMethods {
                guard let operation = item[method] else { continue }
                if let id = operation["operationId"]?.string { operationIDs.append(id) }
                #expect(
                    !(operation["responses"]?.members.isEmpty ?? true), "\(method.uppercased()) \(path): no answers")
            }
        }
        #expect(Set(operationIDs).count == operationIDs.count, "operationIds repeat: \(operationIDs.sorted())")
    }

    /// The routes the server registers, with fault injection on (`PUT /v1/faults` exists only then),
    /// as `METHOD /path/{capture}`.
    static func registeredRoutes() async throws -> Set<String> {
        let directory = try TemporaryDirectory()
        var configuration = TrackServer.Configuration()
        configuration.faultInjection = true
        let server = try TrackServer(
            configuration: configuration, store: try SQLiteTrackStore(path: directory.path + "/routes.sqlite"))
        let routes = Set(server.router().routes.map { "\($0.method.rawValue) \($0.path.description)" })
        await server.store.close()
        directory.remove()
        return routes
    }

    @Test func everyRouteIsDocumentedAndEveryDocumentedRouteExists() async throws {
        let (_, document) = try Self.document()
        var documented = Set<String>()
        for (path, item) in document["paths"]?.members ?? [] {
            for method in Self.routedMethods where item[method] != nil {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        let registered = try await Self.registeredRoutes()
        let undocumented = registered.subtracting(documented).sorted()
        let unregistered = documented.subtracting(registered).sorted()
        #expect(undocumented.isEmpty, "routes the server registers that docs/openapi.yaml lacks: \(undocumented)")
        #expect(unregistered.isEmpty, "docs/openapi.yaml has routes the server does not register: \(unregistered)")
    }

    /// The document needs no credential, whatever the request presents; HEAD gives GET's length; other
    /// methods get no document.
    @Test func theDocumentIsOpenToGETAndHEADOnly() async throws {
        let endpoint = try await Endpoint.start(token: "secret")
        let http = RawHTTP(port: endpoint.port)
        do {
            let get = try await http.exchange("GET", "/openapi.json", headers: [], body: nil)
            #expect(get.status == 200 && get.header("Content-Type") == "application/json")
            for (target, headers) in [
                ("/openapi.json?token=wrong", []), ("/openapi.json", [("Authorization", "Bearer wrong")]),
                ("/openapi.json?x=%ZZ&&&=", [("Authorization", "Basic !!!")]),
            ] {
                let answer = try await http.exchange("GET", target, headers: headers, body: nil)
                #expect(answer.status == 200 && answer.body == get.body, "\(target) \(headers)")
            }
            let head = try await http.exchange("HEAD", "/openapi.json", headers: [], body: nil)
            #expect(head.status == 200 && head.header("Content-Length") == String(get.body.count))
            for method in ["POST", "PUT", "DELETE"] {
                let answer = try await http.exchange(method, "/openapi.json", headers: [], body: Array("{}".utf8))
                #expect(answer.status >= 400 && answer.body != get.body, "\(method): \(answer.status)")
            }
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
    }

    // MARK: - Answers

    /// One request and the status it must get.
    struct Case: CustomStringConvertible {
        var method: HTTPMethod
        /// The path as the document names it (`/v1/devices/{id}/trail`).
        var route: String
        /// The request's path and query; the route when nil.
        var target: String?
        var status: Int
        var token: String? = "secret"
        var body: String?
        var headers: [(String, String)] = []
        /// A `Content-Length` sent instead of the body's (the body then not sent).
        var declaredLength: Int?

        var description: String { "\(method.rawValue) \(route) → \(status) (\(target ?? route))" }
    }

    static let van = "van-token"
    static let form = ("Content-Type", "application/x-www-form-urlencoded")
    static let json = ("Content-Type", "application/json")
    static let batch =
        #"{"device":"van1","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"#
        + #""lon":11.5,"hAcc":5},{"seq":2,"kind":"location","time":"2024-05-14T09:31:00Z","lat":48.11,"lon":11.5},"#
        + #"{"seq":3,"kind":"enter","region":"home","time":"2024-05-14T09:32:00Z","lat":48.12,"lon":11.5}]}"#
    static let ownTracks = #"{"_type":"location","lat":48.1,"lon":11.5,"tst":1715679000,"acc":5}"#
    static let anna = [("X-Limit-U", "anna"), ("X-Limit-D", "phone")]
    static let overland =
        #"{"locations":[{"type":"Feature","geometry":{"type":"Point","coordinates":[11.5,48.1]},"#
        + #""properties":{"timestamp":"2024-05-14T09:40:00Z","device_id":"van1"}}]}"#
    /// Over the server's maxBodyBytes (2 KiB): declared, not sent.
    static let tooLarge = 4096

    /// A request for every documented route and status (the server's maxBodyBytes is 2 KiB).
    static var cases: [Case] {
        var c: [Case] = [
            .init(method: .POST, route: "/v1/locations", status: 200, body: batch),
            .init(method: .POST, route: "/v1/locations", status: 400, body: #"{"device":"d"}"#),
            .init(method: .POST, route: "/v1/locations", status: 401, token: nil, body: batch),
            .init(
                method: .POST, route: "/v1/locations", status: 403, token: van,
                body: batch.replacing("van1", with: "bus")),
            .init(method: .POST, route: "/v1/locations", status: 413, declaredLength: tooLarge),

            .init(method: .GET, route: "/", target: "/?id=van1&lat=48.1&lon=11.5&timestamp=1715679100", status: 200),
            .init(method: .GET, route: "/", status: 200, token: nil, headers: [("Accept", "text/html")]),
            .init(method: .GET, route: "/", target: "/?id=van1&lat=north&lon=11.5", status: 400),
            .init(method: .GET, route: "/", target: "/?id=stranger&lat=48&lon=11", status: 400, token: nil),
            .init(method: .GET, route: "/", target: "/?id=van1&lat=48&lon=11&token=wrong", status: 401, token: nil),
            .init(method: .GET, route: "/", target: "/?id=bus&lat=48&lon=11", status: 403, token: van),
            .init(
                method: .POST, route: "/", status: 200, body: "id=van1&lat=48.1&lon=11.5&timestamp=1715679200",
                headers: [form]),
            .init(method: .POST, route: "/", status: 400, body: "id=van1&lat=north&lon=11.5", headers: [form]),
            // Read but impossible: acknowledged, not stored (X-KeepTrack-Not-Stored).
            .init(method: .POST, route: "/", status: 200, body: "id=van1&lat=95&lon=11.5", headers: [form]),
            .init(method: .POST, route: "/", status: 401, token: "wrong", body: "id=van1&lat=1&lon=1", headers: [form]),
            .init(method: .POST, route: "/", status: 403, token: van, body: "id=bus&lat=1&lon=1", headers: [form]),
            .init(
                method: .POST, route: "/", status: 404, token: nil,
                body: #"{"device_id":"stranger","location":{"coords":{"latitude":48,"longitude":11}}}"#,
                headers: [json]),
            .init(method: .POST, route: "/", status: 413, headers: [form], declaredLength: tooLarge),
            .init(method: .HEAD, route: "/", status: 200, token: nil),

            .init(method: .POST, route: "/owntracks", status: 200, body: ownTracks, headers: anna),
            .init(method: .POST, route: "/owntracks", status: 400, body: #"{"_type":"location","lat":"#, headers: anna),
            .init(method: .POST, route: "/owntracks", status: 401, token: nil, body: ownTracks, headers: anna),
            .init(method: .POST, route: "/owntracks", status: 403, token: van, body: ownTracks, headers: anna),
            .init(method: .POST, route: "/owntracks", status: 413, headers: anna, declaredLength: tooLarge),
            .init(
                method: .POST, route: "/owntracks", status: 415, body: #"{"_type":"encrypted","data":"AAAA"}"#,
                headers: anna),

            .init(method: .POST, route: "/api/v1/overland/batches", status: 200, body: overland),
            .init(method: .POST, route: "/api/v1/overland/batches", status: 400, body: #"{"locations":"#),
            .init(method: .POST, route: "/api/v1/overland/batches", status: 401, token: nil, body: overland),
            .init(
                method: .POST, route: "/api/v1/overland/batches", status: 403, token: van,
                body: overland.replacing("van1", with: "bus")),
            .init(method: .POST, route: "/api/v1/overland/batches", status: 413, declaredLength: tooLarge),

            .init(method: .GET, route: "/v1/devices", status: 200),
            .init(method: .GET, route: "/v1/devices", status: 401, token: nil),
            .init(method: .HEAD, route: "/v1/devices", status: 200),
            .init(method: .HEAD, route: "/v1/devices", status: 401, token: nil),
            .init(method: .GET, route: "/v1/devices/latest", status: 200),
            .init(method: .GET, route: "/v1/devices/latest", status: 401, token: nil),
            .init(method: .HEAD, route: "/v1/devices/latest", status: 200),

            .init(method: .GET, route: "/v1/positions", target: "/v1/positions?bbox=11,48,12,49&limit=1", status: 200),
            .init(method: .GET, route: "/v1/positions", status: 400),
            .init(
                method: .GET, route: "/v1/positions", target: "/v1/positions?bbox=11,48,12,49", status: 401, token: nil),
            .init(
                method: .GET, route: "/v1/positions", target: "/v1/positions?bbox=11,48,12,49&device=bus", status: 403,
                token: van),
            .init(
                method: .HEAD, route: "/v1/positions", target: "/v1/positions?near=48.1,11.5&radius=500", status: 200),
            .init(method: .HEAD, route: "/v1/positions", status: 400),
        ]
        let trail = "/v1/devices/{id}/trail"
        for format in ["geojson", "json", "gpx"] {
            c.append(
                .init(
                    method: .GET, route: trail, target: "/v1/devices/van1/trail?format=\(format)&limit=2", status: 200))
        }
        c += [
            .init(method: .GET, route: trail, target: "/v1/devices/van1/trail?format=kml", status: 400),
            .init(method: .GET, route: trail, target: "/v1/devices/van1/trail", status: 401, token: nil),
            .init(method: .GET, route: trail, target: "/v1/devices/bus/trail", status: 403, token: van),
            .init(method: .GET, route: trail, target: "/v1/devices/nobody/trail", status: 404),
            .init(method: .HEAD, route: trail, target: "/v1/devices/van1/trail", status: 200),
            .init(method: .HEAD, route: trail, target: "/v1/devices/nobody/trail", status: 404),
        ]
        for kind in ["stops", "trips"] {
            let route = "/v1/devices/{id}/\(kind)"
            c += [
                .init(method: .GET, route: route, target: "/v1/devices/van1/\(kind)", status: 200),
                .init(method: .GET, route: route, target: "/v1/devices/van1/\(kind)?format=csv", status: 400),
                .init(method: .GET, route: route, target: "/v1/devices/van1/\(kind)", status: 401, token: nil),
                .init(method: .GET, route: route, target: "/v1/devices/bus/\(kind)", status: 403, token: van),
                .init(method: .GET, route: route, target: "/v1/devices/nobody/\(kind)", status: 404),
            ]
        }
        c.append(
            .init(
                method: .GET, route: "/v1/devices/{id}/trips", target: "/v1/devices/van1/trips?format=gpx",
                status: 200))
        // Statistics and share links (SHARE_TOKEN, GONE_TOKEN and DELETE_ID: shares the test makes).
        let stats = "/v1/devices/{id}/stats", newShare = #"{"device":"van1","expires":"1h"}"#
        c += [
            .init(method: .GET, route: stats, target: "/v1/devices/van1/stats", status: 200),
            .init(method: .GET, route: stats, target: "/v1/devices/van1/stats?by=year", status: 400),
            .init(method: .GET, route: stats, target: "/v1/devices/van1/stats", status: 401, token: nil),
            .init(method: .GET, route: stats, target: "/v1/devices/bus/stats", status: 403, token: van),
            .init(method: .GET, route: stats, target: "/v1/devices/nobody/stats", status: 404),
            .init(
                method: .GET, route: stats, target: "/v1/devices/van1/stats?share=GONE_TOKEN", status: 410, token: nil),
            .init(method: .HEAD, route: stats, target: "/v1/devices/van1/stats", status: 200),
            .init(method: .HEAD, route: stats, target: "/v1/devices/nobody/stats", status: 404),
            .init(method: .GET, route: "/v1/shares", status: 200),
            .init(method: .GET, route: "/v1/shares", status: 401, token: nil),
            .init(method: .HEAD, route: "/v1/shares", status: 200),
            .init(method: .HEAD, route: "/v1/shares", status: 401, token: nil),
            .init(method: .GET, route: "/v1/shares", target: "/v1/shares?share=SHARE_TOKEN", status: 200, token: nil),
            .init(method: .POST, route: "/v1/shares", status: 201, body: newShare, headers: [json]),
            .init(method: .POST, route: "/v1/shares", status: 400, body: #"{"device":"van1"}"#, headers: [json]),
            .init(method: .POST, route: "/v1/shares", status: 401, token: nil, body: newShare, headers: [json]),
            .init(
                method: .POST, route: "/v1/shares", status: 403, token: van,
                body: newShare.replacing("van1", with: "bus"),
                headers: [json]),
            .init(
                method: .POST, route: "/v1/shares", status: 404, body: newShare.replacing("van1", with: "nobody"),
                headers: [json]),
            .init(method: .POST, route: "/v1/shares", status: 413, headers: [json], declaredLength: tooLarge),
            .init(method: .DELETE, route: "/v1/shares/{shareId}", target: "/v1/shares/DELETE_ID", status: 200),
            .init(method: .DELETE, route: "/v1/shares/{shareId}", target: "/v1/shares/x", status: 401, token: nil),
            .init(
                method: .DELETE, route: "/v1/shares/{shareId}", target: "/v1/shares/x?share=SHARE_TOKEN", status: 403,
                token: nil),
            .init(method: .DELETE, route: "/v1/shares/{shareId}", target: "/v1/shares/nope", status: 404),
            .init(method: .GET, route: "/s/{token}", target: "/s/SHARE_TOKEN", status: 200, token: nil),
            .init(method: .GET, route: "/s/{token}", target: "/s/AAAAAAAAAAAAAAAAAAAAAA", status: 404, token: nil),
            .init(method: .GET, route: "/s/{token}", target: "/s/GONE_TOKEN", status: 410, token: nil),
            .init(method: .HEAD, route: "/s/{token}", target: "/s/SHARE_TOKEN", status: 200, token: nil),
            .init(method: .HEAD, route: "/s/{token}", target: "/s/nope", status: 404, token: nil),
        ]
        c += [
            .init(method: .GET, route: "/v1/stream", status: 426),
            .init(method: .GET, route: "/v1/stream", status: 401, token: nil),
            .init(method: .HEAD, route: "/v1/stream", status: 426),
            .init(method: .HEAD, route: "/v1/stream", status: 401, token: nil),
            .init(method: .GET, route: "/ws/last", status: 426),
            .init(method: .GET, route: "/ws/last", status: 401, token: nil),
            .init(method: .HEAD, route: "/ws/last", status: 426),
            .init(method: .HEAD, route: "/ws/last", status: 401, token: nil),
        ]
        let cached = [("If-None-Match", "*")]
        for route in ["/map", "/map/app.js", "/map/app.css"] {
            for method in [HTTPMethod.GET, .HEAD] {
                c.append(.init(method: method, route: route, status: 200, token: nil))
                c.append(.init(method: method, route: route, status: 304, token: nil, headers: cached))
            }
        }
        for (route, name) in [
            ("/map/leaflet/{name}", "leaflet.js"), ("/map/leaflet/images/{name}", "marker-icon.png"),
            ("/map/dygraphs/{name}", "dygraph.min.js"),
        ] {
            let file = route.replacing("{name}", with: name), missing = route.replacing("{name}", with: "missing.css")
            for method in [HTTPMethod.GET, .HEAD] {
                c.append(.init(method: method, route: route, target: file, status: 200, token: nil))
                c.append(.init(method: method, route: route, target: file, status: 304, token: nil, headers: cached))
                c.append(.init(method: method, route: route, target: missing, status: 404, token: nil))
            }
        }
        c += [
            .init(method: .GET, route: "/map/svg", status: 200),
            .init(method: .GET, route: "/map/svg", target: "/map/svg?device=van1&limit=0", status: 400),
            .init(method: .GET, route: "/map/svg", status: 401, token: nil),
            .init(method: .GET, route: "/map/svg", target: "/map/svg?device=bus", status: 403, token: van),
            .init(method: .HEAD, route: "/map/svg", status: 200),
        ]
        for method in [HTTPMethod.GET, .POST] {
            c += [
                .init(method: method, route: "/api/0/version", status: 200),
                .init(method: method, route: "/api/0/version", status: 401, token: nil),
                .init(method: method, route: "/api/0/list", target: "/api/0/list?user=anna", status: 200),
                .init(method: method, route: "/api/0/list", target: "/api/0/list?user=%ZZ", status: 400),
                .init(method: method, route: "/api/0/list", status: 401, token: nil),
                .init(method: method, route: "/api/0/last", status: 200),
                .init(method: method, route: "/api/0/last", target: "/api/0/last?user=%ZZ", status: 400),
                .init(method: method, route: "/api/0/last", status: 401, token: nil),
                .init(
                    method: method, route: "/api/0/locations", status: 200,
                    body: method == .POST ? "user=anna&device=phone&from=2024-05-14" : nil,
                    headers: method == .POST
                        ? [form]
                        : [
                            ("X-Limit-User", "anna"), ("X-Limit-Device", "phone"),
                            ("X-Limit-From", "2024-05-14"),
                        ]),
                .init(
                    method: method, route: "/api/0/locations",
                    target: "/api/0/locations?user=anna&device=phone&format=xml", status: 400),
                .init(method: method, route: "/api/0/locations", status: 401, token: nil),
                .init(
                    method: method, route: "/api/0/locations", target: "/api/0/locations?user=anna&device=phone",
                    status: 403, token: van),
                .init(method: method, route: "/api/0/locations", target: "/api/0/locations?user=anna", status: 416),
            ]
        }
        for route in ["/healthz", "/metrics", "/openapi.json"] {
            c.append(.init(method: .GET, route: route, status: 200, token: nil))
            c.append(.init(method: .HEAD, route: route, status: 200, token: nil))
        }
        c += [
            .init(method: .PUT, route: "/v1/faults", status: 200, body: "{}"),
            .init(method: .PUT, route: "/v1/faults", status: 400, body: #"{"failRate":2}"#),
            .init(method: .PUT, route: "/v1/faults", status: 401, token: nil, body: "{}"),
            .init(method: .PUT, route: "/v1/faults", status: 403, token: van, body: "{}"),
        ]
        c += eventCases
        return c
    }

    /// Geofences, events and hooks (docs/events.md).
    static var eventCases: [Case] {
        func feature(_ id: String) -> String {
            #"{"type":"Feature","id":"\#(id)","geometry":{"type":"Point","coordinates":[11.5,48.1]},"#
                + #""properties":{"radius":100}}"#
        }
        let collection = #"{"type":"FeatureCollection","features":[\#(feature("depot"))]}"#
        let geofences = "/v1/geofences", one = "/v1/geofences/{name}"
        let hook =
            #"{"type":"webhook","url":"https://keeptrack.invalid/hook","secret":"a secret of more than 16 bytes"}"#
        let hooks = "/v1/hooks", named = "/v1/hooks/{name}"
        return [
            .init(method: .PUT, route: geofences, status: 200, body: collection),
            .init(method: .PUT, route: geofences, status: 400, body: #"{"type":"FeatureCollection","features":[{}]}"#),
            .init(method: .PUT, route: geofences, status: 401, token: nil, body: collection),
            .init(method: .PUT, route: geofences, status: 403, token: van, body: collection),
            .init(method: .PUT, route: geofences, status: 413, declaredLength: tooLarge),
            .init(method: .GET, route: geofences, status: 200),
            .init(method: .GET, route: geofences, status: 401, token: nil),
            .init(method: .GET, route: geofences, status: 403, token: van),
            .init(method: .HEAD, route: geofences, status: 200),
            .init(method: .HEAD, route: geofences, status: 401, token: nil),
            .init(method: .HEAD, route: geofences, status: 403, token: van),
            .init(method: .PUT, route: one, target: "/v1/geofences/yard", status: 201, body: feature("yard")),
            .init(method: .PUT, route: one, target: "/v1/geofences/yard", status: 200, body: feature("yard")),
            .init(method: .PUT, route: one, target: "/v1/geofences/other", status: 400, body: feature("yard")),
            .init(
                method: .PUT, route: one, target: "/v1/geofences/yard", status: 403, token: van, body: feature("yard")),
            .init(method: .GET, route: one, target: "/v1/geofences/yard", status: 200),
            .init(method: .GET, route: one, target: "/v1/geofences/yard", status: 403, token: van),
            .init(method: .GET, route: one, target: "/v1/geofences/nowhere", status: 404),
            .init(method: .HEAD, route: one, target: "/v1/geofences/yard", status: 200),
            .init(method: .HEAD, route: one, target: "/v1/geofences/yard", status: 401, token: nil),
            .init(method: .HEAD, route: one, target: "/v1/geofences/yard", status: 403, token: van),
            .init(method: .HEAD, route: one, target: "/v1/geofences/nowhere", status: 404),
            .init(method: .DELETE, route: one, target: "/v1/geofences/yard", status: 403, token: van),
            .init(method: .DELETE, route: one, target: "/v1/geofences/yard", status: 204),
            .init(method: .DELETE, route: one, target: "/v1/geofences/yard", status: 404),
            .init(method: .GET, route: "/v1/events", target: "/v1/events?device=van1&limit=2", status: 200),
            .init(method: .GET, route: "/v1/events", target: "/v1/events?kind=nothing", status: 400),
            .init(method: .GET, route: "/v1/events", status: 401, token: nil),
            .init(method: .GET, route: "/v1/events", target: "/v1/events?device=bus", status: 403, token: van),
            .init(method: .HEAD, route: "/v1/events", target: "/v1/events?device=van1&limit=2", status: 200),
            .init(method: .HEAD, route: "/v1/events", status: 401, token: nil),
            .init(method: .HEAD, route: "/v1/events", target: "/v1/events?device=bus", status: 403, token: van),
            .init(method: .PUT, route: named, target: "/v1/hooks/ops", status: 201, body: hook),
            .init(method: .PUT, route: named, target: "/v1/hooks/ops", status: 200, body: hook),
            .init(
                method: .PUT, route: named, target: "/v1/hooks/ops", status: 400,
                body: hook.replacing("https://keeptrack.invalid", with: "ftp://keeptrack.invalid")),
            .init(method: .PUT, route: named, target: "/v1/hooks/ops", status: 403, token: van, body: hook),
            .init(method: .GET, route: hooks, status: 200),
            .init(method: .GET, route: hooks, status: 401, token: nil),
            .init(method: .GET, route: hooks, status: 403, token: van),
            .init(method: .HEAD, route: hooks, status: 200),
            .init(method: .HEAD, route: hooks, status: 401, token: nil),
            .init(method: .HEAD, route: hooks, status: 403, token: van),
            .init(method: .GET, route: named, target: "/v1/hooks/ops", status: 200),
            .init(method: .GET, route: named, target: "/v1/hooks/ops", status: 403, token: van),
            .init(method: .GET, route: named, target: "/v1/hooks/nobody", status: 404),
            .init(method: .HEAD, route: named, target: "/v1/hooks/ops", status: 200),
            .init(method: .HEAD, route: named, target: "/v1/hooks/ops", status: 401, token: nil),
            .init(method: .HEAD, route: named, target: "/v1/hooks/ops", status: 403, token: van),
            .init(method: .HEAD, route: named, target: "/v1/hooks/nobody", status: 404),
            .init(method: .POST, route: "/v1/hooks/{name}/retry", target: "/v1/hooks/ops/retry", status: 200),
            .init(method: .POST, route: "/v1/hooks/{name}/retry", target: "/v1/hooks/nobody/retry", status: 404),
            .init(method: .POST, route: "/v1/hooks/{name}/test", target: "/v1/hooks/ops/test", status: 502),
            .init(method: .POST, route: "/v1/hooks/{name}/test", target: "/v1/hooks/nobody/test", status: 404),
            .init(method: .DELETE, route: named, target: "/v1/hooks/ops", status: 204),
            .init(method: .DELETE, route: named, target: "/v1/hooks/ops", status: 404),
        ]
    }

    /// What is wrong with an answer to `c` under the document, each problem naming the route, the
    /// status and (for a body) the JSON path.
    static func problems(_ c: Case, status: Int, contentType: String?, body: [UInt8], document: JSON) -> [String] {
        let validator = SchemaValidator(document: document)
        func resolved(_ value: JSON?) -> JSON? {
            guard let reference = value?["$ref"]?.string else { return value }
            return validator.resolve(reference)
        }
        let name = "\(c.method.rawValue) \(c.route) → \(status)"
        guard let operation = document["paths"]?[c.route]?[c.method.rawValue.lowercased()] else {
            return ["\(c.method.rawValue) \(c.route): not in the document"]
        }
        guard let answer = resolved(operation["responses"]?["\(status)"]) else {
            return ["\(name): the status is not documented for the route"]
        }
        // A request the server took is one the document describes.
        var out: [String] = []
        if (200..<300).contains(status), let sent = c.body, !sent.isEmpty {
            let json = try? JSON.parse(sent)
            let declared = c.headers.first { $0.0.lowercased() == "content-type" }?.1
            let type = declared ?? (json != nil ? "application/json" : "text/plain")
            let described = resolved(operation["requestBody"])?["content"]?[type]
            if described == nil {
                out.append("\(c.method.rawValue) \(c.route): a \(type) request body the document does not describe")
            } else if type == "application/json", let json, let schema = described?["schema"] {
                out += validator.problems(json, schema).map { "\(c.method.rawValue) \(c.route) request body: \($0)" }
            }
        }
        let media = contentType?.split(separator: ";").first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        let content = answer["content"]
        if body.isEmpty {
            guard c.method == .HEAD || content == nil || answer["x-keeptrack-may-be-empty"] == .bool(true) else {
                return out + ["\(name): an empty body where the document says \(content?.members.map(\.key) ?? [])"]
            }
            return out
        }
        guard let content else {
            return out + ["\(name): a body (\(media ?? "no type")) where the document says none"]
        }
        guard let media, let schema = content[media]?["schema"] else {
            return out + ["\(name): Content-Type \(media ?? "none") is not one of \(content.members.map(\.key))"]
        }
        guard media == "application/json" || media.hasSuffix("+json") else { return out }
        let value: JSON
        do {
            value = try JSON.parse(String(decoding: body, as: UTF8.self))
        } catch {
            return out + ["\(name): the body is not JSON: \(error)"]
        }
        return out + validator.problems(value, schema).map { "\(name): \($0)" }
    }

    /// The first two text messages of `/v1/stream` (the admin's), a batch stored between them.
    static func streamMessages(port: Int, http: RawHTTP) async throws -> [String] {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let record =
            #"{"device":"van1","records":[{"seq":10,"kind":"location","time":"2024-05-14T09:50:00Z","lat":48.2,"#
            + #""lon":11.6}]}"#
        _ = try await withTimeout(30, "the stream's snapshot and first record") {
            try await WebSocketClient.connect(
                url: "ws://127.0.0.1:\(port)/v1/stream?token=secret", logger: Logger(label: "test.openapi")
            ) { inbound, _, _ in
                var iterator = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                if case .text(let text)? = try await iterator.next() { continuation.yield(text) }
                _ = try await http.exchange(
                    "POST", "/v1/locations", headers: [json, ("Authorization", "Bearer secret")],
                    body: Array(record.utf8))
                if case .text(let text)? = try await iterator.next() { continuation.yield(text) }
            }
        }
        continuation.finish()
        var out: [String] = []
        for await message in stream { out.append(message) }
        return out
    }

    /// What is wrong with the stream's messages under `x-keeptrack-websocket` (the first the snapshot,
    /// each one of the messages it lists).
    static func streamProblems(_ messages: [String], document: JSON) -> [String] {
        let name = "GET /v1/stream → 101"
        guard messages.count == 2 else { return ["\(name): \(messages.count) messages, not a snapshot and a record"] }
        guard let kinds = document["paths"]?["/v1/stream"]?["get"]?["x-keeptrack-websocket"]?["server-to-client"]?.items
        else { return ["\(name): no x-keeptrack-websocket.server-to-client"] }
        let validator = SchemaValidator(document: document)
        var out: [String] = []
        for (i, text) in messages.enumerated() {
            guard let value = try? JSON.parse(text) else {
                out.append("\(name): message \(i) is not JSON")
                continue
            }
            let results = kinds.map { validator.problems(value, $0) }
            if i == 0, !results[0].isEmpty { out += results[0].map { "\(name): message 0 (the snapshot): \($0)" } }
            if !results.contains(where: \.isEmpty) {
                out += results.enumerated().flatMap { k, p in p.map { "\(name): message \(i), as kind \(k): \($0)" } }
            }
        }
        return out
    }

    /// A directory with the two Leaflet files the cases ask for, and dygraphs' script (the chart's directory too).
    static func leaflet() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/images", withIntermediateDirectories: true)
        try Data("/* leaflet */".utf8).write(to: URL(fileURLWithPath: directory.path + "/leaflet.js"))
        try Data("/* dygraphs */".utf8).write(to: URL(fileURLWithPath: directory.path + "/dygraph.min.js"))
        try Data([0x89, 0x50, 0x4E, 0x47]).write(to: URL(fileURLWithPath: directory.path + "/images/marker-icon.png"))
        return directory
    }

    @Test(arguments: StoreKind.allCases) func everyAnswerOfEveryRouteIsTheDocumentsStatusAndShape(kind: StoreKind)
        async throws
    {
        let (_, document) = try Self.document()
        let leaflet = try Self.leaflet()
        let endpoint = try await Endpoint.start(store: kind, token: "secret") {
            $0.maxBodyBytes = 2048
            $0.corsOrigins = ["https://app.example"]
            $0.map.leafletDirectory = leaflet.path
            $0.map.chartDirectory = leaflet.path
        }
        let http = RawHTTP(port: endpoint.port)
        do {
            let van = try await endpoint.server.store.addCredential(device: "van1", now: 1_715_679_000)
            // The shares the cases name; made once van1 has points (the first case stores them).
            var shares: [String: String] = [:]
            func makeShares() async throws {
                let store = endpoint.server.store, now = Date().timeIntervalSince1970
                shares["SHARE_TOKEN"] = try await store.addShare(
                    device: "van1", expires: now + 3600, from: nil, to: nil, now: now
                ).token
                let gone = try await store.addShare(device: "van1", expires: now + 3600, from: nil, to: nil, now: now)
                _ = try await store.revokeShare(id: gone.share.id, at: now)
                shares["GONE_TOKEN"] = gone.token
                shares["DELETE_ID"] = try await store.addShare(
                    device: "van1", expires: now + 3600, from: nil, to: nil, now: now
                ).share.id
            }
            var exercised = Set<String>()
            var failures: [String] = []
            // The device token the cases call `van-token`; the store made the real one.
            func send(_ c: Case) async throws -> (status: Int, type: String?, body: [UInt8]) {
                var headers = c.headers
                if let token = c.token {
                    headers.append(("Authorization", "Bearer \(token == Self.van ? van : token)"))
                }
                if shares.isEmpty, try await endpoint.server.store.device("van1") != nil { try await makeShares() }
                var target = c.target ?? c.route
                for (name, value) in shares { target = target.replacing(name, with: value) }
                let answer = try await http.exchange(
                    c.method.rawValue, target, headers: headers, body: c.body.map { Array($0.utf8) },
                    declaredLength: c.declaredLength)
                return (answer.status, answer.header("Content-Type"), answer.body)
            }
            for c in Self.cases {
                guard let answer = try? await send(c) else {
                    failures.append("\(c): no answer")
                    continue
                }
                guard answer.status == c.status else {
                    failures.append(
                        "\(c): got \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
                    continue
                }
                exercised.insert("\(c.method.rawValue) \(c.route) \(c.status)")
                failures += Self.problems(
                    c, status: answer.status, contentType: answer.type, body: answer.body,
                    document: document)
            }
            // The stream's messages: a snapshot, then a record stored after it.
            let messages = try await Self.streamMessages(port: endpoint.port, http: http)
            failures += Self.streamProblems(messages, document: document)
            if messages.count == 2 { exercised.insert("GET /v1/stream 101") }
            // The document it serves is this one.
            let served = try await http.exchange("GET", "/openapi.json", headers: [], body: nil)
            if String(decoding: served.body, as: UTF8.self) != (try Self.document().json) {
                failures.append("GET /openapi.json → 200: not docs/openapi.yaml as JSON (build again)")
            }
            // Every path's preflight, from the listed origin.
            for (path, item) in document["paths"]?.members ?? [] where item["options"] != nil {
                let target = path.replacing("{id}", with: "van1").replacing("{name}", with: "leaflet.js")
                    .replacing("{shareId}", with: "x").replacing("{token}", with: "x")
                let c = Case(
                    method: .OPTIONS, route: path, target: target, status: 204, token: nil,
                    headers: [("Origin", "https://app.example"), ("Access-Control-Request-Method", "GET")])
                guard let answer = try? await send(c) else {
                    failures.append("\(c): no answer")
                    continue
                }
                if answer.status == 204 {
                    exercised.insert("OPTIONS \(path) 204")
                } else {
                    failures.append("\(c): got \(answer.status)")
                }
                failures += Self.problems(
                    c, status: answer.status, contentType: answer.type, body: answer.body,
                    document: document)
            }
            // Every documented answer was seen, or says why not.
            let validator = SchemaValidator(document: document)
            for (path, item) in document["paths"]?.members ?? [] {
                for (method, operation) in item.members where Self.routedMethods.contains(method) || method == "options"
                {
                    for (status, answer) in operation["responses"]?.members ?? [] {
                        let resolved = answer["$ref"]?.string.flatMap(validator.resolve) ?? answer
                        guard resolved["x-keeptrack-not-exercised"] == nil else { continue }
                        if !exercised.contains("\(method.uppercased()) \(path) \(status)") {
                            failures.append(
                                "\(method.uppercased()) \(path) → \(status): documented, but no case asks for it")
                        }
                    }
                }
            }
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        } catch {
            Issue.record(error)
        }
        await endpoint.stop()
        leaflet.remove()
    }
}
