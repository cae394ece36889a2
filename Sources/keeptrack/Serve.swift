import ArgumentParser
import SystemIO
import Formats
import Logging
import MQTT
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
            listens; stops on Ctrl-C or SIGTERM. With --mqtt, also stores the OwnTracks messages a broker \
            has on owntracks/USER/DEVICE (QoS 1, persistent session), and prints {"event":"subscribed",...}.

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

    @Option(help: ArgumentHelp("Connections served at once; more get 503. The default is 512.", valueName: "n"))
    var maxConnections = 512

    @Option(help: ArgumentHelp("Close a connection without a complete request head for this long. The default is 30.",
                               valueName: "seconds"))
    var idleTimeout = 30.0

    @Option(help: ArgumentHelp("Answer 408 when a request body takes longer than this. The default is 60.",
                               valueName: "seconds"))
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

    @Option(help: ArgumentHelp("Fault: wait before answering.", valueName: "seconds"))
    var delay = 0.0

    @Option(help: ArgumentHelp("Fault: the share of requests (0-1) stored and then dropped mid-answer.", valueName: "share"))
    var dropRate = 0.0

    @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (with --tls-key).", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("Also store OwnTracks messages from this broker, mqtt(s)://[user[:password]@]host[:port] "
                               + "(QoS 1; user and device from the topic).", valueName: "url"))
    var mqtt: String?

    @Option(help: ArgumentHelp("With --mqtt: the topic filter. The default is owntracks/+/+.", valueName: "filter"))
    var mqttTopic = "owntracks/+/+"

    @OptionGroup(title: "Logs") var logging: LoggingOptions

    @OptionGroup var data: DataDirectoryOption

    var startFaults: Faults {
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
        if let problem = startFaults.problem { throw ValidationError("Faults: \(problem).") }
        if !faults && startFaults != Faults() {
            throw ValidationError("The fault options need --faults (fault injection is off without it).")
        }
        if maxConnections < 1 { throw ValidationError("--max-connections must be at least 1.") }
        if !(idleTimeout > 0 && idleTimeout <= 86_400) || !(bodyTimeout > 0 && bodyTimeout <= 86_400) {
            throw ValidationError("--idle-timeout and --body-timeout must be between 0 and 86400 seconds (not 0).")
        }
        if maxBody < 1024 { throw ValidationError("--max-body must be at least 1024 bytes.") }
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together.") }
        do { _ = try mqtt.map(MQTTEndpoint.init(parsing:)) } catch { throw ValidationError("--mqtt: \(error).") }
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
        c.maxConnections = maxConnections
        c.idleTimeout = .milliseconds(Int64((idleTimeout * 1000).rounded()))
        c.bodyTimeout = .milliseconds(Int64((bodyTimeout * 1000).rounded()))
        c.maxBodyBytesInFlight = maxBodiesInFlight
        c.faultInjection = faults
        c.faults = startFaults
        c.tlsCertificate = tlsCert
        c.tlsKey = tlsKey
        c.mqtt = mqtt.map(MQTTIngest.Configuration.init(url:))
        c.mqtt?.topicFilter = mqttTopic
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = logging.logLevel
        let server: TrackServer
        do {
            server = try TrackServer(configuration: c, logger: logger)
        } catch {
            throw ValidationError("cannot open the database \(database): \(error)")
        }
        if let warning = TrackServer.exposureWarning(host: host, token: token) { printError(warning) }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        try await server.run(signals: true) { port in
            var out = OutputBuffer()
            let scheme = tlsCert == nil ? "http" : "https"
            out.append("{\"event\":\"listening\",\"url\":\"\(scheme)://\(shownHost):\(port)\",\"database\":")
            out.appendJSONString(database)
            out.append("}\n")
            try? out.flush()
            guard let broker = try? mqtt.map(MQTTEndpoint.init(parsing:)) else { return }
            Task {
                await server.mqttSubscription()
                var out = OutputBuffer()
                out.append("{\"event\":\"subscribed\",\"broker\":\"\(broker)\",\"topic\":")
                out.appendJSONString(mqttTopic)
                out.append("}\n")
                try? out.flush()
            }
        }
    }
}
