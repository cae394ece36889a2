import Formats
import MQTT
import Upload

/// The upload settings as `keeptrack track|replay` options (and config keys) give them: checked
/// together (``problem``) and turned into the tracker's ``Tracker/UploadSettings``.
public struct UploadOptionValues: Sendable {
    /// `http(s)://...`, or `embedded` (an endpoint the caller starts and names through
    /// ``Tracker/UploadSettings/endpoint``).
    public var url: String?
    public var format = "json"
    public var deviceID: String?
    public var token: String?
    public var user: String?
    public var regionEvents = true
    public var caFile: String?
    /// `Name: value` each.
    public var headers: [String] = []
    public var batchSize = 500
    public var batchWait = 30.0
    public var maxBackoff = 300.0
    public var outboxMaxRecords = 1_000_000
    /// Seconds.
    public var outboxMaxAge = 30.0 * 86_400
    public var shutdownTimeout = 10.0
    /// Seconds a decided record may wait for its group commit (0, the default: each fix's records
    /// committed before they are delivered).
    public var commitWithin = 0.0

    public init() {}

    /// What is wrong, in a sentence naming the option, or nil.
    public var problem: String? {
        if UploadFormats.named(format) == nil { return "--format takes \(UploadFormats.names), got '\(format)'." }
        if let url, url != "embedded", !(url.hasPrefix("http://") || url.hasPrefix("https://")), !MQTTEndpoint.isMQTT(url) {
            return "--upload takes an http(s):// or mqtt(s):// URL, or 'embedded', got '\(url)'."
        }
        if let url, MQTTEndpoint.isMQTT(url), !["json", "owntracks"].contains(format) {
            return "--upload mqtt(s):// publishes OwnTracks JSON: --format \(format) does not apply."
        }
        for h in headers where Uploader.Configuration.header(parsing: h) == nil {
            return "--header takes 'Name: value', got '\(h)'."
        }
        if batchSize < 1 { return "--batch-size must be 1 or more." }
        if outboxMaxRecords < 1 || !(outboxMaxAge > 0) { return "--outbox-max-records and --outbox-max-age must be positive." }
        if !(batchWait >= 0) || !(maxBackoff > 0) { return "--max-backoff must be more than 0s." }
        if url == nil && (deviceID != nil || token != nil || caFile != nil || !headers.isEmpty || user != nil) {
            return "--device-id, --token, --ca-file, --header and --user go with --upload URL."
        }
        if let deviceID, let problem = TrailRecord.identifierProblem(deviceID) { return "--device-id \(problem)." }
        return nil
    }

    /// The tracker's upload settings, the outbox in `dataDirectory` (call only when ``problem`` is nil).
    public func settings(dataDirectory: String) -> Tracker.UploadSettings {
        var c = Uploader.Configuration(url: url ?? "")
        c.format = UploadFormats.named(format)!
        c.token = token
        c.caFile = caFile
        c.headers = headers.compactMap(Uploader.Configuration.header(parsing:))
        if let user { c.formatSettings.user = user }
        c.formatSettings.regionEvents = regionEvents
        (c.maxBatchCount, c.maxWait, c.maxBackoff) = (batchSize, batchWait, maxBackoff)
        var settings = Tracker.UploadSettings(outboxPath: dataDirectory + "/outbox.sqlite", uploader: c)
        (settings.outbox.device, settings.outbox.maxCount, settings.outbox.maxAge) = (deviceID, outboxMaxRecords, outboxMaxAge)
        (settings.shutdownTimeout, settings.commitWithin) = (shutdownTimeout, commitWithin)
        return settings
    }
}
