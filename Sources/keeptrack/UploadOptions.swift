import ArgumentParser
import Formats
import Lifecycle
import Logging
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
        "Upload every location and region transition to this endpoint (http(s)://...), or 'embedded' for a "
            + "test endpoint started in-process on a free loopback port.", valueName: "url|embedded"))
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

    @Option(help: ArgumentHelp("How long a batch that is not full waits for more (fewer, larger requests cost less "
                               + "CPU and radio). The default is 30s.", valueName: "duration"), transform: DurationText.parse)
    var batchWait = 30.0

    @Option(help: ArgumentHelp("Longest wait between retries. The default is 5m.", valueName: "duration"),
            transform: DurationText.parse)
    var maxBackoff = 300.0

    @Option(help: ArgumentHelp("Most records the outbox keeps (the oldest go first, counted). The default is 1000000.",
                               valueName: "n"))
    var outboxMaxRecords = 1_000_000

    @Option(help: ArgumentHelp("Oldest record the outbox keeps (a bare number counts days: 30, 12h). The default is 30d.",
                               valueName: "duration"), transform: DurationText.parseDays)
    var outboxMaxAge = 30.0 * 86_400

    @Option(help: ArgumentHelp("On SIGTERM or SIGINT, keep uploading this long before exiting (what is left stays "
                               + "in the outbox). The default is 10s.", valueName: "duration"), transform: DurationText.parse)
    var shutdownTimeout = 10.0

    var enabled: Bool { upload != nil }

    func validate() throws {
        if UploadFormats.named(format) == nil {
            throw ValidationError("--format takes \(UploadFormats.names), got '\(format)'.")
        }
        if let upload, upload != "embedded", !(upload.hasPrefix("http://") || upload.hasPrefix("https://")) {
            throw ValidationError("--upload takes an http:// or https:// URL, or 'embedded', got '\(upload)'.")
        }
        for h in headers where Uploader.Configuration.header(parsing: h) == nil {
            throw ValidationError("--header takes 'Name: value', got '\(h)'.")
        }
        if batchSize < 1 { throw ValidationError("--batch-size must be 1 or more.") }
        if outboxMaxRecords < 1 || !(outboxMaxAge > 0) {
            throw ValidationError("--outbox-max-records and --outbox-max-age must be positive.")
        }
        if !(batchWait >= 0) || !(maxBackoff > 0) { throw ValidationError("--max-backoff must be more than 0s.") }
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
    func settings(dataDirectory: String, embedded: TrackServer?) -> Tracker.UploadSettings {
        var c = Uploader.Configuration(url: upload ?? "")
        c.format = UploadFormats.named(format)!
        c.token = embedded?.configuration.token ?? token
        c.caFile = caFile
        c.headers = headers.compactMap(Uploader.Configuration.header(parsing:))
        (c.maxBatchCount, c.maxWait, c.maxBackoff) = (batchSize, batchWait, maxBackoff)
        var settings = Tracker.UploadSettings(outboxPath: dataDirectory + "/outbox.sqlite", uploader: c)
        (settings.outbox.device, settings.outbox.maxCount) = (deviceID, outboxMaxRecords)
        settings.outbox.maxAge = outboxMaxAge
        settings.shutdownTimeout = shutdownTimeout
        if let embedded {
            let path = c.format.serverPath
            settings.endpoint = { "http://127.0.0.1:\(await embedded.listeningPort())\(path)" }
        }
        return settings
    }

    /// Says what the upload did (standard error): acknowledged, retried, left; for an embedded
    /// endpoint, what it stored and where the trail is.
    func report(_ tracker: Tracker, embedded: TrackServer?, dataDirectory: String, quiet: Bool) throws {
        guard let service = tracker.uploadService else { return }
        if !quiet { printError(service.summary) }
        guard let embedded else { return }
        let device = service.outbox.device
        let trail = try embedded.exportTrail(device: device, directory: dataDirectory + "/trails")
        if !quiet {
            let database = embedded.store.path
            printError("embedded endpoint: \(grouped(trail.points)) points and \(grouped(trail.regionEvents)) region "
                + "events stored for device \(device) in \(database)")
            printError("the trail: \(trail.path)  (see it served: keeptrack serve --db \(database), then "
                + "GET /v1/devices/\(device)/trail?format=geojson)")
        }
    }
}
