import ArgumentParser
import Formats
import Geo
import Lifecycle
import LocationService
import Logging
import ServiceLifecycle
import SystemIO
import TrackServer
import TrackStorePostgres
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
    var dataDirectory: DataDirectory
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
    /// A replay's progress line after `elapsed` seconds; with it, the run draws its progress (the
    /// input's, then the upload of what is left) when `progressWanted`.
    var inputProgress: (@Sendable (Double) -> String)?

    func configuration(embedded: TrackServer?) throws -> Tracker.Configuration {
        var c = Tracker.Configuration()
        c.locationManager = location.settings.configuration
        c.heartbeat = location.heartbeat
        if let regions = location.regions {
            do {
                try c.addRegions(file: regions, dwell: location.dwell)
            } catch {
                throw ValidationError("--regions: \(error)")
            }
        } else {
            c.regionStore = store
        }
        c.policy = try lifecycle.policyOptions.resolved()
        (c.modes, c.startInBackground, c.sampleInterval) = (
            lifecycle.modes, lifecycle.background, lifecycle.sampleInterval
        )
        (c.launchAtFirstFix, c.deadlineTimer) = (onLogTime, !onLogTime)
        if upload.enabled { c.upload = upload.settings(dataDirectory: dataDirectory, embedded: embedded) }
        return c
    }

    /// The embedded endpoint (`--upload embedded`) over the data directory's endpoint database.
    static func embeddedEndpoint(_ dataDirectory: DataDirectory) async throws -> TrackServer {
        makeDirectories(dataDirectory.path)
        return try TrackServer.embedded(store: try await TrackDatabase(dataDirectory: dataDirectory).open())
    }

    /// Runs the tracker over `source` until it ends or is stopped; returns, when the input ended,
    /// the source's last error event (``Tracker/sourceError``): what ends a replay, and a live
    /// source's problem it cannot wait out (it retries the others). A stop returns `nil`.
    @discardableResult
    func run<S: FixSource>(
        _ source: S, releaser: (any WatchReleasing)? = nil,
        clock: any EpochClock
    ) async throws -> SourceEvent? {
        let embedded = upload.embedded ? try await Self.embeddedEndpoint(dataDirectory) : nil
        let tracker: Tracker
        do {
            tracker = try Tracker(
                source: source, configuration: configuration(embedded: embedded),
                sink: CleanPagesSink(JSONLinesSink(lineBuffered: lineBuffered)), releaser: releaser,
                notifier: SystemdNotifier(environment: environment(["NOTIFY_SOCKET", "WATCHDOG_USEC"])),
                logger: Logger(label: "keeptrack.track"), clock: clock)
        } catch let error as TrackerError {
            throw error.commandError
        }
        try await upload.shareSecret(with: embedded, tracker: tracker)
        if !quiet { upload.warnAboutOrphans(tracker.uploadService) }
        // Started in this order, stopped in reverse: the control socket and the input first, then
        // the upload of what is left, then the endpoint that takes it.
        var logger = Logger(label: "keeptrack.lifecycle")
        logger.logLevel = .error
        do {
            var before: [any Service] = embedded.map { [$0] } ?? []
            if let metrics {
                before.append(
                    MetricsEndpoint(
                        address: metrics, logger: Logger(label: "keeptrack.metrics"),
                        render: Telemetry.prometheusText))
            }
            let draw: (@Sendable (String) -> Void)? =
                inputProgress != nil && progressWanted() ? { @Sendable text in printErrorInline(text) } : nil
            let progress = tracker.progress(), input = inputProgress ?? { _ in "" }
            try await ProgressLine.during(draw: draw, line: { progress().map { $0.line(input: input) } }) {
                try await tracker.runGroup(before: before, control: control, logger: logger)
            }
        } catch let error as TrackerError {
            throw error.commandError
        }
        let interrupted = !tracker.inputFinished
        if tracker.fixesOutOfOrder > 0 && onLogTime {
            // A file not in time order (a GPX's waypoints before its track, a CSV newest first).
            printError(
                "warning: \(counted(tracker.fixesOutOfOrder, "fix", "fixes")) older than one before "
                    + "\(tracker.fixesOutOfOrder == 1 ? "it was" : "them were") not delivered (a location is never "
                    + "older than the last): the input is not in time order; sort it by time to track all of it",
                level: .warning)
        }
        if tracker.fixesWithoutDate > 0 && onLogTime {
            printError(
                "warning: \(counted(tracker.fixesWithoutDate, "fix", "fixes")) had a time of day but no date "
                    + "(the log has no RMC or ZDA sentence before \(tracker.fixesWithoutDate == 1 ? "it" : "them")): "
                    + "give the log's date with --date YYYY-MM-DD",
                level: .warning)
        }
        try await upload.report(tracker, embedded: embedded, dataDirectory: dataDirectory, quiet: quiet && !interrupted)
        await embedded?.store.close()
        if tracker.application.state == .terminated {
            printError("keeptrack: the app was terminated (see the \"terminated\" event)", level: .error)
            throw ExitCode(1)
        }
        // A run stopped (a signal) failed at nothing: only an input that ended reports its error.
        return interrupted ? nil : tracker.sourceError
    }
}

extension RunProgress {
    /// The progress line of a run: the input's (`input` after the seconds elapsed, e.g. a replay's
    /// percentage) with the outbox's depth, then `uploading: 3,400 of 10,000 sent  1,906/s  ETA 3 s`.
    func line(input: (Double) -> String) -> String {
        switch self {
        case .input(let elapsed, let waiting):
            return input(elapsed) + (waiting.map { "  outbox \(grouped($0))" } ?? "")
        case .upload(let r):
            var text = "uploading: \(grouped(r.sent)) of \(grouped(r.total)) sent"
            if let rate = r.rate, let left = r.secondsLeft {
                text += "  \(grouped(Int(rate.rounded())))/s  ETA \(left) s"
            }
            return text
        }
    }
}
