import Formats

/// One wire format the uploader speaks: how records become a request, and whether an answer
/// acknowledges them. A new format is one type conforming to this and one line in
/// ``UploadFormats/all``; nothing else in the uploader or the CLI names formats.
public protocol UploadFormat: Sendable {
    /// The name on the command line and in the configuration file (`json`, `osmand`, `owntracks`).
    var name: String { get }
    /// Where a server that speaks it takes it (`/v1/locations`; `keeptrack serve` routes each
    /// format there, and `--upload embedded` uploads there).
    var serverPath: String { get }
    /// How many records one request carries: `nil` for a batch of any size, 1 for protocols of one
    /// record per request.
    var recordsPerRequest: Int? { get }
    /// The request for `records` of `device`, or `nil` when they have no form in this format (an
    /// OwnTracks dwell): they are acknowledged as skipped.
    func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest?
    /// Whether a 2xx answer's body acknowledges the request's records (a captive portal answers
    /// 200 with an HTML page: nothing was stored). Returns why not, or `nil` when it does.
    func problemWithAcknowledgement(_ body: [UInt8]) -> String?
    /// The same for an answer to a request of `count` records, for a format whose answer counts
    /// them. The default: ``problemWithAcknowledgement(_:)``.
    func problemWithAcknowledgement(_ body: [UInt8], of count: Int) -> String?
    /// Whether region transitions jump the location backlog (read in sequence order otherwise:
    /// a transition right after the location that decided it). The default is `true`.
    var transitionsFirst: Bool { get }
    /// How many requests of one batch may be in flight at once (1 keeps the protocol's order).
    /// The default is 1.
    var maxInFlight: Int { get }
    /// A batch (in the order ``transitionsFirst`` reads it) cut into the records of each request.
    /// `more` says the batch was full: records after it may belong to its last request. The
    /// default: the whole batch, or ``recordsPerRequest`` records a request.
    func requests(_ batch: [TrailRecord], settings: UploadFormatSettings, more: Bool) -> [[TrailRecord]]
    /// The device id a server that speaks the format files `device`'s records under (OwnTracks:
    /// `user/device`). The default is `device`.
    func deviceOnServer(_ device: String, settings: UploadFormatSettings) -> String
}

extension UploadFormat {
    public func problemWithAcknowledgement(_ body: [UInt8], of count: Int) -> String? {
        problemWithAcknowledgement(body)
    }
    public func deviceOnServer(_ device: String, settings: UploadFormatSettings) -> String { device }
    public var transitionsFirst: Bool { true }
    public var maxInFlight: Int { 1 }
    public func requests(_ batch: [TrailRecord], settings: UploadFormatSettings, more: Bool) -> [[TrailRecord]] {
        guard let n = recordsPerRequest else { return [batch] }
        return stride(from: 0, to: batch.count, by: n).map { Array(batch[$0..<min($0 + n, batch.count)]) }
    }
}

/// What a format may need besides the records.
public struct UploadFormatSettings: Sendable {
    /// OwnTracks' user (`X-Limit-U`): the Recorder files the device under it. The default is
    /// `keeptrack` (`--user`).
    public var user = "keeptrack"
    /// Whether region transitions are sent to peers without a batch (OsmAnd: as event attributes
    /// on the deciding position; OwnTracks: as transitions). The default is `true`.
    public var regionEvents = true
    /// When the regions were defined (OwnTracks' `wtst`, the waypoint's creation time); `nil` (the
    /// default) sends ``OwnTracks/stableWaypointTime(_:)``, one stable time per region.
    public var regionsDefinedAt: Double?
    public init() {}
}

/// A request's body and the headers that describe it.
public struct UploadRequest: Sendable {
    public var body: [UInt8]
    /// `Content-Type` and format headers (`X-Limit-U`); a `--header` of the same name replaces one.
    public var headers: [(String, String)]
    /// Whether the body may be gzip-compressed (when the endpoint says it accepts gzip).
    public var compressible: Bool

    public init(body: [UInt8], headers: [(String, String)], compressible: Bool = false) {
        self.body = body
        self.headers = headers
        self.compressible = compressible
    }
}

/// Every format the uploader speaks.
public enum UploadFormats {
    public static let all: [any UploadFormat] = [
        JSONBatchFormat(), OsmAndFormat(), OwnTracksFormat(), OverlandFormat(), HomeAssistantFormat(),
    ]

    /// The format named `name`, or `nil`.
    public static func named(_ name: String) -> (any UploadFormat)? { all.first { $0.name == name } }

    /// The names, for help texts: `json, osmand, owntracks`.
    public static var names: String { all.map(\.name).joined(separator: ", ") }
}

