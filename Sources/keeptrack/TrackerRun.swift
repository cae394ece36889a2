import ArgumentParser
import Formats
import Geo
import Lifecycle
import LocationService
import Logging
import ServiceLifecycle
import TrackServer
import Tracking

#if canImport(Glibc)
import Glibc
#endif

/// What `track` and `replay` share when they print location events: the options turned into one
/// `Tracker.Configuration`, one service group (embedded endpoint, uploader, tracker, control
/// socket), and what is said at the end.
struct TrackerRun {
    var location: LocationOptions
    var lifecycle: LifecycleOptions
    var upload: UploadOptions
    var dataDirectory: String
    /// Live tracking keeps regions and their states here (unless --regions names a file).
    var store: RegionStore?
    /// The control socket (live tracking).
    var control: String?
    /// Where `GET /metrics` is served (`--metrics-listen`).
    var metrics: MetricsEndpoint.Address?
    /// A replay: the app launches at the log's first fix and deadlines pass with the log's time.
    var onLogTime = false
    var lineBuffered = true
    var quiet = false

    func configuration(embedded: EmbeddedEndpoint?) throws -> Tracker.Configuration {
        var c = Tracker.Configuration()
        let l = location.configuration
        c.standardUpdates = l.standardUpdates
        c.significantChanges = l.significantChanges
        try location.addRegions(to: &c)
        if location.regions == nil { c.regionStore = store }
        c.policy = try lifecycle.policyOptions.resolved()
        c.modes = lifecycle.modes
        c.startInBackground = lifecycle.background
        c.sampleInterval = lifecycle.sampleInterval
        c.launchAtFirstFix = onLogTime
        c.deadlineTimer = !onLogTime
        if upload.enabled { c.upload = upload.settings(dataDirectory: dataDirectory, embedded: embedded) }
        return c
    }

    func run<S: FixSource>(_ source: S, releaser: (any WatchReleasing)? = nil,
                           now: @escaping @Sendable () -> Double) async throws {
        let embedded = upload.upload == "embedded"
            ? try EmbeddedEndpoint(dataDirectory: dataDirectory, format: upload.format) : nil
        var environment: [String: String] = [:]
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC"] {
            if let v = getenv(key) { environment[key] = String(cString: v) }
        }
        let tracker: Tracker
        do {
            tracker = try Tracker(source: source, configuration: configuration(embedded: embedded),
                                  sink: JSONLinesSink(lineBuffered: lineBuffered), releaser: releaser,
                                  notifier: SystemdNotifier(environment: environment),
                                  logger: Logger(label: "keeptrack.track"), now: now)
        } catch let error as TrackerError {
            throw ValidationError(error.message)
        }
        // Started in this order, stopped in reverse: the control socket and the input first, then
        // the upload of what is left, then the endpoint that takes it.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let embedded { services.append(.init(service: embedded.server)) }
        if let metrics {
            services.append(.init(service: MetricsEndpoint(address: metrics, logger: Logger(label: "keeptrack.metrics"),
                                                           render: Telemetry.prometheusText)))
        }
        services += tracker.services
        if let control {
            do {
                services.append(.init(service: try ControlSocket(path: control, tracker: tracker)))
            } catch {
                throw ValidationError("\(error)")
            }
        }
        var logger = Logger(label: "keeptrack.lifecycle")
        logger.logLevel = .error
        let group = ServiceGroup(configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint],
                                                      logger: logger))
        try await group.run()
        let interrupted = !tracker.inputFinished
        try upload.report(tracker, embedded: embedded, dataDirectory: dataDirectory, quiet: quiet && !interrupted)
        if tracker.application.state == .terminated {
            printError("keeptrack: the app was terminated (see the \"terminated\" event)")
            throw ExitCode(1)
        }
    }
}
