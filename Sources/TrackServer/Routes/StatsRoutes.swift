import Formats
import Foundation
import Hummingbird
import NIOCore
import TrackStore

/// `GET /v1/devices/{id}/stats?from=&to=&by=day|week|month&tz=ZONE`: a device's statistics by the
/// calendar periods of a time zone, from the aggregates the store keeps at ingest (``Statistics``,
/// ``StatisticsStore``): `{"device","by","tz","periods":[{"start","end","distance","movingDuration",
/// "stoppedDuration","trips","visits","maxSpeed","places"}],"totals":{...}}`.
///
/// A device token reads only its own device, a share link only its device within its window; an
/// unknown device is 404; a range of more than ``Statistics/maximumPeriods`` periods, or times outside
/// years 1970-9999, 400.
struct StatsRoutes: Sendable {
    let store: any TrackStore
    let places: PlaceNaming

    /// The times a query may name: years 1970 to 9999.
    static let earliest = 0.0
    static let latest = 253_402_300_800.0

    var routes: RouteCollection<ServerContext> {
        let routes = RouteCollection(context: ServerContext.self)
        routes.get("/v1/devices/{id}/stats") { request, context in try await stats(request, context) }
        routes.head("/v1/devices/{id}/stats") { request, context in try await Answer.head(stats(request, context)) }
        return routes
    }

    func stats(_ request: Request, _ context: ServerContext) async throws -> Response {
        let device = try context.pathDevice()
        try context.authorize(device: device)
        let q = request.uri.queryParameters
        let tzText = q["tz"].map(String.init) ?? "UTC"
        guard tzText.utf8.count <= 64, let zone = TimeZone(identifier: tzText) else {
            throw HTTPError(.badRequest, message: "tz: '\(tzText.prefix(64))' is not an IANA time zone")
        }
        // A date alone is its midnight in tz: `from=2025-03-08&to=2025-03-11` is three of tz's days.
        var (from, to) = try QueryTime.range({ q[$0[...]].map(String.init) }, zone: zone)
        for (key, t) in [("from", from), ("to", to)] {
            if let t, !(Self.earliest...Self.latest).contains(t) {
                throw HTTPError(.badRequest, message: "\(key): \(t) is outside the years 1970 to 9999")
            }
        }
        let byText = q["by"].map(String.init) ?? "day"
        guard let by = Statistics.Period(rawValue: byText) else {
            throw HTTPError(.badRequest, message: "by: '\(byText)' is not day, week or month")
        }
        guard let summary = try await store.device(device) else {
            throw HTTPError(.notFound, message: "no device '\(device)'")
        }
        if let window = context.identity.window {
            if window.from.isFinite { from = max(from ?? window.from, window.from) }
            if window.to.isFinite { to = min(to ?? window.to, window.to) }
        }
        // The range in whole quarter hours, the aggregates' grain: `from` taken up, `to` down. Empty when
        // the share's window leaves none of what was asked, or one end alone falls beyond the other.
        let quarter = Statistics.bucketSeconds
        let start = from ?? Statistics.periodStart(containing: summary.first, by: by, zone: zone)
        let end = to ?? Statistics.periodEnd(containing: summary.last, by: by, zone: zone)
        let lo = (start / quarter).rounded(.up) * quarter
        let hi = max(lo, (end / quarter).rounded(.down) * quarter)
        guard Statistics.leastPeriodCount(from: lo, to: hi, by: by) <= Double(Statistics.maximumPeriods) else {
            throw HTTPError(
                .badRequest,
                message: "from-to: more than \(Statistics.maximumPeriods) periods of a \(by.rawValue); ask for less")
        }
        let periods = Statistics.periods(from: lo, to: hi, by: by, zone: zone)
        guard periods.count <= Statistics.maximumPeriods else {
            throw HTTPError(
                .badRequest,
                message: "from-to: more than \(Statistics.maximumPeriods) periods of a \(by.rawValue); ask for less")
        }
        var report = Statistics.Report(periods: [], totals: Statistics.Figures(start: lo, end: hi))
        if let first = periods.first, let last = periods.last {
            let source = try await store.statisticsSource(device: device, from: first.start, to: last.end)
            let names = try await places.names(device: device, of: source.visits.map(\.coordinate))
            report = Statistics.report(source, periods: periods, names: names)
        }
        return Answer.ok(Self.json(device: device, by: by, zone: tzText, report), contentType: "application/json")
    }

    static func json(device: String, by: Statistics.Period, zone: String, _ report: Statistics.Report) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"device\":", to: &out)
        ByteWriting.appendJSONString(device, to: &out)
        out += Array(",\"by\":\"\(by.rawValue)\",\"tz\":".utf8)
        ByteWriting.appendJSONString(zone, to: &out)
        ByteWriting.appendStatic(",\"periods\":[", to: &out)
        for (i, f) in report.periods.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            figures(f, &out)
        }
        ByteWriting.appendStatic("],\"totals\":", to: &out)
        figures(report.totals, &out)
        ByteWriting.appendStatic("}\n", to: &out)
        return out
    }

    static func figures(_ f: Statistics.Figures, _ out: inout [UInt8]) {
        ByteWriting.appendStatic("{\"start\":\"", to: &out)
        ISOTime.append(f.start, to: &out)
        ByteWriting.appendStatic("\",\"end\":\"", to: &out)
        ISOTime.append(f.end, to: &out)
        ByteWriting.appendStatic("\",\"distance\":", to: &out)
        StopsJSON.number(f.distance, 1, &out)
        ByteWriting.appendStatic(",\"movingDuration\":", to: &out)
        StopsJSON.number(f.movingDuration, 0, &out)
        ByteWriting.appendStatic(",\"stoppedDuration\":", to: &out)
        StopsJSON.number(f.stoppedDuration, 0, &out)
        ByteWriting.appendStatic(",\"trips\":", to: &out)
        ByteWriting.appendInt(Int64(f.trips), to: &out)
        ByteWriting.appendStatic(",\"visits\":", to: &out)
        ByteWriting.appendInt(Int64(f.visits), to: &out)
        ByteWriting.appendStatic(",\"maxSpeed\":", to: &out)
        StopsJSON.number(f.maxSpeed, 3, &out)
        ByteWriting.appendStatic(",\"places\":", to: &out)
        ByteWriting.appendInt(Int64(f.places), to: &out)
        out.append(UInt8(ascii: "}"))
    }
}
