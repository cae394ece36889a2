import Formats
import Geo
import MQTT
import Upload

/// The upload settings as `keeptrack track|replay` options (and config keys) give them: checked
/// together (``problem``, by field) and turned into the tracker's ``Tracker/UploadSettings``.
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

    /// A field of the values, as a ``Problem`` names it.
    public enum Field: String, Sendable, Hashable, CaseIterable {
        case url, format, deviceID, token, user, regionEvents, caFile, headers, batchSize, batchWait, maxBackoff
        case outboxMaxRecords, outboxMaxAge, shutdownTimeout, commitWithin
    }

    /// What is wrong with the values, by field.
    public enum Problem: Error, Sendable, Hashable {
        /// ``UploadOptionValues/format`` names no `UploadFormats` format.
        case unknownFormat(String)
        /// ``UploadOptionValues/url`` is neither an http(s):// nor an mqtt(s):// URL nor `embedded`.
        case unsupportedURL(String)
        /// An mqtt(s):// ``UploadOptionValues/url`` publishes OwnTracks JSON: this format does not apply.
        case formatNotPublishedOverMQTT(String)
        /// This format (Home Assistant's discovery) goes to a broker only: the URL is not mqtt(s)://.
        case formatPublishedOverMQTTOnly(String)
        /// An mqtt(s):// ``UploadOptionValues/url`` can't be used: the parser's error, saying why.
        case invalidMQTTURL(MQTTError)
        /// A ``UploadOptionValues/caFile`` with an mqtt:// URL, which has no TLS.
        case caFileWithoutTLS
        /// A header is not `Name: value`.
        case malformedHeader(String)
        /// The field must be more than 0.
        case notPositive(Field)
        /// The field must be 0 or more.
        case negative(Field)
        /// The fields are set without a ``UploadOptionValues/url``.
        case requiresURL([Field])
        /// ``UploadOptionValues/deviceID`` is no usable device id: why (`TrailRecord.identifierProblem(_:)`).
        case invalidDeviceID(String)
        /// An http(s):// ``UploadOptionValues/url`` that can't be used: the URL and why (no host, a
        /// port out of range).
        case invalidHTTPURL(String, String)
        /// A password in the URL and a ``UploadOptionValues/token``: two credentials, one request.
        case passwordAndToken(String)
    }

    /// What is wrong with the values, or nil; the first problem found.
    public var problem: Problem? {
        if UploadFormats.named(format) == nil { return .unknownFormat(format) }
        if let url, url != "embedded", !(url.hasPrefix("http://") || url.hasPrefix("https://")),
            !MQTTEndpoint.isMQTT(url)
        {
            return .unsupportedURL(url)
        }
        if let url, url.hasPrefix("http://") || url.hasPrefix("https://") {
            if let why = Uploader.Configuration.problem(httpURL: url) { return .invalidHTTPURL(url, why) }
            if token != nil, Uploader.Configuration.basicAuthorization(url) != nil {
                return .passwordAndToken(url)
            }
        }
        if let url, MQTTEndpoint.isMQTT(url), !["json", "owntracks", "homeassistant"].contains(format) {
            return .formatNotPublishedOverMQTT(format)
        }
        if let url, !MQTTEndpoint.isMQTT(url), UploadFormats.named(format) is HomeAssistantFormat {
            return .formatPublishedOverMQTTOnly(format)
        }
        if let url, MQTTEndpoint.isMQTT(url) {
            do {
                let endpoint = try MQTTEndpoint(parsing: url)
                if caFile != nil && !endpoint.tls { return .caFileWithoutTLS }
            } catch {
                return .invalidMQTTURL(error)
            }
        }
        for h in headers where Uploader.Configuration.header(parsing: h) == nil { return .malformedHeader(h) }
        if batchSize < 1 { return .notPositive(.batchSize) }
        if outboxMaxRecords < 1 { return .notPositive(.outboxMaxRecords) }
        if !(outboxMaxAge > 0) { return .notPositive(.outboxMaxAge) }
        if !(batchWait >= 0) { return .negative(.batchWait) }
        if !(maxBackoff > 0) { return .notPositive(.maxBackoff) }
        if url == nil {
            let set: [(Field, Bool)] = [
                (.deviceID, deviceID != nil), (.token, token != nil), (.caFile, caFile != nil),
                (.headers, !headers.isEmpty), (.user, user != nil),
            ]
            let fields = set.filter(\.1).map(\.0)
            if !fields.isEmpty { return .requiresURL(fields) }
        }
        if let deviceID, let problem = TrailRecord.identifierProblem(deviceID) { return .invalidDeviceID(problem) }
        return nil
    }

    /// The tracker's upload settings, the outbox in `dataDirectory` (call only when ``problem`` is nil).
    public func settings(dataDirectory: DataDirectory) -> Tracker.UploadSettings {
        var c = Uploader.Configuration(url: url ?? "")
        c.format = UploadFormats.named(format)!
        c.token = token
        c.caFile = caFile
        c.headers = headers.compactMap(Uploader.Configuration.header(parsing:))
        if let user { c.formatSettings.user = user }
        c.formatSettings.regionEvents = regionEvents
        (c.maxBatchCount, c.maxWait, c.maxBackoff) = (batchSize, batchWait, maxBackoff)
        var settings = Tracker.UploadSettings(outboxPath: dataDirectory.outbox, uploader: c)
        (settings.outbox.device, settings.outbox.maxCount, settings.outbox.maxAge) = (
            deviceID, outboxMaxRecords, outboxMaxAge
        )
        (settings.shutdownTimeout, settings.commitWithin) = (shutdownTimeout, commitWithin)
        return settings
    }
}
