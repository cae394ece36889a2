import ArgumentParser
import SystemIO
import Formats
import Logging
import TrackServer
import TrackStore
import TrackStorePostgres
import FoundationEssentials
import Geo
import Tracking

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the test endpoint: a real HTTP server that stores the trails trackers upload.",
        discussion: """
            Ingests our JSON batch (POST /v1/locations), Traccar's OsmAnd (GET or POST /), OwnTracks \
            (POST /owntracks, device USER/DEVICE from X-Limit-U/X-Limit-D; encrypted payloads with a device \
            secret) and Overland (POST /api/v1/overland/batches, Dawarich's path), stores every record once (sent twice, \
            stored once), and serves GET /v1/devices, GET /v1/devices/ID/trail?from=&to=&format=geojson|gpx|json, \
            GET /healthz and GET /metrics (Prometheus), and the OwnTracks Recorder's read API for its \
            Frontend (GET /api/0/list, /api/0/last, /api/0/locations, /api/0/version; --cors-origin lets a page \
            from another origin call the API). With --token, devices must send \
            Authorization: Bearer TOKEN (or Basic with it as password, or ?token=). Prints {"event":"listening","url":...} once it \
            listens; stops on Ctrl-C or SIGTERM.

            Limits under load: --max-connections (at the cap, connections idle or without a complete \
            request head are closed to make room, oldest first; a 503 when all are busy), \
            --first-request-timeout (a new connection without a complete request head that long is \
            closed), --idle-timeout (a keep-alive connection idle that long is closed), --body-timeout (a \
            body slower than that is answered 408), --max-body (413, at once when Content-Length says so), \
            --max-bodies-in-flight \
            (request bodies held in memory at once; 503 past it). Trails and /map are paginated (limit, \
            cursor). Without --token on an address other than loopback, a warning goes to standard error.

            Fault injection, only with --faults (also at run time: PUT /v1/faults with \
            {"failRate":0.3,"failStatus":503,...}): --refuse closes every connection unanswered; \
            --fail-rate answers a share of requests with --fail-status (400-599, and --retry-after); \
            --delay waits before answering; --drop-rate stores a request and then drops the connection \
            halfway through the answer.

            Examples:
              # 127.0.0.1:5055, the database in the data directory
              keeptrack serve
              keeptrack serve --port 0 --token s3cret        # a free port
              keeptrack serve --faults --fail-rate 0.3 --fail-status 503 \\
                --retry-after 2
              keeptrack replay --upload http://127.0.0.1:5055/v1/locations \\
                --token s3cret fixtures/walk-15min.nmea
              # van1's own token, printed once (stored hashed)
              keeptrack serve devices add van1
            """,
        subcommands: [Devices.self, Geofences.self, Hooks.self, Shares.self]
    )

    /// `keeptrack serve devices add ID | list | revoke ID`, on serve's `--db` (or the data directory's).
    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Device tokens in serve's --db: a device token writes and reads its own device.",
            discussion: """
                Examples:
                  keeptrack serve devices add van1     # prints van1's new token
                  keeptrack serve devices list         # ID<TAB>created, one a line
                  keeptrack serve devices revoke van1
                  keeptrack serve devices secret anna/phone < secret.txt  # OwnTracks encryption
                  keeptrack serve devices overspeed van1 90  # van1's own limit, km/h
                  keeptrack serve devices list --db postgres://kt@db/keeptrack  # serve's store
                """,
            subcommands: [Add.self, List.self, Revoke.self, Secret.self, Overspeed.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Give a device a token and print it: the only time it is shown (it is stored hashed).")
            @Argument(help: "The device id.") var id: String
            @ParentCommand var serve: Serve  // its --db and --data-dir

            func run() async throws {
                let token = try await serve.withDeviceTokens(creating: true) { store in
                    try await store.addCredential(device: id, clock: WallClock())
                }
                print(token)
                // OwnTracks' USER/DEVICE arrive lowercased (as the Recorder files them): this token
                // could not post them.
                if id.contains("/"), id != id.lowercased() {
                    printError(
                        "warning: OwnTracks posts arrive as \(id.lowercased()) (the endpoint lowercases USER/DEVICE, "
                            + "as the Recorder does): this token is refused for them; for OwnTracks, add "
                            + "\(id.lowercased()) instead (keeptrack serve devices revoke \(id))",
                        level: .warning)
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The devices with a token, one a line: ID<TAB>created (ISO 8601).")
            @ParentCommand var serve: Serve

            func run() async throws {
                let credentials = try await serve.withDeviceTokens(creating: false) { try await $0.credentials() }
                for c in credentials { print("\(c.device)\t\(ISOTime.string(c.created))") }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Remove a device's token and revoke its share links (its stored points stay).")
            @Argument(help: "The device id.") var id: String
            @ParentCommand var serve: Serve

            func run() async throws {
                let now = WallClock().now.secondsSince1970
                let (shares, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.revokeCredential(device: id, at: now), store.location)
                }
                guard let shares else { throw CommandFailure("device '\(id)' has no token in \(location)") }
                print("revoked \(id)" + (shares == 0 ? "" : " and \(counted(shares, "share link")) of it"))
            }
        }
    }

    @Option(help: "Address to listen on (127.0.0.1: this machine only).")
    var host = "127.0.0.1"

    @Option(help: "Port (0 picks a free one; 5055 is Traccar's OsmAnd port).")
    var port = 5055

    @Option(
        help: ArgumentHelp(
            "The SQLite file, or PostgreSQL: postgres://USER@HOST:PORT/DB[?sslmode=...] "
                + "(docs/endpoint.md). Default: endpoint.sqlite in the data directory.",
            valueName: "file|url"))
    var db: String?

    // Unconditional: a token beginning with `-` is its value, not a missing one.
    @Option(parsing: .unconditional, help: ArgumentHelp("Devices must present this token.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Largest request body in bytes (after gzip). The default is 8 MiB.", valueName: "bytes"))
    var maxBody: Int?

    @Option(
        help: ArgumentHelp(
            "Connections served at once. At the cap, the oldest connection without a complete "
                + "request head, else the one idle the longest, is closed to make room; when all are "
                + "busy, a new one gets 503. The default is sized from the descriptor limit, which "
                + "serve raises to its hard limit (716 for 1,024 descriptors, at most 16,384).",
            valueName: "n"))
    var maxConnections: Int?

    @Option(
        help: ArgumentHelp(
            "Close a new connection that has not sent a complete request head within this. "
                + "The default is 10s.", valueName: "duration"), transform: DurationText.parse)
    var firstRequestTimeout = 10.0

    @Option(
        help: ArgumentHelp(
            "Close a connection idle between requests (keep-alive) for this long. "
                + "The default is 30s.", valueName: "duration"), transform: DurationText.parse)
    var idleTimeout = 30.0

    @Option(
        help: ArgumentHelp(
            "Answer 408 when a request body takes longer than this. The default is 1m.",
            valueName: "duration"), transform: DurationText.parse)
    var bodyTimeout = 60.0

    @Option(
        help: ArgumentHelp(
            "Request body bytes held in memory at once; more get 503. The default is 32 MiB.",
            valueName: "bytes"))
    var maxBodiesInFlight: Int?

    @Flag(help: "Turn fault injection on: the fault options below and PUT /v1/faults (for tests and demos).")
    var faults = false

    @Flag(help: "Fault: close every connection without an answer.")
    var refuse = false

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) that fail with --fail-status.", valueName: "share"))
    var failRate = 0.0

    @Option(help: ArgumentHelp("Fault: the status of failed requests.", valueName: "status"))
    var failStatus = 500

    @Option(help: ArgumentHelp("Fault: send Retry-After with failures.", valueName: "seconds"))
    var retryAfter: Int?

    @Option(help: ArgumentHelp("Fault: wait before answering.", valueName: "duration"), transform: DurationText.parse)
    var delay = 0.0

    @Option(
        help: ArgumentHelp("Fault: the share of requests (0-1) stored and then dropped mid-answer.", valueName: "share")
    )
    var dropRate = 0.0

    @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Flag(help: "With a token or device tokens: store OsmAnd from unknown device ids (otherwise 400, as Traccar).")
    var openRegistration = false
    @Option(
        help: ArgumentHelp("Delete points older than this (e.g. 90d), in the background.", valueName: "duration"),
        transform: DurationText.parse) var retention: Double?
    @Option(
        help: ArgumentHelp(
            "Also store OwnTracks from this broker: mqtt(s)://[USER[:PASS]@]HOST[:PORT], then "
                + "/FILTER (owntracks/+/+ when none).", valueName: "url"))
    var mqtt: String?
    @Option(
        help: ArgumentHelp(
            "Let web pages from this origin call the API (CORS), e.g. the OwnTracks Frontend's "
                + "https://owntracks.example.org, or *. Repeatable.", valueName: "origin"))
    var corsOrigin: [String] = []
    @Option(
        help: ArgumentHelp(
            "Read settings from this YAML file, one key per option (default: serve.yaml beside "
                + "track's config.yaml, when it exists); the command line wins.", valueName: "file"))
    var config: String?
    @Option(
        help: ArgumentHelp(
            "The map page's base map: a tile URL template ({z}/{x}/{y}), or none for a plain "
                + "background. The default is OpenStreetMap's standard tiles.", valueName: "url"))
    var tiles: String?
    @Option(
        help: ArgumentHelp(
            "Live stream clients (GET /v1/stream) at once, apart from --max-connections. "
                + "The default is 4096.", valueName: "n"))
    var maxStreams: Int?
    @Option(
        help: ArgumentHelp(
            "Declare a device offline after this long without a record (e.g. 5m), on the live "
                + "stream and as a stored event; online when it sends again. The default is 10m.",
            valueName: "duration"),
        transform: DurationText.parse)
    var offlineAfter: Double?
    @Option(
        name: .customLong("homeassistant"),
        help: ArgumentHelp(
            "Make every device a Home Assistant device tracker by MQTT discovery on this broker (Home "
                + "Assistant's): mqtt(s)://[USER[:PASS]@]HOST[:PORT], then /PREFIX when its discovery prefix is "
                + "not homeassistant. A device silent past --offline-after is unavailable there.",
            valueName: "url"))
    var homeAssistant: String?
    @Option(
        name: .customLong("homeassistant-ca-file"),
        help: ArgumentHelp(
            "With --homeassistant mqtts://: trust the broker's certificate from this PEM file (default: the "
                + "system's).", valueName: "file"))
    var homeAssistantCAFile: String?
    @Option(
        help: ArgumentHelp(
            "Name visits by this reverse geocoder speaking Nominatim's /reverse?format=jsonv2 (a self-hosted "
                + "Nominatim or Photon), at most one request a second, in the background. The default is "
                + "none: no names but the user's own areas, no requests.", valueName: "url"))
    var geocoder: String?
    @Flag(
        help: ArgumentHelp(
            "Let hooks reach loopback, private and link-local addresses (refused by default: a server "
                + "that posts where it is told is a tool against its own network)."))
    var allowPrivateHooks = false
    @Option(
        help: ArgumentHelp(
            "Speed above which a location is an overspeed event, in km/h (one event per episode), "
                + "for the devices without their own limit (serve devices overspeed). The default is none.",
            valueName: "km/h"))
    var overspeed: Double?
    @Option(
        help: ArgumentHelp(
            "Locations with an accuracy worse than this are outliers: stored, marked, left out of stops, "
                + "trips and the map's line (as are locations at 0,0 and single fixes that jump away and "
                + "back). Holds from the next point stored. The default is 200.", valueName: "metres"))
    var maxAccuracy: Double?
    @OptionGroup(title: "Logs") var logging: LoggingOptions

    @OptionGroup var data: DataDirectoryOption

    /// The store of `--db`, or the data directory's endpoint database.
    var database: TrackDatabase { db.map(TrackDatabase.init) ?? TrackDatabase(dataDirectory: data.layout) }

    /// The server's settings from the options (the database is opened apart: ``database``).
    func serverConfiguration() -> TrackServer.Configuration {
        var c = TrackServer.Configuration()
        (c.host, c.port, c.token, c.maxConnections) = (host, port, token, maxConnections)
        c.maxBodyBytes = maxBody ?? 8 << 20
        c.idleTimeout = TrackServer.Configuration.duration(seconds: idleTimeout)
        c.firstRequestTimeout = TrackServer.Configuration.duration(seconds: firstRequestTimeout)
        c.bodyTimeout = TrackServer.Configuration.duration(seconds: bodyTimeout)
        c.maxBodyBytesInFlight = maxBodiesInFlight ?? 32 << 20
        c.faultInjection = faults
        c.faults = Faults(
            refuse: refuse, failRate: failRate, failStatus: failStatus, retryAfter: retryAfter,
            delay: delay, dropRate: dropRate)
        (c.tlsCertificate, c.tlsKey, c.mqtt) = (tlsCert, tlsKey, mqtt.map { .init(url: $0) })
        (c.openRegistration, c.retention) = (openRegistration, retention)
        c.corsOrigins = corsOrigin
        if let tiles { c.map.tiles = tiles == "none" ? nil : tiles }
        if let maxStreams { c.stream.maxClients = maxStreams }
        if let offlineAfter { c.stream.offlineAfter = TrackServer.Configuration.duration(seconds: offlineAfter) }
        c.homeAssistant = homeAssistant.map { url in
            var h = HomeAssistantRelay.Configuration(url: url)
            h.caFile = homeAssistantCAFile
            return h
        }
        c.geocoder = geocoder
        c.events.allowPrivateHooks = allowPrivateHooks
        c.events.overspeedLimit = overspeed.map { $0 / 3.6 }
        if let maxAccuracy { c.maxAccuracy = maxAccuracy }
        return c
    }

    func validate() throws {
        if homeAssistantCAFile != nil && homeAssistant == nil {
            throw ValidationError("--homeassistant-ca-file goes with --homeassistant.")
        }
        if let overspeed, !(overspeed > 0 && overspeed.isFinite) {
            throw ValidationError("--overspeed is a speed in km/h above 0, got \(overspeed).")
        }
        if let problem = serverConfiguration().problem { throw ValidationError(problem.sentence) }
        if let geocoder, !(geocoder.hasPrefix("http://") || geocoder.hasPrefix("https://")) || geocoder.contains("?") {
            throw ValidationError("--geocoder: '\(geocoder)' is not an http:// or https:// base URL (without a query).")
        }
    }

    /// Runs `body` on the store of `serve devices` (which must exist, unless `creating`), and closes it.
    func withDeviceTokens<T: Sendable>(creating: Bool, _ body: (any TrackStore) async throws -> T) async throws -> T {
        if db == nil { makeDirectories(data.directory) }
        let database = self.database
        guard creating || database.exists else {
            throw CommandFailure("no endpoint database at \(database)" + (db == nil ? ": name one with --db" : ""))
        }
        var logger = Logger(label: "keeptrack.store")
        logger.logLevel = .warning
        return try await database.withStore(environment: ProcessInfo.processInfo.environment, logger: logger, body)
    }

    func run() async throws {
        if TrackServer.isExposed(host: host, token: token) {
            printError(
                "warning: serving on \(host) without --token: anyone who can reach it can read every stored "
                    + "trail and store records; pass --token or --host 127.0.0.1", level: .warning)
        }
        if db == nil { makeDirectories(data.directory) }
        let database = self.database
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = logging.logLevel
        let server: TrackServer
        let drawUpgrade: @Sendable (SQLiteTrackStore.Upgrade?) -> Void = { upgrade in
            printErrorInline(upgrade?.line ?? "")
        }
        do {
            let store = try await database.open(
                environment: ProcessInfo.processInfo.environment,
                progress: progressWanted(stdoutUsed: false) ? drawUpgrade : nil)
            server = try TrackServer(configuration: serverConfiguration(), store: store, logger: logger)
        } catch {
            // A database that can't be opened is a failure at run time, not a usage error: no usage text.
            throw CommandFailure("\(error)")  // names the database (a URL without its password)
        }
        try await server.run(signals: true) { line in
            var out = OutputBuffer()
            out.bytes = line
            try? out.flush()
        }
    }
}

