import Formats
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOPosix
import Synchronization
import TrackStore

/// What the route collections share: pages of a query, times in a query, answers and their heads.

/// The page a query asks for: `limit` and `cursor`.
struct Paging: Sendable {
    /// The records in a page when the request gives no `limit`.
    let defaultSize: Int
    /// The largest `limit` a request may ask for.
    let maxSize: Int

    /// The query's page: `limit` (``defaultSize`` when absent, at most ``maxSize``) and `cursor` (a
    /// token from a previous page).
    ///
    /// - Throws: 400 naming the parameter.
    func page(_ q: FlatDictionary<Substring, Substring>) throws -> (limit: Int, cursor: TrailCursor?) {
        var limit = defaultSize
        if let text = q["limit"], !text.isEmpty {
            guard let n = Int(text), (1...maxSize).contains(n) else {
                throw HTTPError(.badRequest, message: "limit: '\(text)' is not a number from 1 to \(maxSize)")
            }
            limit = n
        }
        var cursor: TrailCursor?
        if let text = q["cursor"], !text.isEmpty {
            guard let c = TrailCursor(token: String(text)) else {
                throw HTTPError(.badRequest, message: "cursor: not a cursor this server gave")
            }
            cursor = c
        }
        return (limit, cursor)
    }
}

/// A time parameter: ISO 8601 (UTC, or with an offset), a date alone, or Unix seconds.
enum QueryTime {
    /// The time of parameter `key` (`nil` when absent or empty); with `finite`, infinities are refused.
    /// A date alone is its midnight in `zone` (a route's `tz`), UTC without one.
    ///
    /// - Throws: 400 naming the parameter and its text.
    static func parse(_ key: String, _ text: String?, finite: Bool = true, zone: TimeZone? = nil) throws -> Double? {
        guard var text, !text.isEmpty else { return nil }
        // An offset's `+` not percent-encoded (%2B) arrives as a space: after the seconds, it is one.
        if let space = text.lastIndex(of: " "), text.distance(from: text.startIndex, to: space) >= 19 {
            text.replaceSubrange(space...space, with: "+")
        }
        if let t = ISOTime.parse(text) ?? offsetTime(text) ?? date(text, zone: zone) ?? Double(text),
            !finite || t.isFinite
        {
            return t
        }
        throw HTTPError(
            .badRequest,
            message: "\(key): '\(text.prefix(64))' is neither ISO 8601 (a time in UTC or with an offset, or a date "
                + "for its midnight\(zone == nil ? " UTC" : " in tz")) nor Unix seconds")
    }

    /// A time with its offset (`2024-06-11T12:00:00+02:00`); not one without (that would be read as
    /// UTC, which the text does not say).
    static func offsetTime(_ text: String) -> Double? {
        guard text.utf8.count > 19, text.contains("T"),
            text.utf8.dropFirst(19).contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") })
        else { return nil }
        return ISOTime.parse(text, anyOffset: true)
    }

    /// A date alone (`2025-03-14`), ISO 8601's too: its midnight in `zone`, UTC without one.
    static func date(_ text: String, zone: TimeZone? = nil) -> Double? {
        guard text.utf8.count == 10, text.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || (48...57).contains($0) }),
            let midnight = ISOTime.parse(text + "T00:00:00Z")
        else { return nil }
        guard let zone else { return midnight }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3,
            let local = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2]))
        else { return midnight }
        return local.timeIntervalSince1970
    }

    /// The `from` and `to` parameters as asked (`nil` when absent or empty), before a share's window
    /// clips them: every route refuses a `from` after its `to` alike.
    ///
    /// - Throws: 400 naming the parameter and its text, or both when `from` is after `to`.
    static func range(_ parameter: (String) -> String?, finite: Bool = true, zone: TimeZone? = nil) throws -> (
        from: Double?, to: Double?
    ) {
        let from = try parse("from", parameter("from"), finite: finite, zone: zone)
        let to = try parse("to", parameter("to"), finite: finite, zone: zone)
        if let from, let to, from > to {
            throw HTTPError(
                .badRequest, message: "from: \(parameter("from") ?? "") is after to: \(parameter("to") ?? "")")
        }
        return (from, to)
    }
}

/// Answers as the routes write them.
enum Answer {
    /// A 200 with `bytes` of `contentType`.
    static func ok(_ bytes: [UInt8], contentType: String, headers: HTTPFields = [:]) -> Response {
        var fields: HTTPFields = [.contentType: contentType]
        fields.append(contentsOf: headers)
        return Response(status: .ok, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A 200 with the JSON `text`.
    static func json(_ text: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// `response`'s head, for HEAD: its status and headers, `Content-Length` the length of the body it
    /// drops.
    static func head(_ response: Response) async throws -> Response {
        var r = response
        let writer = CountingWriter()
        try await response.body.write(writer)
        // The body first: setting it sets Content-Length to its own length.
        r.body = .init()
        r.headers[.contentLength] = String(writer.count.load(ordering: .relaxed))
        return r
    }
}

/// Runs blocking work (rendering a page of up to the largest page of records) on NIO's blocking
/// pool, not on the threads that serve connections and run Swift tasks.
func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await NIOThreadPool.singleton.runIfActive(work)
}

/// Counts the bytes of a response body (``Answer/head(_:)``).
final class CountingWriter: ResponseBodyWriter, Sendable {
    let count = Atomic<Int>(0)

    func write(_ buffer: ByteBuffer) async throws { count.add(buffer.readableBytes, ordering: .relaxed) }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
