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
}

/// What a format may need besides the records: the user the sender is filed under.
public struct UploadFormatSettings: Sendable {
    /// OwnTracks' user (`X-Limit-U`). The default is `keeptrack`.
    public var user = "keeptrack"
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
    public static let all: [any UploadFormat] = [JSONBatchFormat(), OsmAndFormat(), OwnTracksFormat()]

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
        UploadRequest(body: JSONBatch.encode(device: device, records: records),
                      headers: [("Content-Type", "application/json")], compressible: true)
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? {
        JSONBatch.Reply.decode(body) == nil ? "an answer without an acknowledgement" : nil
    }
}

/// Traccar's OsmAnd: one form POST per record at `/`; any 2xx acknowledges it.
public struct OsmAndFormat: UploadFormat {
    public init() {}
    public var name: String { "osmand" }
    public var serverPath: String { "/" }
    public var recordsPerRequest: Int? { 1 }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        UploadRequest(body: Array(OsmAnd.parameters(records[0]).utf8),
                      headers: [("Content-Type", "application/x-www-form-urlencoded")])
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? { nil }
}

/// OwnTracks' HTTP JSON: one POST per record at `/owntracks` (a Recorder's `/pub`), the user and
/// device in `X-Limit-U` and `X-Limit-D`; any 2xx acknowledges it. Dwells have no OwnTracks form.
public struct OwnTracksFormat: UploadFormat {
    public init() {}
    public var name: String { "owntracks" }
    public var serverPath: String { "/owntracks" }
    public var recordsPerRequest: Int? { 1 }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        guard let body = OwnTracks.encode(records[0]) else { return nil }
        return UploadRequest(body: body, headers: [("Content-Type", "application/json"), ("X-Limit-U", settings.user),
                                                   ("X-Limit-D", device)])
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? { nil }
}
