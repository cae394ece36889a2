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
    @Option(
        help: ArgumentHelp(
            "Upload every location and region transition to this endpoint: http(s)://[user:password@]... (HTTP Basic), "
                + "mqtt(s)://[user@]host[/topic] "
                + "(OwnTracks at QoS 1, or Home Assistant's discovery with --format homeassistant), or 'embedded' (a test "
                + "endpoint in-process). Repeatable: each target is a lane "
                + "of its own over one outbox; the i-th --format, --token, --user, --secret-file, --device-id, --ca-file "
                + "and --target-name go with the i-th --upload, a single one with all (docs/upload-targets.md).",
            valueName: "url|embedded"))
    var upload: [String] = []

    @Option(
        name: .customLong("format"),
        help: ArgumentHelp(
            "json (our batch), osmand (Traccar), owntracks, overland (Overland, Dawarich) or homeassistant "
                + "(MQTT discovery, with an mqtt:// --upload: docs/home-assistant.md). The default is json.",
            valueName: "format"))
    var formats: [String] = []

    /// The first target's format (the only one's).
    var format: String { Self.value(formats, 0) ?? "json" }

    @Option(
        help: ArgumentHelp(
            "This device's id, kept by the outbox for the runs after. The default is the outbox's "
                + "(the last given, else keeptrack- and 8 hex digits).", valueName: "id"))
    var deviceID: [String] = []

    // Unconditional: a token beginning with `-` (1 in 64 made before this did) is its value.
    @Option(
        parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Sent as Authorization: Bearer TOKEN ('' for none, with several targets).",
            valueName: "token"))
    var token: [String] = []

    @Option(
        help: ArgumentHelp(
            "With --format owntracks: the user the Recorder files the device under (X-Limit-U). "
                + "The default is keeptrack.", valueName: "user"))
    var user: [String] = []

    @Option(
        help: ArgumentHelp(
            "With --format owntracks: encrypt each payload as the OwnTracks apps do, with the "
                + "passphrase in this file (docs/owntracks-encryption.md).", valueName: "file"))
    var secretFile: [String] = []

    @Option(
        help: ArgumentHelp(
            "The name the outbox files a target's progress under (outbox status, metrics' target "
                + "label). The default comes from its URL: host:port/path.", valueName: "name"))
    var targetName: [String] = []

    @Option(
        name: .customLong("target-header"),
        help: ArgumentHelp(
            "An extra request header for the N-th --upload only, 'N:Name: value' (repeatable).",
            valueName: "n:header"))
    var targetHeaders: [String] = []

    @Flag(help: "With --format osmand or owntracks: don't send region transitions.")
    var noRegionEvents = false

    @Option(
        help: ArgumentHelp("Trust the CA certificates in this PEM file (a self-signed endpoint).", valueName: "file"))
    var caFile: [String] = []

    @Option(
        name: .customLong("header"),
        help: ArgumentHelp(
            "An extra request header, 'Name: value' (repeatable; with several targets, for each).",
            valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("Records per request with --format json.", valueName: "n"))
    var batchSize = 500

    @Option(
        help: ArgumentHelp(
            "How long a batch that is not full waits for more (fewer, larger requests cost less "
                + "CPU and radio). The default is 30s.", valueName: "duration"), transform: DurationText.parse)
    var batchWait = 30.0

    @Option(
        help: ArgumentHelp("Longest wait between retries. The default is 5m.", valueName: "duration"),
        transform: DurationText.parse)
    var maxBackoff = 300.0

    @Option(
        help: ArgumentHelp(
            "Most records the outbox keeps (the oldest go first, counted).",
            valueName: "n"))
    var outboxMaxRecords = 1_000_000

    @Option(
        help: ArgumentHelp(
            "Oldest record the outbox keeps (a bare number counts days: 30, 12h). The default is 30d.",
            valueName: "duration"), transform: DurationText.parseDays)
    var outboxMaxAge = 30.0 * 86_400

    @Option(
        help: ArgumentHelp(
            "On SIGTERM or SIGINT, keep uploading this long before exiting (what is left stays "
                + "in the outbox). The default is 10s.", valueName: "duration"), transform: DurationText.parse)
    var shutdownTimeout = 10.0

    @Option(
        help: ArgumentHelp(
            "Group commits, for flash-wear-sensitive devices: print each location at once and "
                + "commit to the outbox together within this long (0: commit each fix before it is "
                + "printed); a kill -9 or a power loss loses up to this long of printed locations. "
                + "The default is 0.",
            valueName: "duration"),
        transform: DurationText.parse)
    var commitWithin = 0.0

    var enabled: Bool { !upload.isEmpty }

    /// Whether a target is the embedded endpoint.
    var embedded: Bool { upload.contains("embedded") }

    /// The options that pair by order with `--upload`, and their values.
    var paired: [(option: String, values: [String])] {
        [
            ("--format", formats), ("--device-id", deviceID), ("--token", token), ("--user", user),
            ("--secret-file", secretFile), ("--ca-file", caFile), ("--target-name", targetName),
        ]
    }

    /// The `index`-th target's value of a paired option: the only one, or its own; `''` is none.
    static func value(_ values: [String], _ index: Int) -> String? {
        let v = values.count == 1 ? values[0] : index < values.count ? values[index] : nil
        return v?.isEmpty == true ? nil : v
    }

    /// The values of the `index`-th target (or, without --upload, the options as given).
    func values(target index: Int) -> UploadOptionValues {
        var v = UploadOptionValues()
        v.url = index < upload.count ? upload[index] : nil
        v.format = Self.value(formats, index) ?? "json"
        (v.deviceID, v.token, v.user) = (Self.value(deviceID, index), Self.value(token, index), Self.value(user, index))
        v.regionEvents = !noRegionEvents
        v.caFile = Self.value(caFile, index)
        v.headers =
            headers + targetHeaders.compactMap { Self.targetHeader($0).flatMap { $0.0 == index + 1 ? $0.1 : nil } }
        (v.batchSize, v.batchWait, v.maxBackoff) = (batchSize, batchWait, maxBackoff)
        (v.outboxMaxRecords, v.outboxMaxAge, v.shutdownTimeout) = (outboxMaxRecords, outboxMaxAge, shutdownTimeout)
        v.commitWithin = commitWithin
        return v
    }

    /// The first target's values (the only one's).
    var values: UploadOptionValues { values(target: 0) }

    /// `N:Name: value` as the target's number and its header, or nil.
    static func targetHeader(_ text: String) -> (Int, String)? {
        guard let colon = text.firstIndex(of: ":"), let n = Int(text[..<colon]), n >= 1 else { return nil }
        return (n, String(text[text.index(after: colon)...]))
    }

    func validate() throws {
        let count = max(1, upload.count)
        for (option, values) in paired where values.count > 1 && values.count != count {
            throw ValidationError(
                "\(option) is given \(values.count) times for \(upload.count) --upload target"
                    + (upload.count == 1 ? "" : "s")
                    + ": give it once (for every target) or once per --upload, in the same "
                    + "order.")
        }
        if upload.filter({ $0 == "embedded" }).count > 1 {
            throw ValidationError("--upload embedded is given twice: one embedded endpoint per run.")
        }
        for h in targetHeaders {
            guard let (n, header) = Self.targetHeader(h), n <= upload.count else {
                throw ValidationError(
                    "--target-header takes 'N:Name: value', N the --upload it goes with (1 to "
                        + "\(upload.count)), got '\(h)'.")
            }
            if Uploader.Configuration.header(parsing: header) == nil {
                throw ValidationError("--target-header takes 'N:Name: value', got '\(h)'.")
            }
        }
        var names: Set<String> = []
        for i in 0..<count {
            let v = values(target: i)
            let prefix = upload.count > 1 ? "--upload \(Uploader.redacted(upload[i])): " : ""
            if let problem = v.problem {
                // A URL's own problem names the URL already.
                switch problem {
                case .invalidHTTPURL, .passwordAndToken: throw ValidationError(problem.sentence)
                default: break
                }
                throw ValidationError(prefix + problem.sentence)
            }
            let secretFile = Self.value(self.secretFile, i)
            do {
                try SecretFile.validate(secretFile, upload: v.url, format: v.format)
            } catch {
                throw ValidationError(prefix + error.message)
            }
            // An HTTPS endpoint's CA file is read now: a file that is no PEM is a setting to fix.
            if let caFile = v.caFile, let url = v.url, url.hasPrefix("http"),
                !Uploader.Configuration.holdsPEMCertificates(caFile)
            {
                throw ValidationError("--ca-file \(caFile): no PEM certificate could be read")
            }
            if let url = v.url {
                let name = Self.value(targetName, i) ?? Uploader.targetName(url)
                guard names.insert(name).inserted else {
                    throw ValidationError("two --upload targets are named '\(name)': give each a --target-name.")
                }
            }
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
            "--upload mqtt(s):// publishes OwnTracks JSON or Home Assistant's discovery: --format \(format) does not "
                + "apply."
        case .formatPublishedOverMQTTOnly(let format):
            "--format \(format) publishes to the MQTT broker Home Assistant uses: give --upload "
                + "mqtt(s)://[user[:password]@]broker[:port]."
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
        case .invalidHTTPURL(let url, let why): "--upload \(Uploader.redacted(url)): \(why)."
        case .passwordAndToken(let url):
            "--upload \(Uploader.redacted(url)): a password in the URL and --token both authenticate: give one."
        }
    }
}

