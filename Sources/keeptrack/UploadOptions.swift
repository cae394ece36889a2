import ArgumentParser
import Formats
import Geo
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
        "Upload every location and region transition to this endpoint: http(s)://..., mqtt(s)://[user@]host[/topic] "
            + "(OwnTracks at QoS 1), or 'embedded' (a test endpoint in-process).", valueName: "url|embedded"))
    var upload: String?

    @Option(help: ArgumentHelp("json (our batch), osmand (Traccar), owntracks or overland (Overland, Dawarich).",
                               valueName: "format"))
    var format: String = "json"

    @Option(help: ArgumentHelp("This device's id. The default is the one the outbox was created with "
                               + "(keeptrack- and 8 hex digits).", valueName: "id"))
    var deviceID: String?

    @Option(help: ArgumentHelp("Sent as Authorization: Bearer TOKEN.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("With --format owntracks: the user the Recorder files the device under (X-Limit-U). "
                               + "The default is keeptrack.", valueName: "user"))
    var user: String?

    @Option(help: ArgumentHelp("With --format owntracks: encrypt each payload as the OwnTracks apps do, with the "
                               + "passphrase in this file (docs/owntracks-encryption.md).", valueName: "file"))
    var secretFile: String?

    @Flag(help: "With --format osmand or owntracks: don't send region transitions.")
    var noRegionEvents = false

    @Option(help: ArgumentHelp("Trust the CA certificates in this PEM file (a self-signed endpoint).", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value' (repeatable).",
                                                            valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("Records per request with --format json.", valueName: "n"))
    var batchSize = 500

    @Option(help: ArgumentHelp("How long a batch that is not full waits for more (fewer, larger requests cost less "
                               + "CPU and radio). The default is 30s.", valueName: "duration"), transform: DurationText.parse)
    var batchWait = 30.0

    @Option(help: ArgumentHelp("Longest wait between retries. The default is 5m.", valueName: "duration"),
            transform: DurationText.parse)
    var maxBackoff = 300.0

    @Option(help: ArgumentHelp("Most records the outbox keeps (the oldest go first, counted).",
                               valueName: "n"))
    var outboxMaxRecords = 1_000_000

    @Option(help: ArgumentHelp("Oldest record the outbox keeps (a bare number counts days: 30, 12h). The default is 30d.",
                               valueName: "duration"), transform: DurationText.parseDays)
    var outboxMaxAge = 30.0 * 86_400

    @Option(help: ArgumentHelp("On SIGTERM or SIGINT, keep uploading this long before exiting (what is left stays "
                               + "in the outbox). The default is 10s.", valueName: "duration"), transform: DurationText.parse)
    var shutdownTimeout = 10.0

    @Option(help: ArgumentHelp("Group commits, for flash-wear-sensitive devices: print each location at once and "
                               + "commit to the outbox together within this long (0: commit each fix before it is "
                               + "printed); a kill -9 or a power loss loses up to this long of printed locations. "
                               + "The default is 0.",
                               valueName: "duration"),
            transform: DurationText.parse)
    var commitWithin = 0.0

    var enabled: Bool { upload != nil }

    var values: UploadOptionValues {
        var v = UploadOptionValues()
        (v.url, v.format, v.deviceID, v.token, v.user, v.regionEvents) = (upload, format, deviceID, token, user, !noRegionEvents)
        (v.caFile, v.headers, v.batchSize, v.batchWait, v.maxBackoff) = (caFile, headers, batchSize, batchWait, maxBackoff)
        (v.outboxMaxRecords, v.outboxMaxAge, v.shutdownTimeout) = (outboxMaxRecords, outboxMaxAge, shutdownTimeout)
        v.commitWithin = commitWithin
        return v
    }

    func validate() throws {
        if let problem = values.problem { throw ValidationError(problem.sentence) }
        try SecretFile.validate(secretFile, upload: upload, format: format)
        // An HTTPS endpoint's CA file is read now: a file that is no PEM is a setting to fix.
        if let caFile, let upload, upload.hasPrefix("http"), !Uploader.Configuration.holdsPEMCertificates(caFile) {
            throw ValidationError("--ca-file \(caFile): no PEM certificate could be read")
        }
    }
}

