import ArgumentParser
import SystemIO
import Formats
import Logging
import TrackServer
import Tracking

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the test endpoint: a real HTTP server that stores the trails trackers upload.",
        discussion: """
            Ingests our JSON batch (POST /v1/locations), Traccar's OsmAnd (GET or POST /) and OwnTracks \
            (POST /owntracks, device in X-Limit-D), stores every record once in SQLite (sent twice, \
            stored once), and serves GET /v1/devices, GET /v1/devices/ID/trail?from=&to=&format=geojson|gpx|json, \
            GET /healthz and GET /metrics (Prometheus). With --token, devices must send \
            Authorization: Bearer TOKEN (or ?token=). Prints {"event":"listening","url":...} once it \
            listens; stops on Ctrl-C or SIGTERM.

            Fault injection (also at run time: PUT /v1/faults with {"failRate":0.3,"failStatus":503,...}):
            --refuse closes every connection unanswered; --fail-rate answers a share of requests with \
            --fail-status (and --retry-after); --delay waits before answering; --drop-rate stores a \
            request and then drops the connection halfway through the answer.

            Examples:
              keeptrack serve                                # 127.0.0.1:5055, database in the data directory
              keeptrack serve --port 0 --token s3cret        # a free port
              keeptrack serve --fail-rate 0.3 --fail-status 503 --retry-after 2
              keeptrack replay --upload http://127.0.0.1:5055/v1/locations --token s3cret fixtures/walk-15min.nmea
            """
    )

    @Option(help: "Address to listen on. The default is 127.0.0.1 (this machine only).")
    var host = "127.0.0.1"

    @Option(help: "Port (0 picks a free one). The default is 5055, Traccar's OsmAnd port.")
    var port = 5055

    @Option(help: ArgumentHelp("The SQLite database. Default: endpoint.sqlite in the data directory.", valueName: "file"))
    var db: String?

    @Option(help: ArgumentHelp("Devices must present this token.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Largest request body in bytes (after gzip). The default is 8 MiB.", valueName: "bytes"))
    var maxBody = 8 << 20

    @Flag(help: "Fault: close every connection without an answer.")
    var refuse = false

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) that fail with --fail-status.", valueName: "share"))
    var failRate = 0.0

    @Option(help: ArgumentHelp("Fault: the status of failed requests. The default is 500.", valueName: "status"))
    var failStatus = 500

    @Option(help: ArgumentHelp("Fault: send Retry-After with failures.", valueName: "seconds"))
    var retryAfter: Int?

    @Option(help: ArgumentHelp("Fault: wait before answering.", valueName: "seconds"))
    var delay = 0.0

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) stored and then dropped mid-answer.", valueName: "share"))
    var dropRate = 0.0

    @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @OptionGroup(title: "Logs") var logging: LoggingOptions

    @OptionGroup var data: DataDirectoryOption

    var faults: Faults {
        var f = Faults()
        f.refuse = refuse
        f.failRate = failRate
        f.failStatus = failStatus
        f.retryAfter = retryAfter
        f.delay = delay
        f.dropRate = dropRate
        return f
    }

    func validate() throws {
        if !(0...65535).contains(port) { throw ValidationError("--port must be between 0 and 65535.") }
        if let problem = faults.problem { throw ValidationError("Faults: \(problem).") }
        if maxBody < 1024 { throw ValidationError("--max-body must be at least 1024 bytes.") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together.") }
    }

    func run() async throws {
        let database = db ?? {
            makeDirectories(data.directory)
            return data.directory + "/endpoint.sqlite"
        }()
        var c = TrackServer.Configuration(database: database)
        c.host = host
        c.port = port
        c.token = token
        c.maxBodyBytes = maxBody
        c.faults = faults
        c.tlsCertificate = tlsCert
        c.tlsKey = tlsKey
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = logging.logLevel
        let server: TrackServer
        do {
            server = try TrackServer(configuration: c, logger: logger)
        } catch {
            throw ValidationError("cannot open the database \(database): \(error)")
        }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        try await server.run(signals: true) { port in
            var out = OutputBuffer()
            let scheme = tlsCert == nil ? "http" : "https"
            out.append("{\"event\":\"listening\",\"url\":\"\(scheme)://\(shownHost):\(port)\",\"database\":")
            out.appendJSONString(database)
            out.append("}\n")
            try? out.flush()
        }
    }
}