extension UploadOptions {
    /// The tracker's upload settings: the outbox in `dataDirectory`, the endpoint (`embedded`'s address
    /// and token once it listens).
    func settings(dataDirectory: DataDirectory, embedded: TrackServer?) -> Tracker.UploadSettings {
        var targets: [Uploader.Configuration] = []
        var first: Tracker.UploadSettings?
        for i in upload.indices {
            let values = values(target: i)
            var settings = values.settings(dataDirectory: dataDirectory)
            if let secretFile = Self.value(secretFile, i), let secret = try? SecretFile.read(secretFile) {
                settings.uploader.format = EncryptedOwnTracksFormat(secret: secret)
            }
            settings.uploader.target = Self.value(targetName, i)
            if let embedded, upload[i] == "embedded" {
                settings.uploader.token = embedded.configuration.token
                let path = settings.uploader.format.serverPath
                settings.endpoint = { "http://127.0.0.1:\(await embedded.listeningPort())\(path)" }
            }
            if first == nil {
                first = settings
            } else if values.deviceID != first?.outbox.device {
                // The outbox's device is the first target's; another target may file under its own.
                settings.uploader.deviceID = values.deviceID
            }
            if first?.endpoint == nil, let endpoint = settings.endpoint { first?.endpoint = endpoint }
            targets.append(settings.uploader)
        }
        var settings = first!
        settings.uploader = targets[0]
        settings.otherTargets = Array(targets.dropFirst())
        return settings
    }

