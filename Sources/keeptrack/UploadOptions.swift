import ArgumentParser
import Formats
import Lifecycle
import Logging
import MQTT
import ServiceLifecycle
import SystemIO
import TrackServer
import Tracking
import Upload

#if canImport(Glibc)
import Glibc
#endif

/// The upload options of `replay` and `track`.
struct UploadOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Upload every location and region transition to this endpoint (http(s)://...), to an MQTT broker as "
            + "OwnTracks JSON at QoS 1 (mqtt(s)://[user[:password]@]host[:port][/topic], the topic by default "
            + "owntracks/USER/DEVICE), or 'embedded' for a test endpoint started in-process on a free loopback port.",
        valueName: "url|embedded"))
    var upload: String?

    @Option(help: ArgumentHelp("json (our batch), osmand (Traccar) or owntracks. The default is json.",
                               valueName: "format"))
    var format: String = "json"

    @Option(help: ArgumentHelp("This device's id. The default is the one the outbox was created with "
                               + "(keeptrack- and 8 hex digits).", valueName: "id"))
    var deviceID: String?

    @Option(help: ArgumentHelp("Sent as Authorization: Bearer TOKEN.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Trust the CA certificates in this PEM file (a self-signed endpoint).", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value' (repeatable).",
                                                            valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("Records per request with --format json. The default is 500.", valueName: "n"))
    var batchSize = 500

    @Option(help: ArgumentHelp("Seconds a batch that is not full waits for more (fewer, larger requests cost less "
                               + "CPU and radio). The default is 30.", valueName: "seconds"))
    var batchWait = 30.0

    @Option(help: ArgumentHelp("Longest wait between retries. The default is 300.", valueName: "seconds"))
    var maxBackoff = 300.0

    @Option(help: ArgumentHelp("Most records the outbox keeps (the oldest go first, counted). The default is 1000000.",
                               valueName: "n"))
    var outboxMaxRecords = 1_000_000

    @Option(help: ArgumentHelp("Oldest record the outbox keeps, in days. The default is 30.", valueName: "days"))
    var outboxMaxAge = 30.0

    @Option(help: ArgumentHelp("On SIGTERM or SIGINT, keep uploading this long before exiting (what is left stays "
                               + "in the outbox). The default is 10.", valueName: "seconds"))
    var shutdownTimeout = 10.0

    var enabled: Bool { upload != nil }

    func validate() throws {
        if UploadFormats.named(format) == nil {
            throw ValidationError("--format takes \(UploadFormats.names), got '\(format)'.")
        }
        if let upload, upload != "embedded", !(upload.hasPrefix("http://") || upload.hasPrefix("https://")),
           !MQTTEndpoint.isMQTT(upload) {
            throw ValidationError("--upload takes an http(s):// or mqtt(s):// URL, or 'embedded', got '\(upload)'.")
        }
        if let upload, MQTTEndpoint.isMQTT(upload), !["json", "owntracks"].contains(format) {
            throw ValidationError("--upload mqtt(s):// publishes OwnTracks JSON: --format \(format) does not apply.")
        }
        for h in headers where !h.contains(":") {
            throw ValidationError("--header takes 'Name: value', got '\(h)'.")
        }
        if batchSize < 1 { throw ValidationError("--batch-size must be 1 or more.") }
        if outboxMaxRecords < 1 || !(outboxMaxAge > 0) {
            throw ValidationError("--outbox-max-records and --outbox-max-age must be positive.")
        }
        if !(batchWait >= 0) || !(maxBackoff > 0) { throw ValidationError("--batch-wait and --max-backoff take seconds.") }
        if upload == nil && (deviceID != nil || token != nil || caFile != nil || !headers.isEmpty) {
            throw ValidationError("--device-id, --token, --ca-file and --header go with --upload URL.")
        }
        if let deviceID, let problem = TrailRecord.identifierProblem(deviceID) {
            throw ValidationError("--device-id \(problem).")
        }
    }
}

extension UploadOptions {
    /// The tracker's upload settings: the outbox in `dataDirectory`, the endpoint (`embedded`'s address
    /// and token once it listens).
    func settings(dataDirectory: String, embedded: EmbeddedEndpoint?) -> Tracker.UploadSettings {
        var c = Uploader.Configuration(url: upload ?? "")
        c.format = UploadFormats.named(format)!
        c.token = embedded?.token ?? token
        c.caFile = caFile
        c.headers = headers.map { h in
            let i = h.firstIndex(of: ":")!
            return (String(h[..<i]).trimmingCharacters(in: [" "]), String(h[h.index(after: i)...]).trimmingCharacters(in: [" "]))
        }
        c.maxBatchCount = batchSize
        c.maxWait = batchWait
        c.maxBackoff = maxBackoff
        var settings = Tracker.UploadSettings(outboxPath: dataDirectory + "/outbox.sqlite", uploader: c)
        settings.outbox.device = deviceID
        settings.outbox.maxCount = outboxMaxRecords
        settings.outbox.maxAge = outboxMaxAge * 86_400
        settings.shutdownTimeout = shutdownTimeout
        if let embedded { settings.endpoint = { await embedded.url() } }
        return settings
    }

    /// Says what the upload did (standard error): acknowledged, retried, left; for an embedded
    /// endpoint, what it stored and where the trail is.
    func report(_ tracker: Tracker, embedded: EmbeddedEndpoint?, dataDirectory: String, quiet: Bool) throws {
        guard let service = tracker.uploadService else { return }
        let outbox = service.outbox
        if !quiet { printError(service.summary) }
        guard let server = embedded?.server else { return }
        let device = outbox.device
        let records = try server.store.trail(device: device)
        let points = records.filter { $0.kind == .location }.count
        let dir = dataDirectory + "/trails"
        makeDirectories(dir)
        let path = dir + "/\(device).geojson"
        try writeFile(path, TrailExport.geoJSON(device: device, records: records))
        if !quiet {
            printError("embedded endpoint: \(grouped(points)) points and \(grouped(records.count - points)) region "
                + "events stored for device \(device) in \(server.store.path)")
            printError("the trail: \(path)  (see it served: keeptrack serve --db \(server.store.path), then "
                + "GET /v1/devices/\(device)/trail?format=geojson)")
        }
    }
}

/// `--upload embedded`: a test endpoint in the same service group, on a free loopback port, with a
/// random token, started before the uploader needs it and stopped after the last upload.
struct EmbeddedEndpoint {
    let server: TrackServer
    let token: String
    let path: String

    init(dataDirectory: String, format: String) throws {
        makeDirectories(dataDirectory)
        var c = TrackServer.Configuration(database: dataDirectory + "/endpoint.sqlite")
        token = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined()
        c.token = token
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = .warning
        server = try TrackServer(configuration: c, logger: logger)
        path = UploadFormats.named(format)!.serverPath
    }

    /// The endpoint's URL, once it listens.
    func url() async -> String { "http://127.0.0.1:\(await server.listeningPort())\(path)" }
}
