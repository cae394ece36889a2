import ArgumentParser
import SystemIO
import Formats
import Logging
import TrackServer
import TrackStorePostgres
import FoundationEssentials
import Tracking

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the test endpoint: a real HTTP server that stores the trails trackers upload.",
        discussion: """
            Ingests our JSON batch (POST /v1/locations), Traccar's OsmAnd (GET or POST /) and OwnTracks \
            (POST /owntracks, device USER/DEVICE from X-Limit-U/X-Limit-D), stores every record once (sent twice, \
            stored once), and serves GET /v1/devices, GET /v1/devices/ID/trail?from=&to=&format=geojson|gpx|json, \
            GET /healthz and GET /metrics (Prometheus). With --token, devices must send \
            Authorization: Bearer TOKEN (or Basic with it as password, or ?token=). Prints {"event":"listening","url":...} once it \
            listens; stops on Ctrl-C or SIGTERM.

            Limits under load: --max-connections (a 503 past it), --idle-timeout (a connection without \
            a complete request head that long is closed), --body-timeout (a body slower than that is \
            answered 408), --max-body (413, at once when Content-Length says so), --max-bodies-in-flight \
            (request bodies held in memory at once; 503 past it). Trails and /map are paginated (limit, \
            cursor). Without --token on an address other than loopback, a warning goes to standard error.

            Fault injection, only with --faults (also at run time: PUT /v1/faults with \
            {"failRate":0.3,"failStatus":503,...}): --refuse closes every connection unanswered; \
            --fail-rate answers a share of requests with --fail-status (400-599, and --retry-after); \
            --delay waits before answering; --drop-rate stores a request and then drops the connection \
            halfway through the answer.

            Examples:
              keeptrack serve                                # 127.0.0.1:5055, database in the data directory
              keeptrack serve --port 0 --token s3cret        # a free port
              keeptrack serve --faults --fail-rate 0.3 --fail-status 503 --retry-after 2
              keeptrack replay --upload http://127.0.0.1:5055/v1/locations --token s3cret fixtures/walk-15min.nmea
              keeptrack serve devices add van1               # prints van1's own token (stored hashed)
            """,
        subcommands: [Devices.self]
    )

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Device tokens in serve's --db: add ID (prints its new token), list, revoke ID. A device token writes and reads its own device.")
        @Argument(help: "add, list or revoke.") var action: String
        @Argument(help: "The device id (add, revoke).") var id: String?
        @ParentCommand var serve: Serve // its --db and --data-dir

        func run() async throws {
            do {
                let database = serve.db ?? serve.data.directory + "/endpoint.sqlite"
                if serve.db == nil { makeDirectories(serve.data.directory) }
                print(try await DeviceTokens.command(action, device: id, database: database, environment: ProcessInfo.processInfo.environment), terminator: "")
            } catch { throw ValidationError("\(error)") }
        }
    }

    @Option(help: "Address to listen on. The default is 127.0.0.1 (this machine only).")
    var host = "127.0.0.1"

    @Option(help: "Port (0 picks a free one). The default is 5055, Traccar's OsmAnd port.")
    var port = 5055

    @Option(help: ArgumentHelp("The SQLite file, or PostgreSQL: postgres://USER@HOST:PORT/DB[?sslmode=...] (README). "
                               + "Default: endpoint.sqlite in the data directory.", valueName: "file|url"))
    var db: String?

    @Option(help: ArgumentHelp("Devices must present this token.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Largest request body in bytes (after gzip). The default is 8 MiB.", valueName: "bytes"))
    var maxBody = 8 << 20

    @Option(help: ArgumentHelp("Connections served at once; more get 503. The default is 512.", valueName: "n"))
    var maxConnections = 512

    @Option(help: ArgumentHelp("Close a connection without a complete request head for this long. The default is 30s.",
                               valueName: "duration"), transform: DurationText.parse)
    var idleTimeout = 30.0

    @Option(help: ArgumentHelp("Answer 408 when a request body takes longer than this. The default is 1m.",
                               valueName: "duration"), transform: DurationText.parse)
    var bodyTimeout = 60.0

    @Option(help: ArgumentHelp("Request body bytes held in memory at once; more get 503. The default is 32 MiB.",
                               valueName: "bytes"))
    var maxBodiesInFlight = 32 << 20

    @Flag(help: "Turn fault injection on: the fault options below and PUT /v1/faults (for tests and demos).")
    var faults = false

    @Flag(help: "Fault: close every connection without an answer.")
    var refuse = false

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) that fail with --fail-status.", valueName: "share"))
    var failRate = 0.0

    @Option(help: ArgumentHelp("Fault: the status of failed requests. The default is 500.", valueName: "status"))
    var failStatus = 500

    @Option(help: ArgumentHelp("Fault: send Retry-After with failures.", valueName: "seconds"))
    var retryAfter: Int?

    @Option(help: ArgumentHelp("Fault: wait before answering.", valueName: "duration"), transform: DurationText.parse)
    var delay = 0.0

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) stored and then dropped mid-answer.", valueName: "share"))
    var dropRate = 0.0

    @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Flag(help: "With a token or device tokens: store OsmAnd from unknown device ids (otherwise 400, as Traccar).")
    var openRegistration = false
    @Option(help: ArgumentHelp("Delete points older than this (e.g. 90d), in the background.", valueName: "duration"),
            transform: DurationText.parse) var retention: Double?
    @Option(help: "Also store OwnTracks from mqtt(s)://[USER[:PASS]@]HOST[:PORT][/FILTER=owntracks/+/+].") var mqtt: String?
    @OptionGroup(title: "Logs") var logging: LoggingOptions

    @OptionGroup var data: DataDirectoryOption

    /// The server's settings from the options (the database's default path aside).
    func configuration(database: String) -> TrackServer.Configuration {
        var c = TrackServer.Configuration(database: database)
        (c.host, c.port, c.token, c.maxBodyBytes, c.maxConnections) = (host, port, token, maxBody, maxConnections)
        c.idleTimeout = TrackServer.Configuration.duration(seconds: idleTimeout)
        c.bodyTimeout = TrackServer.Configuration.duration(seconds: bodyTimeout)
        c.maxBodyBytesInFlight = maxBodiesInFlight
        c.faultInjection = faults
        c.faults = Faults(refuse: refuse, failRate: failRate, failStatus: failStatus, retryAfter: retryAfter,
                          delay: delay, dropRate: dropRate)
        (c.tlsCertificate, c.tlsKey, c.mqtt) = (tlsCert, tlsKey, mqtt.map { .init(url: $0) })
        (c.openRegistration, c.retention) = (openRegistration, retention)
        return c
    }

    func validate() throws {
        if let problem = configuration(database: db ?? "").problem { throw ValidationError(problem) }
    }

    func run() async throws {
        let database = db ?? {
            makeDirectories(data.directory)
            return data.directory + "/endpoint.sqlite"
        }()
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = logging.logLevel
        let server: TrackServer
        do {
            let store = try await openTrackStore(database, environment: ProcessInfo.processInfo.environment,
                                                 progress: progressWanted(stdoutUsed: false) ? printErrorInline : nil)
            server = try TrackServer(configuration: configuration(database: database), store: store, logger: logger)
        } catch {
            throw ValidationError("\(error)") // names the database (a URL without its password)
        }
        if let warning = TrackServer.exposureWarning(host: host, token: token) { printError(warning) }
        try await server.run(signals: true) { line in
            var out = OutputBuffer()
            out.bytes = line
            try? out.flush()
        }
    }
}