extension TrackServer.Configuration.Problem {
    /// The sentence `keeptrack serve` says, naming the option.
    var sentence: String {
        switch self {
        case .portOutOfRange: "--port must be between 0 and 65535."
        case .faults(let why): "Faults: \(why)."
        case .faultsWithoutFaultInjection: "The fault options need --faults (fault injection is off without it)."
        case .maxConnectionsBelowOne: "--max-connections must be at least 1."
        case .timeoutOutOfRange: "--idle-timeout and --body-timeout must be between 0 and 86400 seconds (not 0)."
        case .firstRequestTimeoutOutOfRange: "--first-request-timeout must be between 0 and 86400 seconds (not 0)."
        case .maxBodyBytesBelow1024: "--max-body must be at least 1024 bytes."
        case .tlsCertificateAndKeyApart: "--tls-cert and --tls-key go together."
        case .retentionBelowAnHour: "--retention must be at least 1h (a bare number is seconds: write 90d for 90 days)."
        case .maxStreamsBelowOne: "--max-streams must be at least 1."
        case .offlineAfterBelowASecond: "--offline-after must be at least 1s."
        case .maxAccuracyNotPositive: "--max-accuracy must be a number of metres above 0."
        case .mqtt(let why): "--mqtt: \(why)."
        case .homeAssistant(let why): "--homeassistant: \(why)."
        case .corsOrigin(let why): "--cors-origin: \(why.corsOriginSentence)."
        }
    }
}

extension SQLiteTrackStore.Upgrade {
    /// The line serve draws while a store's schema is upgraded.
    var line: String {
        let names = migrations.joined(separator: ", ")
        return "\(path): upgrading the schema (\(names)) for \(grouped(points)) points, \(seconds) s"
    }
}
