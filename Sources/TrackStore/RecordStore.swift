import Formats

/// The records facet of a store: every record once, whatever the format it came in and however
/// many times it was sent, and the summary of each device.
///
/// A record's key (``TrackStore/key(_:format:)``) makes storage idempotent: storing a batch again
/// stores nothing and counts its records as duplicates. Each store keeps a summary of every device
/// (point count, first and last time, last reception) updated with the points it stores: listing
/// devices and finding an unknown one read the summary, never the points.
///
/// Implementations must be safe to call from any task at once, and (for stores several processes
/// share) must count a record as accepted only in the one call that actually stored it.
public protocol RecordStore: AnyObject {
    /// Stores `records` (all of one `format`: `json`, `osmand`, `owntracks` or `overland`) in one
    /// transaction, received at `received` (seconds since 1970); returns how many were new and how
    /// many were already stored. Returns only once they are durable.
    ///
    /// - Throws: ``TrackStoreError`` for a record it refuses (``TrackStoreError/Code/nulByte``), or
    ///   for the database's failure; then nothing of the batch is stored.
    func insert(_ records: [TrailRecord], format: String, received: Double) async throws
        -> (accepted: Int, duplicates: Int)

    /// Every device, by id.
    func devices() async throws -> [DeviceSummary]

    /// One device, or `nil` when nothing was ever stored for it.
    func device(_ id: String) async throws -> DeviceSummary?

    /// One page of a device's records between `from` and `to` (seconds since 1970, inclusive), by
    /// time, then sequence (records without one first), then key, starting after `cursor`; `next` is
    /// where the following page starts, or `nil` on the last page. Records marked invalid only with
    /// `includeInvalid`; locations marked outliers (``TrailRecord/outlier``) only with
    /// `includeOutliers`.
    func trail(
        device: String, from: Double, to: Double, after cursor: TrailCursor?, limit: Int,
        includeInvalid: Bool, includeOutliers: Bool
    ) async throws -> (records: [TrailRecord], next: TrailCursor?)

    /// How many records are stored (from the device summaries: no scan of the points).
    func count() async throws -> Int
}

extension RecordStore {
    /// One page of a device's trail (``trail(device:from:to:after:limit:includeInvalid:includeOutliers:)``
    /// with its defaults: all times, valid records only, no outliers).
    public func trail(
        device: String, from: Double = -.infinity, to: Double = .infinity, after cursor: TrailCursor?,
        limit: Int, includeInvalid: Bool = false, includeOutliers: Bool = false
    ) async throws
        -> (records: [TrailRecord], next: TrailCursor?)
    {
        try await trail(
            device: device, from: from, to: to, after: cursor, limit: limit, includeInvalid: includeInvalid,
            includeOutliers: includeOutliers)
    }

    /// A device's whole trail between `from` and `to`, read a page at a time.
    public func trail(
        device: String, from: Double = -.infinity, to: Double = .infinity,
        includeInvalid: Bool = false, includeOutliers: Bool = false
    ) async throws -> [TrailRecord] {
        var all: [TrailRecord] = []
        var cursor: TrailCursor?
        repeat {
            let page = try await trail(
                device: device, from: from, to: to, after: cursor, limit: 50_000,
                includeInvalid: includeInvalid, includeOutliers: includeOutliers)
            all += page.records
            cursor = page.next
        } while cursor != nil
        return all
    }

    /// The record's key: our JSON batch's stable id, or for records without one (OsmAnd,
    /// OwnTracks, Overland, and a batch's record whose `seq` is null: a peer's read back from a
    /// trail) everything that tells records apart: the format, the device (OwnTracks' is
    /// `user/device`), the kind, the time to the millisecond, the region and the position to 1e-7°.
    /// Two senders, or two points of one sender at the same time in different places, never share a
    /// key; the same request sent twice always does.
    public static func key(_ r: TrailRecord, format: String) -> String {
        if format == "json" && r.sequence > 0 { return "id:\(r.device):\(r.sequence)" }
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