/// Our batch (``JSONBatch``) at `POST /v1/locations`, acknowledged by `{"accepted":N,"duplicates":M}`.
public struct JSONBatchFormat: UploadFormat {
    public init() {}
    public var name: String { "json" }
    public var serverPath: String { "/v1/locations" }
    public var recordsPerRequest: Int? { nil }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        // The target's device, whose ids the records take (`device:seq`): a target with a device id
        // of its own gets records of the outbox's.
        UploadRequest(
            body: JSONBatch.encode(device: device, records: records.map { $0.filed(under: device) }),
            headers: [("Content-Type", "application/json")], compressible: true)
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? {
        JSONBatch.Reply.decode(body) == nil ? "an answer without an acknowledgement" : nil
    }

    /// An answer that counts fewer records stored or known (`accepted` + `duplicates`) than were
    /// sent acknowledges none: the batch goes again (its records are stored once however often).
    public func problemWithAcknowledgement(_ body: [UInt8], of count: Int) -> String? {
        guard let reply = JSONBatch.Reply.decode(body) else { return "an answer without an acknowledgement" }
        let counted = reply.accepted + reply.duplicates
        guard counted < count else { return nil }
        return "an acknowledgement of \(counted) of the \(count) records sent"
    }
}

/// Traccar's OsmAnd: one form POST per position at `/`; any 2xx acknowledges it. Visits and trips
/// have no OsmAnd form (Traccar computes its own trips and stops): they are skipped. A region
/// transition goes as event attributes on the position that decided it (one request for the
/// location and its transitions), never as a position of its own; records are read in sequence
/// order for that. Traccar orders positions by their time, so several requests go at once.
public struct OsmAndFormat: UploadFormat {
    public init() {}
    public var name: String { "osmand" }
    public var serverPath: String { "/" }
    public var recordsPerRequest: Int? { 1 }
    public var transitionsFirst: Bool { false }
    public var maxInFlight: Int { 8 }

    /// A location with the transitions it decided (same position, decided at its time), or a
    /// transition whose location is not in the outbox (a distance filter held it back).
    public func requests(_ batch: [TrailRecord], settings: UploadFormatSettings, more: Bool) -> [[TrailRecord]] {
        var out: [[TrailRecord]] = []
        for r in batch {
            if r.kind.isRegionEvent, settings.regionEvents, let last = out.last?.first, last.kind == .location,
                (r.decidedAt ?? r.time) == last.time, r.latitude == last.latitude, r.longitude == last.longitude
            {
                out[out.count - 1].append(r)
            } else {
                out.append([r])
            }
        }
        // A full batch's last location may have transitions right after it: it goes with them next time.
        if more, out.count > 1, out.last?.first?.kind == .location { out.removeLast() }
        return out
    }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        let position = records[0].filed(under: device)
        // Positions only: visits and trips are Traccar's own to compute.
        if position.kind.isVisitOrTrip || (!position.kind.isPosition && !settings.regionEvents) { return nil }
        let events = settings.regionEvents ? records.filter { $0.kind.isRegionEvent } : []
        return UploadRequest(
            body: Array(OsmAnd.parameters(position, events: events).utf8),
            headers: [("Content-Type", "application/x-www-form-urlencoded")])
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? { nil }
}

/// OwnTracks' HTTP JSON: one POST per record at `/owntracks` (a Recorder's `/pub`), the user and
/// device in `X-Limit-U` and `X-Limit-D`; any 2xx acknowledges it. Visits go as the app's own
/// location with trigger `v`; dwells and trips have no OwnTracks form.
/// One request at a time: the Recorder files records in the order they arrive.
public struct OwnTracksFormat: UploadFormat {
    public init() {}
    public var name: String { "owntracks" }
    public var serverPath: String { "/owntracks" }
    public var recordsPerRequest: Int? { 1 }

    public func deviceOnServer(_ device: String, settings: UploadFormatSettings) -> String {
        OwnTracks.deviceID(user: settings.user, device: device)
    }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        if records[0].kind.isRegionEvent && !settings.regionEvents { return nil }
        guard let body = OwnTracks.encode(records[0], waypointCreated: settings.regionsDefinedAt) else { return nil }
        return UploadRequest(
            body: body,
            headers: [
                ("Content-Type", "application/json"), ("X-Limit-U", settings.user),
                ("X-Limit-D", device),
            ])
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? { nil }
}

extension TrailRecord {
    /// The record as the target of `device` files it (a target's own device id).
    func filed(under device: String) -> TrailRecord {
        guard self.device != device else { return self }
        var r = self
        r.device = device
        return r
    }
}