extension UploadOptionValues.Field {
    /// The option that sets the field.
    var option: String {
        switch self {
        case .url: "--upload"
        case .format: "--format"
        case .deviceID: "--device-id"
        case .token: "--token"
        case .user: "--user"
        case .regionEvents: "--no-region-events"
        case .caFile: "--ca-file"
        case .headers: "--header"
        case .batchSize: "--batch-size"
        case .batchWait: "--batch-wait"
        case .maxBackoff: "--max-backoff"
        case .outboxMaxRecords: "--outbox-max-records"
        case .outboxMaxAge: "--outbox-max-age"
        case .shutdownTimeout: "--shutdown-timeout"
        case .commitWithin: "--commit-within"
        }
    }
}

extension UploadOptions {
    /// What the user checks when the upload stopped on a settings problem: `; check --upload,
    /// --format and --device-id`, or nothing.
    static func settingsHint(_ settings: [UploadError.Setting]) -> String {
        let options = settings.map { setting in
            switch setting {
            case .url: "--upload"
            case .format: "--format"
            case .deviceID: "--device-id"
            case .token: "--token"
            case .caFile: "--ca-file"
            case .secret: "--secret-file"
            }
        }
        guard let last = options.last else { return "" }
        return "; check " + (options.count > 1 ? options.dropLast().joined(separator: ", ") + " and " : "") + last
    }
}

extension UploadOptionValues.Problem {
    /// The sentence `replay` and `track` say, naming the options.
    var sentence: String {
        switch self {
        case .unknownFormat(let format): "--format takes \(UploadFormats.names), got '\(format)'."
        case .unsupportedURL(let url): "--upload takes an http(s):// or mqtt(s):// URL, or 'embedded', got '\(url)'."
        case .formatNotPublishedOverMQTT(let format):
            "--upload mqtt(s):// publishes OwnTracks JSON: --format \(format) does not apply."
        case .invalidMQTTURL(let why): "--upload: \(why)"
        case .caFileWithoutTLS: "--ca-file goes with mqtts:// (TLS), not mqtt://"
        case .malformedHeader(let header): "--header takes 'Name: value', got '\(header)'."
        case .notPositive(.batchSize): "--batch-size must be 1 or more."
        case .notPositive(.outboxMaxRecords), .notPositive(.outboxMaxAge):
            "--outbox-max-records and --outbox-max-age must be positive."
        case .notPositive(let field): "\(field.option) must be more than 0s."
        case .negative(let field): "\(field.option) must be 0s or more."
        case .requiresURL: "--device-id, --token, --ca-file, --header and --user go with --upload URL."
        case .invalidDeviceID(let why): "--device-id \(why)."
        }
    }
}

extension UploadOptions {
    /// The tracker's upload settings: the outbox in `dataDirectory`, the endpoint (`embedded`'s address
    /// and token once it listens).
    func settings(dataDirectory: DataDirectory, embedded: TrackServer?) -> Tracker.UploadSettings {
        var settings = values.settings(dataDirectory: dataDirectory)
        if let secretFile, let secret = try? SecretFile.read(secretFile) {
            settings.uploader.format = EncryptedOwnTracksFormat(secret: secret)
        }
        if let embedded {
            settings.uploader.token = embedded.configuration.token
            let path = settings.uploader.format.serverPath
            settings.endpoint = { "http://127.0.0.1:\(await embedded.listeningPort())\(path)" }
        }
        return settings
    }

    /// Says what the upload did (standard error): acknowledged, retried, left; for an embedded
    /// endpoint, what it stored and where the trail is.
    func report(_ tracker: Tracker, embedded: TrackServer?, dataDirectory: DataDirectory, quiet: Bool) async throws {
        guard let service = tracker.uploadService else { return }
        if !quiet { printError(service.summary + Self.settingsHint(service.stats?.settingsToCheck ?? [])) }
        guard let embedded else { return }
        let device = service.deviceOnServer
        let trail = try await embedded.exportTrail(device: device, directory: dataDirectory.trails)
        if !quiet {
            let database = embedded.store.location
            var visits = trail.visitsAndTrips > 0 ? ", \(grouped(trail.visitsAndTrips)) visit and trip records" : ""
            if trail.heartbeats > 0 { visits += ", \(grouped(trail.heartbeats)) heartbeats" }
            printError("embedded endpoint: \(grouped(trail.points)) points and \(grouped(trail.regionEvents)) region "
                + "events\(visits) stored for device \(device) in \(database)")
            printError("the trail: \(trail.path)  (see it served: keeptrack serve --db \(database), then "
                + "GET /v1/devices/\(device.replacing("/", with: "%2F"))/trail?format=geojson)")
        }
    }
}