    /// The index of the embedded endpoint's target, if any.
    var embeddedIndex: Int? { upload.firstIndex(of: "embedded") }

    /// Says what the upload did (standard error): acknowledged, retried, left; for an embedded
    /// endpoint, what it stored and where the trail is.
    func report(_ tracker: Tracker, embedded: TrackServer?, dataDirectory: DataDirectory, quiet: Bool) async throws {
        guard let service = tracker.uploadService else { return }
        if !quiet {
            let reports = service.targetReports
            for r in reports { printError(r.line(reports.count < 2 ? .onlyTarget : .oneOfSeveral)) }
        }
        guard let embedded else { return }
        let device = service.deviceOnServer(target: embeddedIndex ?? 0)
        let trail = try await embedded.exportTrail(device: device, directory: dataDirectory.trails)
        if !quiet {
            let database = embedded.store.location
            var visits = trail.visitsAndTrips > 0 ? ", \(grouped(trail.visitsAndTrips)) visit and trip records" : ""
            if trail.heartbeats > 0 { visits += ", \(grouped(trail.heartbeats)) heartbeats" }
            printError(
                "embedded endpoint: \(grouped(trail.points)) points and \(grouped(trail.regionEvents)) region "
                    + "events\(visits) stored for device \(device) in \(database)")
            printError(
                "the trail: \(trail.path)  (see it served: keeptrack serve --db \(database), then "
                    + "GET /v1/devices/\(device.replacing("/", with: "%2F"))/trail?format=geojson)")
        }
    }
}

extension UploadService.TargetReport {
    /// How a lane's line reads: the end of a run with one target, or with several, or `outbox send`.
    enum Style {
        /// `upload: ... 0 left in the outbox`, and why records are left: they go with the next run.
        case onlyTarget
        /// `upload to NAME: ... 0 left for it in the outbox`, and why records are left for it.
        case oneOfSeveral
        /// `upload to NAME: ..., 0 dead letters; 0 left for it in the outbox`, and why records are left.
        case sent
    }

    /// What the lane did, one line without coordinates: `upload: 900 records acknowledged by
    /// HOST:PORT in 2 requests, 0 failed; 0 left in the outbox`, and why records are left, with
    /// the options to check when the settings are wrong. The requests are every one made, those
    /// that failed with them (a run that gave up after 5 failures made 5, not "0 requests, 5
    /// retries").
    func line(_ style: Style) -> String {
        let s = stats
        let start = style == .onlyTarget ? "upload: " : "upload to \(name): "
        var line =
            start + "\(counted(s.uploaded, "record")) acknowledged by \(host) in "
            + "\(counted(s.requests + s.retries, "request")), \(grouped(s.retries)) failed"
        if style == .sent {
            line += ", \(counted(s.deadLettered, "dead letter"))"
        } else if s.deadLettered > 0 {
            line += ", \(grouped(s.deadLettered)) rejected (dead letters)"
        }
        line += "; \(grouped(pending)) " + (style == .onlyTarget ? "left in the outbox" : "left for it in the outbox")
        if pending > 0 {
            line += " (\(s.lastError ?? "not sent"))" + (style == .sent ? "" : "; they go with the next run")
        }
        return line + UploadOptions.settingsHint(s.settingsToCheck)
    }
}

extension UploadOptions {
    /// Says which registered targets this run does not upload to still lack records (standard error).
    func warnAboutOrphans(_ service: UploadService?) {
        for orphan in service?.orphans ?? [] {
            printError(
                "keeptrack: \(grouped(orphan.pending)) records in the outbox were not delivered to "
                    + "\(orphan.target.name), which this run does not upload to: they leave the outbox once this run's "
                    + "targets have them (give --upload \(orphan.target.url) again to deliver them; "
                    + "keeptrack outbox forget-target \(orphan.target.name) to stop tracking it)", level: .warning)
        }
    }
}
