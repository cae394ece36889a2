import ArgumentParser
import BuildInfo
import ConfigFile
import Logging
import Tracking

#if canImport(Glibc)
    import Glibc
#endif

@main
struct KeepTrack: AsyncParsableCommand {
    /// The configuration file of `track` read in, and `--gpsd` without a value given the default address.
    static func main() async {
        Telemetry.bootstrap()
        var arguments = Array(CommandLine.arguments.dropFirst())
        // The file read in, if any, to name its setting when the command line is refused.
        var readIn: (file: ConfigReadIn, hint: String)?
        // `track` reads its configuration file first; the command line wins (the last value does).
        if arguments.first == "track" {
            do {
                if let file = try TrackConfig.reader.readingIn(
                    arguments, at: 1, option: "--config",
                    defaultPath: TrackConfig.defaultPath,
                    replacedByCommandLine: TrackConfig.perTarget,
                    exists: { access($0, F_OK) == 0 })
                {
                    arguments = file.arguments
                    readIn = (file, " (keeptrack config check \(file.path))")
                }
            } catch {
                printError("keeptrack: \(error) (keeptrack config check \(error.path))")
                Glibc.exit(64)
            }
        }
        // `outbox send` reads the targets (and the data directory) of `track`'s file.
        if arguments.starts(with: ["outbox", "send"]) {
            do {
                if let file = try OutboxCommand.Send.readingIn(arguments) {
                    arguments = file.arguments
                    readIn = (file, " (keeptrack config check \(file.path))")
                }
            } catch {
                printError("keeptrack: \(error) (keeptrack config check \(error.path))")
                Glibc.exit(64)
            }
        }
        do {
            if let file = try ServeConfig.readingIn(arguments) {
                arguments = file.arguments
                readIn = (file, "")
            }
        } catch {
            printError("keeptrack: \(error)")
            Glibc.exit(64)
        }
        arguments = TrackConfig.reader.insertingFallbacks(into: arguments)
        // Logs go to standard error: standard output carries the data (JSON Lines). Set up once the
        // configuration files' settings are in the arguments (their log-level and log-format too).
        LoggingOptions.bootstrap(arguments)
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            // A value of the file refused: its file, line and key, not only the option's name.
            if let (file, hint) = readIn,
                let located = file.locate(parse: { arguments in
                    do {
                        _ = try parseAsRoot(TrackConfig.reader.insertingFallbacks(into: arguments))
                        return nil
                    } catch {
                        return message(for: error)
                    }
                })
            {
                printError("keeptrack: \(located)\(hint)", level: .error)
                Glibc.exit(64)
            }
            exitSaying(error)
        }
        do {
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ValidationError {
            // A refusal of what the user named, found while running: the usage of the command
            // that refused it, not the root's `keeptrack <subcommand>` (ArgumentParser's `main()`
            // knows only the root once parsing is over).
            let path = commandPath(arguments)
            let usage = usageString(for: type(of: command)).trimmingCharacters(in: .whitespacesAndNewlines)
            printError(
                "Error: \(error.message)\nUsage: \(usage)\n  See 'keeptrack \(path) --help' for more information.",
                level: .error)
            Glibc.exit(ExitCode.validationFailure.rawValue)
        } catch {
            exitSaying(error)
        }
    }

    /// The subcommands `arguments` name, from the root: `regions import` for
    /// `regions import places.geojson`.
    static func commandPath(_ arguments: [String]) -> String {
        var type: any ParsableCommand.Type = KeepTrack.self
        var names: [String] = []
        for argument in arguments {
            guard
                let sub = type.configuration.subcommands.first(where: {
                    ($0.configuration.commandName ?? $0._commandName) == argument
                })
            else { break }
            names.append(argument)
            type = sub
        }
        return names.joined(separator: " ")
    }

    /// Exits as ArgumentParser's `exit(withError:)` does; with JSON logs (`--log-format json`), a
    /// failure's message is a log record of its own, so every line on standard error is JSON.
    static func exitSaying(_ error: any Error) -> Never {
        let code = exitCode(for: error)
        guard standardErrorIsJSON.load(ordering: .relaxed), code != .success else {
            exit(withError: error)
        }
        let message = fullMessage(for: error)
        if !message.isEmpty { printError(message, level: .error) }
        Glibc.exit(code.rawValue)
    }

    static let configuration = CommandConfiguration(
        commandName: "keeptrack",
        abstract: "GPS tracking for Linux: decode NMEA logs, turn fixes into location events, upload trails.",
        discussion: """
            Start with a recorded log:

              keeptrack decode fixtures/walk-15min.nmea         # one JSON object a fix
              keeptrack decode --format gpx log.nmea > log.gpx  # a GPX track

              keeptrack replay --speed 10 fixtures/drive-1h.nmea  # paced, as live
              keeptrack track --gpsd                   # live, through gpsd
              keeptrack track --serial /dev/ttyACM0    # live, from the receiver

            Upload a trail and look at it:

              # into a test endpoint in the same process
              keeptrack replay --upload embedded fixtures/walk-15min.nmea
              keeptrack track --gpsd --upload https://host/v1/locations \\
                --token TOKEN
              keeptrack export --format svg --output trail.svg  # the stored trail
              keeptrack simulate         # how long iOS would keep it alive

            Every subcommand has its own --help.
            """,
        version: BuildInfo.line,
        subcommands: [
            Decode.self, Replay.self, Track.self, Serve.self, Export.self, Simulate.self, Ctl.self, Status.self,
            Config.self, Regions.self,
            OutboxCommand.self,
        ]
    )
}
