import ArgumentParser
import Formats
import GPSInput
import Geo
import NMEA
import TrackFiles
import TrackServer
import Tracking

#if canImport(Glibc)
    import Glibc
#endif

struct Track: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Track a live receiver through gpsd or directly on a serial device.",
        discussion: """
            Prints every fix as one JSON object per line (the same schema as `keeptrack decode`) and \
            source events as {"event":"source","kind":...,"message":...}: connected, disconnected \
            (gpsd stopped, receiver unplugged: it keeps retrying), error (permission denied, no \
            NMEA at any baud rate). Stop with Ctrl-C.

            Examples:
              keeptrack track --gpsd                      # gpsd on localhost:2947
              keeptrack track --gpsd 192.168.1.5:2947 --device /dev/ttyACM0
              keeptrack track --serial /dev/ttyACM0       # baud rate detected
              keeptrack track --serial /dev/ttyUSB0 --baud 4800

            No receiver at hand? tools/fake-receiver.py plays a fixture on a pseudo-tty:
              tools/fake-receiver.py fixtures/walk-15min.nmea --link /tmp/ttyFAKE &
              keeptrack track --serial /tmp/ttyFAKE

            With location events the tracker runs the background budget \
            (docs/background.md): `keeptrack ctl background|foreground|status` (or SIGUSR1/SIGUSR2) moves it \
            between foreground and background; suspended, it releases the gpsd watch and samples \
            one fix a minute until a significant change, a region event or a visit wakes it. Under \
            systemd it reports READY, STATUS and WATCHDOG (tools/keeptrack.service).
              keeptrack track --gpsd --significant-changes --background
              keeptrack ctl status
            """
    )

    @Option(
        name: .customLong("gpsd"),
        help: ArgumentHelp(
            "Read from gpsd at HOST[:PORT] (default localhost:2947; the value may be omitted).",
            valueName: "host[:port]"))
    var gpsd: String?

    @Option(help: ArgumentHelp("With --gpsd: only this device's fixes.", valueName: "path"))
    var device: String?

    @Option(help: ArgumentHelp("Read NMEA directly from a serial device.", valueName: "device"))
    var serial: String?

    @Option(help: ArgumentHelp("With --serial: 4800, 9600, 19200, 38400, 57600, 115200 or auto.", valueName: "rate"))
    var baud: String = "auto"

    @Flag(help: "Also print epochs without a position (mode \"none\").")
    var all = false

    @OptionGroup(title: "Location service (any of these prints location events instead of fixes)")
    var location: LocationOptions

    @OptionGroup(title: "Background budget (any of these also prints location events)")
    var lifecycle: LifecycleOptions

    @Option(
        help: ArgumentHelp(
            "Control socket for `keeptrack ctl`; runs the tracker, so location events are printed, not "
                + "fixes. Default: $XDG_RUNTIME_DIR/keeptrack/control.sock "
                + "(/tmp/keeptrack-UID/control.sock without XDG_RUNTIME_DIR).", valueName: "path"))
    var control: String?

    @OptionGroup(title: "Upload (prints location events too)")
    var upload: UploadOptions

    @OptionGroup var data: DataDirectoryOption

    @OptionGroup(title: "Logs") var logging: LoggingOptions

    @Option(
        help: ArgumentHelp(
            "Serve GET /metrics (Prometheus text) at HOST:PORT, e.g. 127.0.0.1:9477 (prints location "
                + "events too).", valueName: "host:port"))
    var metricsListen: String?

    @Option(
        help: ArgumentHelp(
            "Read settings from this YAML file (default: $XDG_CONFIG_HOME/keeptrack/config.yaml "
                + "when it exists); the command line wins. Check it with `keeptrack config check`.",
            valueName: "file"))
    var config: String?

    var wantsEvents: Bool {
        location.wantsEvents || lifecycle.isSet || control != nil || upload.enabled || metricsListen != nil
    }

    func validate() throws {
        if (gpsd == nil) == (serial == nil) {
            throw ValidationError("Choose one input: --gpsd [HOST[:PORT]] or --serial DEVICE.")
        }
        if let gpsd, GPSDSource.Options(address: gpsd) == nil {
            throw ValidationError(
                "--gpsd takes HOST, HOST:PORT or [IPv6]:PORT, a port from 1 to 65535, got '\(gpsd)'.")
        }
        if SerialSource.Baud(baud) == nil {
            throw ValidationError(
                "--baud must be one of 4800, 9600, 19200, 38400, 57600, 115200 or auto, got '\(baud)'.")
        }
        if let metricsListen, MetricsEndpoint.Address(metricsListen) == nil {
            throw ValidationError("--metrics-listen takes HOST:PORT or [IPv6]:PORT, got '\(metricsListen)'.")
        }
        if device != nil && gpsd == nil {
            throw ValidationError("--device filters gpsd's devices: use it with --gpsd.")
        }
    }

    func run() async throws {
        if wantsEvents {
            try await track()
        } else {
            try await runAsService { try await track() }
        }
    }

    var trackerRun: TrackerRun {
        TrackerRun(
            location: location, lifecycle: lifecycle, upload: upload, dataDirectory: data.layout,
            store: data.store, control: control ?? ControlSocket.defaultPath,
            metrics: metricsListen.flatMap(MetricsEndpoint.Address.init))
    }

    func track() async throws {
        if let gpsd {
            var options = GPSDSource.Options(address: gpsd)!
            options.device = device
            let source = GPSDSource(options: options)
            try await track(source, releaser: source)
        } else if let serial {
            try await track(SerialSource(options: .init(path: serial, baud: SerialSource.Baud(baud)!)))
        }
    }

    func track<S: FixSource>(_ source: S, releaser: (any WatchReleasing)? = nil) async throws {
        // A live source retries its failures itself: they end nothing, but for one it cannot wait
        // out (a path that is no terminal), which ends its input.
        if wantsEvents {
            if let failure = try await trackerRun.run(source, releaser: releaser, clock: WallClock()) {
                printError("error: \(failure.message)", level: .error)
                throw ExitCode(1)
            }
            return
        }
        var output = SourceLines(includeAll: all, lineBuffered: true)
        output.releasesStartupPages = true
        // Standard output may be a file: the input's problems and its return are said here too.
        output.onProblem = { event, back in
            printError(back ? "\(event.source): back: \(event.message)" : "warning: \(event.message)", level: .warning)
        }
        let failed = try await output.pump(source)
        if failed && !Task.isCancelled {
            printError("error: \(output.lastError ?? "the source failed")", level: .error)
            throw ExitCode(1)
        }
    }
}

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a recorded NMEA log or track file as a live source would deliver it.",
        discussion: """
            Reads NMEA, GPX, GeoJSON, CSV, OwnTracks .rec and Google Takeout files, told apart by \
            content (gzip too; docs/input-files.md); standard input is read as NMEA. \
            Prints fixes (the `keeptrack decode` schema) and source events as JSON Lines, as fast as \
            possible or paced by the fixes' timestamps (--speed 1 is real time, 60 a minute per \
            second). A progress line (percent, fixes/s, ETA) is drawn on standard error when it is \
            a terminal.

            With any location option (--distance-filter, --desired-accuracy, --significant-changes, \
            --regions, --visits, --heartbeat... : those listed under "Location service" below) it \
            prints location events instead, on the log's own time: {"event":"location",...}, \
            {"event":"enter"|"exit"|"dwell","region":...}, {"event":"state",...}, \
            {"event":"significant-change",...}, {"event":"visit"|"trip",...}, {"event":"heartbeat",...}, \
            {"event":"updates-paused"|"updates-resumed",...}, {"event":"error",...} (docs/protocols.md).

            Examples:
              keeptrack replay fixtures/walk-15min.nmea
              keeptrack replay --distance-filter 50 \\
                --regions fixtures/walk-15min.regions.geojson fixtures/walk-15min.nmea
              keeptrack replay --speed 10 fixtures/drive-1h.nmea
              # a receiver that never stops
              keeptrack replay --speed 1 --loop fixtures/walk-15min.nmea
            """
    )

    @Argument(help: "The NMEA log or track file ('-' for NMEA on standard input; .gz files are decompressed).")
    var file: String

    @Option(help: "Pace by fix time: 1 is real time, 10 ten times faster. Default: as fast as possible.")
    var speed: Double?

    @Flag(help: "Start again at the end (times continue forward).")
    var loop = false

    @Option(
        help: ArgumentHelp(
            "Date (YYYY-MM-DD, UTC) for an NMEA log's fixes before it gives one: a log of times of day "
                + "only (no RMC or ZDA) has no location without it.",
            valueName: "date"))
    var date: String?

    @Flag(help: "Also print epochs without a position (mode \"none\").")
    var all = false

    @Flag(name: .shortAndLong, help: "No progress line and no summary.")
    var quiet = false

    @OptionGroup(title: "Location service (any of these prints location events instead of fixes)")
    var location: LocationOptions

    @OptionGroup(title: "Background budget (any of these also prints location events)")
    var lifecycle: LifecycleOptions

    @OptionGroup(title: "Upload (prints location events too)")
    var upload: UploadOptions

    @OptionGroup var data: DataDirectoryOption

    @OptionGroup(title: "Logs") var logging: LoggingOptions

    func validate() throws {
        if let speed, !(speed > 0 && speed.isFinite) { throw ValidationError("--speed must be a positive number.") }
        if loop && file == "-" { throw ValidationError("--loop needs a file: standard input cannot be read twice.") }
        if let date, LogDecoding.parseDate(date) == nil {
            throw ValidationError("--date must be a date like 2024-03-09, got '\(date)'.")
        }
    }

    func run() async throws {
        if location.wantsEvents || lifecycle.isSet || upload.enabled {
            try await replay()
        } else {
            try await runAsService { try await replay() }
        }
    }

    func replay() async throws {
        // A file is read by content: NMEA here, any other track file by replayTrackFile.
        if file != "-", let format = try? TrackFileFormat.sniff(path: file), format != .nmea {
            return try await replayTrackFile(format: format)
        }
        var options = NMEALogSource.Options(path: file, speed: speed, loop: loop)
        options.decoder.referenceDay = date.flatMap(LogDecoding.parseDate)
        let source = NMEALogSource(options: options)
        let file = self.file
        try await replay(source, logClock: source.logClock, progress: { source.progress }) { seconds in
            let p = source.progress
            // Standard input is read as NMEA only: another track file there is all skipped bytes.
            let hint =
                file == "-" && p.fixes == 0 && p.statistics.skippedBytes > 0
                ? " (standard input is read as NMEA only; give a GPX, GeoJSON, CSV or other track file by its path)"
                : ""
            guard let seconds else {
                return "\(source.name): \(grouped(p.fixes)) fixes, \(grouped(p.statistics.rejected)) bad sentences"
                    + hint
            }
            return "\(source.name): \(grouped(p.fixes)) fixes in \(formatFixed(seconds, 3)) s, "
                + "\(grouped(p.statistics.rejected)) bad sentences, \(grouped(p.statistics.skippedBytes)) skipped bytes"
                + hint
        }
    }

    /// Replays `source`, a file on its log time (`logClock`): through the tracker when location
    /// events, the background budget or uploads are asked for, else as fix lines; `summary` is the
    /// line said at the end, given the seconds the fix lines took (`nil` after the tracker).
    func replay<S: FixSource, Statistics>(
        _ source: S, logClock: ManualClock, progress: @escaping @Sendable () -> ReplayProgress<Statistics>,
        summary: (_ seconds: Double?) -> String
    ) async throws {
        if location.wantsEvents || lifecycle.isSet || upload.enabled {
            // Everything runs on log time: the log's clock is "now".
            let run = TrackerRun(
                location: location, lifecycle: lifecycle, upload: upload, dataDirectory: data.layout,
                onLogTime: true, lineBuffered: speed != nil, quiet: quiet,
                inputProgress: quiet ? nil : { @Sendable in progress().line(elapsed: $0) })
            let failure = try await run.run(source, clock: logClock)
            if !quiet { printError(summary(nil)) }
            // What the log held up to its error was tracked (and uploaded); the run still failed.
            if let failure {
                printError("error: \(failure.message)", level: .error)
                throw ExitCode(1)
            }
            return
        }
        var output = SourceLines(includeAll: all, lineBuffered: speed != nil)
        let started = monotonicSeconds()
        let failed = try await output.pump(
            source,
            tick: progressWanted() && !quiet
                ? { elapsed in printErrorInline(elapsed.map { progress().line(elapsed: $0) } ?? "") } : nil)
        if !quiet { printError(summary(monotonicSeconds() - started)) }
        // The reason on standard error too, as through the tracker (standard output may be a file).
        if failed {
            printError("error: \(output.lastError ?? "the source failed")", level: .error)
            throw ExitCode(1)
        }
    }
}

extension GPSDSource: WatchReleasing {}

extension ReplayProgress {
    /// The progress line `keeptrack replay` draws for a log or a track file: percent, fixes, fixes per second, ETA; the share
    /// and the ETA from the fixes delivered, not from the bytes read ahead.
    func line(elapsed: Double) -> String {
        let rate = Double(fixes) / Swift.max(elapsed, 1e-9)
        guard let fraction else { return "\(grouped(fixes)) fixes, \(Int(rate)) fixes/s" }
        let eta = fraction > 0 ? elapsed / fraction - elapsed : 0
        return "\(Int(fraction * 100))%  \(grouped(fixes)) fixes  \(Int(rate)) fixes/s  ETA \(Int(eta.rounded())) s"
    }
}
