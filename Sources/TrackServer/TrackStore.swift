import Formats

/// The endpoint's storage: every record once, whatever the format it came in and however many
/// times it was sent. ``TrackServer`` speaks to it only through this protocol; ``SQLiteTrackStore``
/// (one file, the default) and the PostgreSQL store (`TrackStorePostgres`) implement it.
///
/// A record's key (``key(_:format:)``) makes storage idempotent: storing a batch again stores
/// nothing and counts its records as duplicates. Each store keeps a summary of every device (point
/// count, first and last time, last reception) updated with the points it stores: listing devices
/// and finding an unknown one read the summary, never the points.
///
/// Implementations must be safe to call from any task at once, and (for stores several processes
/// share) must count a record as accepted only in the one call that actually stored it.
public protocol TrackStore: FleetStore {
    /// Where the store is, for people: a file's path, or a URL without its password.
    var location: String { get }

    /// Stores `records` (all of one `format`: `json`, `osmand` or `owntracks`) in one transaction,
    /// received at `received` (seconds since 1970); returns how many were new and how many were
    /// already stored. Returns only once they are durable.
    ///
    /// - Throws: ``TrackStoreError`` for a record it refuses (an id with a NUL byte), or the
    ///   database's error; then nothing of the batch is stored.
    func insert(_ records: [TrailRecord], format: String, received: Double) async throws
        -> (accepted: Int, duplicates: Int)

    /// Every device, by id.
    func devices() async throws -> [DeviceSummary]

    /// One device, or `nil` when nothing was ever stored for it.
    func device(_ id: String) async throws -> DeviceSummary?

    /// One page of a device's records between `from` and `to` (seconds since 1970, inclusive), by
    /// time, then sequence (records without one first), then key, starting after `cursor`; `next` is
    /// where the following page starts, or `nil` on the last page. Records marked invalid only with
    /// `includeInvalid`.
    func trail(
        device: String, from: Double, to: Double, after cursor: TrailCursor?, limit: Int,
        includeInvalid: Bool
    ) async throws -> (records: [TrailRecord], next: TrailCursor?)

    /// How many records are stored (from the device summaries: no scan of the points).
    func count() async throws -> Int

    /// Releases the store's connections; a store is not used after it.
    func close() async
}

extension TrackStore {
    /// One page of a device's trail (``trail(device:from:to:after:limit:includeInvalid:)`` with its
    /// defaults: all times, valid records only).
    public func trail(
        device: String, from: Double = -.infinity, to: Double = .infinity, after cursor: TrailCursor?,
        limit: Int, includeInvalid: Bool = false
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        try await trail(device: device, from: from, to: to, after: cursor, limit: limit, includeInvalid: includeInvalid)
    }

    /// A device's whole trail between `from` and `to`, read a page at a time.
    public func trail(
        device: String, from: Double = -.infinity, to: Double = .infinity,
        includeInvalid: Bool = false
    ) async throws -> [TrailRecord] {
        var all: [TrailRecord] = []
        var cursor: TrailCursor?
        repeat {
            let page = try await trail(
                device: device, from: from, to: to, after: cursor, limit: 50_000,
                includeInvalid: includeInvalid)
            all += page.records
            cursor = page.next
        } while cursor != nil
        return all
    }

    public func close() async {}

    /// The record's key: our JSON batch's stable id, or for formats without one (OsmAnd,
    /// OwnTracks) everything that tells records apart: the format, the device (OwnTracks' is
    /// `user/device`), the kind, the time to the millisecond, the region and the position to 1e-7°.
    /// Two senders, or two points of one sender at the same time in different places, never share
    /// a key; the same request sent twice always does.
    public static func key(_ r: TrailRecord, format: String) -> String {
        if format == "json" { return "id:\(r.device):\(r.sequence)" }
        let ms = Int64((r.time * 1000).rounded())
        let lat = Int64((r.latitude * 1e7).rounded()), lon = Int64((r.longitude * 1e7).rounded())
        return "at:\(format):\(r.device):\(r.kind.rawValue):\(ms):\(r.region ?? ""):\(lat):\(lon)"
    }
}

/// A device as a store summarises it.
public struct DeviceSummary: Hashable, Sendable {
    public var id: String
    /// Records stored.
    public var points: Int
    /// The first and last record's time (seconds since 1970).
    public var first: Double
    public var last: Double
    /// When a record of it last arrived.
    public var lastReceived: Double

    public init(id: String, points: Int, first: Double, last: Double, lastReceived: Double) {
        self.id = id
        self.points = points
        self.first = first
        self.last = last
        self.lastReceived = lastReceived
    }
}

/// Where a page of a trail ends: the last record's time, sequence and key. Its ``token`` is
/// opaque to clients.
public struct TrailCursor: Hashable, Sendable {
    public var time: Double
    public var sequence: Int64?
    public var key: String

    /// The cursor as a URL-safe token (base64url, no padding).
    public var token: String {
        let text = "1|\(String(time.bitPattern, radix: 16))|\(sequence.map(String.init) ?? "")|\(key)"
        return Base64URL.encode(Array(text.utf8))
    }

    /// The cursor a token stands for, or `nil` when it is not one this store gave.
    public init?(token: String) {
        guard let bytes = Base64URL.decode(token), let text = String(validating: bytes, as: UTF8.self) else {
            return nil
        }
        let parts = text.split(separator: "|", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "1", let bits = UInt64(parts[1], radix: 16) else { return nil }
        time = Double(bitPattern: bits)
        guard time.isFinite else { return nil }
        if parts[2].isEmpty {
            sequence = nil
        } else if let s = Int64(parts[2]) {
            sequence = s
        } else {
            return nil
        }
        key = String(parts[3])
    }

    public init(time: Double, sequence: Int64?, key: String) {
        self.time = time
        self.sequence = sequence
        self.key = key
    }
}

/// A store's error: what failed, and where (the database), with the cause (GRDB's or PostgreSQL's
/// error) kept in ``underlying``.
public struct TrackStoreError: Error, CustomStringConvertible {
    /// What failed and where, without the cause.
    public var message: String
    /// The error this one comes from, when there is one.
    public var underlying: (any Error)?
    /// The cause in words, when its own description hides them (PostgreSQL's message and hint).
    public var reason: String?
    /// The message, then the cause: its words, or its own description.
    public var description: String {
        if let reason { return "\(message): \(reason)" }
        return underlying.map { "\(message): \($0)" } ?? message
    }

    public init(message: String, reason: String? = nil, underlying: (any Error)? = nil) {
        self.message = message
        self.reason = reason
        self.underlying = underlying
    }
}

/// base64url without padding (RFC 4648 section 5).
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if i + 1 < bytes.count { out.append(alphabet[Int(n >> 6 & 63)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(n & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt32] = []
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(UInt32(c - UInt8(ascii: "A")))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(UInt32(c - UInt8(ascii: "a")) + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(UInt32(c - UInt8(ascii: "0")) + 52)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (k, v) in chunk.enumerated() { n |= v << (18 - 6 * UInt32(k)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
