import AsyncHTTPClient
import BuildInfo
import Foundation
import Geo
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TrackStore

/// Names places by a reverse geocoder speaking Nominatim's `/reverse?format=jsonv2` (a self-hosted
/// Nominatim, Photon's compatible endpoint), in the background: the places to name are queued
/// (``ask(device:_:)``, never waiting: ingest hands it the stops it finds), and one task asks for them
/// one at a time, at most one request per ``interval`` of its clock (Nominatim's usage policy: one a
/// second), with a `User-Agent` naming the program. An answer is kept in the store by cell
/// (``PlaceNameStore``), so a cell is asked once; a failure leaves the name empty and the cell is
/// asked again after ``retryAfter``. Coordinates are never logged.
final class ReverseGeocoder: Service, Sendable {
    /// The geocoder's base URL (`https://nominatim.example.org`); `/reverse` is appended.
    let base: String
    let store: any TrackStore
    let clock: any EpochClock
    let logger: Logger
    /// The least time between two requests.
    let interval: Duration
    /// How long a cell whose request failed waits before it is asked again.
    let retryAfter: Double
    /// The most places waiting; more are dropped (asked again the next time they are read).
    let capacity: Int
    /// The requests made so far (answered or failed), fired after each (tests wait for it).
    let requests = Atomic<Int>(0)
    let requested = Signal()

    struct Queue {
        var order: [(device: String, coordinate: Coordinate, cell: PlaceCell)] = []
        var queued: Set<PlaceCell> = []
        var failed: [PlaceCell: Double] = [:]
    }

    let queue = Mutex(Queue())
    let wake = Signal()

    init(
        base: String, store: any TrackStore, clock: any EpochClock, logger: Logger, interval: Duration = .seconds(1),
        retryAfter: Double = 3600, capacity: Int = 10_000
    ) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        (self.store, self.clock, self.logger, self.interval) = (store, clock, logger, interval)
        (self.retryAfter, self.capacity) = (retryAfter, capacity)
    }

    /// The `User-Agent` of its requests.
    static var userAgent: String { "keeptrack/\(BuildInfo.version) (self-hosted keeptrack serve; reverse geocoding)" }

    /// Queues `coordinate` of `device` to be named, unless its cell is queued already or failed
    /// lately; returns at once.
    func ask(device: String, _ coordinate: Coordinate) {
        let cell = PlaceCell(coordinate)
        let now = clock.now.secondsSince1970
        let added = queue.withLock { q -> Bool in
            if q.queued.contains(cell) || q.order.count >= capacity { return false }
            if let failed = q.failed[cell], now - failed < retryAfter { return false }
            q.queued.insert(cell)
            q.order.append((device, coordinate, cell))
            return true
        }
        if added { wake.fire() }
    }

    /// The places queued, for tests and metrics.
    var waiting: Int { queue.withLock { $0.order.count } }

    func run() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let subscription = store.stopEvents.subscribe { [self] events in
            for e in events {
                if case .stop(let v) = e.kind { ask(device: e.device, v.coordinate) }
            }
        }
        await cancelWhenGracefulShutdown { [self] in
            var next: EpochInstant?
            while !Task.isCancelled {
                guard let item = queue.withLock({ q in q.order.isEmpty ? nil : q.order.removeFirst() }) else {
                    await wake.wait()
                    continue
                }
                defer { _ = queue.withLock { $0.queued.remove(item.cell) } }
                do {
                    if try await store.placeNames([item.cell])[item.cell] != nil { continue }
                    if let areas = store as? any PlaceAreaSource,
                        let first = try await areas.areaNames(device: item.device, containing: [item.coordinate]).first,
                        !first.isEmpty
                    {
                        continue
                    }
                } catch {
                    logger.warning("places: the store failed", metadata: ["serve.error": "\(error)"])
                    continue
                }
                if let next { try? await clock.sleep(until: next, tolerance: nil) }
                guard !Task.isCancelled else { break }
                next = clock.now.advanced(by: interval)
                do {
                    let name = try await request(client, item.coordinate)
                    try await store.setPlaceName(name, for: item.cell, at: clock.now.secondsSince1970)
                } catch {
                    logger.notice(
                        "places: the reverse geocoder did not answer; the place stays unnamed for now",
                        metadata: ["serve.error": "\(Self.describe(error))"])
                    let now = clock.now.secondsSince1970
                    queue.withLock { $0.failed[item.cell] = now }
                    counted()
                    continue
                }
                counted()
            }
        }
        store.stopEvents.unsubscribe(subscription)
        try? await client.shutdown()
    }

    func counted() {
        requests.add(1, ordering: .releasing)
        requested.fire()
    }

    /// Returns once `count` requests were made (and their answers kept).
    func requestsMade(_ count: Int) async {
        while requests.load(ordering: .acquiring) < count { await requested.wait() }
    }

    /// What went wrong, without the request's address (it holds the coordinate).
    static func describe(_ error: any Error) -> String {
        if let e = error as? GeocoderAnswer { return e.description }
        return String(reflecting: type(of: error))
    }

    struct GeocoderAnswer: Error, CustomStringConvertible {
        var description: String
    }

    /// Asks the geocoder for `coordinate`'s name: the answer's `name`, else its street and number,
    /// else the first part of its `display_name`; `nil` when it knows no place there.
    func request(_ client: HTTPClient, _ coordinate: Coordinate) async throws -> String? {
        let lat = String(format: "%.6f", coordinate.latitude), lon = String(format: "%.6f", coordinate.longitude)
        var request = HTTPClientRequest(
            url: "\(base)/reverse?format=jsonv2&lat=\(lat)&lon=\(lon)&zoom=18&addressdetails=1")
        request.headers.add(name: "User-Agent", value: Self.userAgent)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await client.execute(request, timeout: .seconds(20))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw GeocoderAnswer(description: "HTTP \(response.status.code)") }
        return try Self.name(fromJSONv2: Data(buffer: body))
    }

    /// The name a Nominatim `jsonv2` reverse answer gives (see ``request(_:_:)``).
    static func name(fromJSONv2 data: Data) throws -> String? {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw GeocoderAnswer(description: "an answer that is not a JSON object")
        }
        if object["error"] != nil { return nil }
        func text(_ v: Any?) -> String? {
            guard let s = (v as? String)?.trimmingCharacters(in: .whitespaces), !s.isEmpty else { return nil }
            return String(s.prefix(200))
        }
        if let name = text(object["name"]) { return name }
        let address = object["address"] as? [String: Any] ?? [:]
        if let road = text(address["road"]) ?? text(address["pedestrian"]) ?? text(address["footway"]) {
            return text(address["house_number"]).map { "\(road) \($0)" } ?? road
        }
        if let area = text(address["suburb"]) ?? text(address["village"]) ?? text(address["town"])
            ?? text(address["city"])
        {
            return area
        }
        return text((object["display_name"] as? String)?.split(separator: ",").first.map(String.init))
    }
}
