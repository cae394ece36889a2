import ArgumentParser
import ConfigFile
import Formats
import Geo
import Logging
import Tracking
import Upload

#if canImport(Glibc)
    import Glibc
#endif

extension OutboxCommand {
    /// `keeptrack outbox send`: what waits in the outbox, to every target now, with the tracker's
    /// uploaders; a line per target, and exit status 1 while a target still refuses.
    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send what waits in the outbox to every target now, then exit.",
            discussion: """
                The targets are given as `keeptrack track` takes them: --upload (repeatable, \
                with its --format, --token, --device-id...) or, without --upload, the targets of \
                the configuration file (--config; by default track's, which also gives \
                --data-dir). Each target is a lane of its own, with the tracker's batches, retries \
                and backoff. A progress line is drawn on standard error when it is a terminal; \
                then a line per target says what it got and what it still lacks. A target that \
                still refuses (5 failed attempts in a row, or the settings refused) keeps its \
                records: its reason is said and the exit status is 1 (docs/uploads.md). The \
                options that only shape a run (--batch-wait, --shutdown-timeout, --commit-within, \
                the outbox's caps) are taken, so that a tracker's options can be given as they are, \
                and change nothing here.

                Examples:
                  keeptrack outbox send            # the targets of the configuration file
                  keeptrack outbox send --upload https://host/v1/locations --token TOKEN
                  keeptrack outbox send --config /etc/keeptrack/config.yaml
                """)

        @Option(
            help: ArgumentHelp(
                "Read the targets from this YAML file, as `keeptrack track` does (default: "
                    + "$XDG_CONFIG_HOME/keeptrack/config.yaml when it exists); --upload replaces them.",
                valueName: "file"))
        var config: String?

        @OptionGroup(title: "Targets, as keeptrack track takes them") var upload: UploadOptions

        @OptionGroup var data: DataDirectoryOption

        @OptionGroup(title: "Logs") var logging: LoggingOptions

        /// The keys of `track`'s configuration file that `outbox send` reads: the targets, the
        /// upload options and the data directory (a test keeps them in step with the options).
        static let configKeys: Set<String> = [
            "upload", "format", "device-id", "token", "user", "no-region-events", "secret-file", "ca-file", "header",
            "batch-size", "batch-wait", "max-backoff", "outbox-max-records", "outbox-max-age", "shutdown-timeout",
            "commit-within", "target-name", "target-header", "targets", "data-dir", "log-level", "log-format",
        ]

        /// The command line with `track`'s configuration file read in (its keys of ``configKeys``);
        /// the command line wins, and its --upload replaces the file's targets.
        static func readingIn(_ arguments: [String]) throws(ConfigFileError) -> ConfigReadIn? {
            try TrackConfig.reader.readingIn(
                arguments, at: 2, option: "--config", defaultPath: TrackConfig.defaultPath,
                replacedByCommandLine: TrackConfig.perTarget, keeping: configKeys,
                exists: { access($0, F_OK) == 0 })
        }

        func validate() throws {
            if upload.embedded {
                throw ValidationError(
                    "--upload embedded is an endpoint of a run of its own: outbox send sends to endpoints "
                        + "that wait for records (--upload URL).")
            }
        }

        func run() async throws {
            let layout = data.layout
            let outboxPath = layout.outbox
            guard access(outboxPath, F_OK) == 0 else {
                throw CommandFailure("no outbox at \(outboxPath) (see --data-dir)")
            }
            guard upload.enabled else { throw ValidationError(try Self.noTargets(data.existingOutbox())) }
            var settings = upload.settings(dataDirectory: layout, embedded: nil)
            // OwnTracks' transitions carry their waypoint's creation time, as the tracker sends them.
            if let defined = data.store.definitionsStoredAt() {
                settings.uploader.formatSettings.regionsDefinedAt = defined
                for i in settings.otherTargets.indices {
                    settings.otherTargets[i].formatSettings.regionsDefinedAt = defined
                }
            }
            let service: UploadService
            do {
                service = try UploadService.sending(settings, logger: Logger(label: "keeptrack.upload"))
            } catch let error as TrackerError {
                throw error.commandError
            }
            upload.warnAboutOrphans(service)
            let draw: (@Sendable (String) -> Void)? =
                progressWanted(stdoutUsed: false) ? { @Sendable text in printErrorInline(text) } : nil
            let reports = try await Self.send(service, draw: draw)
            for r in reports { print(r.line(.sent)) }
            let refusing = reports.filter { $0.pending > 0 }
            guard refusing.isEmpty else {
                for r in refusing { printError("keeptrack outbox send: " + r.refusal, level: .error) }
                throw ExitCode(1)
            }
        }

        /// Sends, drawing `uploading: 3,400 of 10,000 sent  1,906/s  ETA 3 s` with `draw` meanwhile.
        static func send(
            _ service: UploadService, draw: (@Sendable (String) -> Void)?
        ) async throws -> [UploadService.TargetReport] {
            // The backlog: what each target lacks (a record two targets lack is sent twice).
            let total = service.targetReports.reduce(0) { $0 + max(0, $1.pending) }
            let backlog = BacklogProgress()
            _ = backlog.reading(sent: 0, waiting: total, now: monotonicSeconds())
            return try await ProgressLine.during(
                draw: draw,
                line: {
                    let done = service.uploaders.reduce(0) {
                        $0 + $1.stats.uploaded + $1.stats.deadLettered + $1.stats.skipped
                    }
                    return backlog.reading(sent: done, waiting: max(0, total - done), now: monotonicSeconds())
                        .map { RunProgress.upload($0).line(input: { _ in "" }) }
                }
            ) { try await service.send() }
        }

        /// Why there is nothing to send to: no target given, and the targets the outbox knows.
        static func noTargets(_ outbox: Outbox) -> String {
            var sentence =
                "outbox send needs its targets: give --upload URL (with its --format, --token... as keeptrack "
                + "track was given them), or a targets: list in the configuration file (--config FILE)"
            let known = ((try? outbox.targetStatuses()) ?? []).filter { $0.pending > 0 }
            if !known.isEmpty {
                sentence +=
                    "; records wait for "
                    + known.map { "\($0.target.name) (\($0.target.url), \(grouped($0.pending)))" }.joined(
                        separator: ", ")
            }
            return sentence + "."
        }
    }
}

extension UploadService.TargetReport {
    /// Why a target still lacks records after `outbox send`, and what to do, in a sentence:
    /// `895 records not sent to fleet, which still refuses them: cannot reach HOST: ...; giving up
    /// for now after 5 attempts. Check that HOST is up and reachable, then run keeptrack outbox
    /// send again; the records stay in the outbox until then.`
    var refusal: String {
        let why = stats.lastError ?? "not sent"
        let settings = !stats.settingsToCheck.isEmpty
        let check =
            settings
            ? "Check " + UploadOptions.settingsHint(stats.settingsToCheck).dropFirst("; check ".count)
            : "Check that \(host) is up and reachable"
        return "\(grouped(pending)) records not sent to \(name), which "
            + (settings ? "refuses the settings" : "still refuses them") + ": \(why). \(check), then run "
            + "keeptrack outbox send again; the records stay in the outbox until then."
    }
}
