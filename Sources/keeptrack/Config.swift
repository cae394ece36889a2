import ArgumentParser
import ConfigFile
import Tracking

#if canImport(Glibc)
    import Glibc
#endif

/// The configuration file of `keeptrack track`: YAML, one key per long option, so that every
/// option can live in the file. Command-line options win over the file.
///
/// ```yaml
/// gpsd: localhost:2947        # or `serial: /dev/ttyACM0` (with `baud: auto`)
/// significant-changes: true   # flags are true or false
/// regions: /etc/keeptrack/regions.geojson
/// upload: https://tracker.example.org/v1/locations
/// token: s3cret
/// header:                     # repeatable options take a list
///   - "X-Team: blue"
/// targets:                    # several upload targets (instead of upload:), each its own lane
///   - url: https://traccar.example:5055/
///     format: osmand
///   - url: mqtts://anna@broker.example/owntracks/anna/phone
///     name: recorder
///     format: owntracks
///     secret-file: /etc/keeptrack/owntracks.secret
/// ```
///
/// Reading and checking the YAML (sizes, aliases, keys, kinds of value), turning it into
/// arguments and checking them in linear time is the `ConfigFile` library's; this is `track`'s schema.
enum TrackConfig {
    /// Every long option of `track` (a test keeps this in step with the command).
    static let keys: [String: ConfigKind] = [
        "gpsd": .optionalValue(fallback: "localhost:2947"), "device": .option, "serial": .option, "baud": .option,
        "all": .flag, "distance-filter": .option, "desired-accuracy": .option, "significant-changes": .flag,
        "regions": .option, "dwell": .option, "pause-when-stationary": .flag, "background": .flag,
        "background-modes": .option, "policy": .option, "budget": .option, "warning-lead": .option,
        "total-cap": .option, "grace": .option, "wake-window": .option, "sample-interval": .option,
        "control": .option, "upload": .option, "format": .option, "device-id": .option, "token": .option,
        "user": .option, "no-region-events": .flag, "secret-file": .option,
        "ca-file": .option, "header": .list, "batch-size": .option, "batch-wait": .option, "max-backoff": .option,
        "outbox-max-records": .option, "outbox-max-age": .option, "shutdown-timeout": .option, "data-dir": .option,
        "commit-within": .option,
        "log-level": .option, "log-format": .option, "time-interval": .option, "heading-change": .option,
        "stationary-radius": .option, "stationary-timeout": .option, "significant-change-distance": .option,
        "significant-change-interval": .option, "max-fix-age": .option, "metrics-listen": .option,
        "visits": .flag, "visit-min-duration": .option, "visit-radius": .option, "visit-gap": .option,
        "max-accuracy": .option,
        "heartbeat": .option, "target-name": .option, "target-header": .list,
        "targets": .records([
            "url": ConfigField(option: "upload", primary: true), "name": ConfigField(option: "target-name"),
            "format": ConfigField(option: "format"), "token": ConfigField(option: "token"),
            "user": ConfigField(option: "user"), "device-id": ConfigField(option: "device-id"),
            "secret-file": ConfigField(option: "secret-file"), "ca-file": ConfigField(option: "ca-file"),
            "header": ConfigField(option: "target-header", list: true),
        ]),
    ]

    static let reader = ConfigReader(schema: keys)

    /// The repeatable options of upload targets: the command line's replace the file's (a file's
    /// `upload:` and a command line's `--upload` are not two targets, the command line wins).
    static let perTarget: Set<String> = [
        "upload", "format", "device-id", "token", "user", "secret-file", "ca-file", "target-name", "target-header",
    ]

    /// The default file: `$XDG_CONFIG_HOME/keeptrack/config.yaml` (`~/.config/keeptrack/config.yaml`).
    static var defaultPath: String {
        ConfigReader.defaultPath(of: "keeptrack", environment: environment(["XDG_CONFIG_HOME", "HOME"]))
    }

    /// Checks the file as `track` would read it, naming the key and line of any problem.
    static func check(_ path: String, parses: inout Int) throws(ConfigFileError) -> [OptionArguments] {
        try reader.check(path: path, parses: &parses) { arguments in
            do {
                _ = try Track.parse(arguments)
                return nil
            } catch {
                return Track.message(for: error)
            }
        }
    }
}

/// The variables of `keys` that are set.
func environment(_ keys: [String]) -> [String: String] {
    var environment: [String: String] = [:]
    for key in keys {
        if let v = getenv(key) { environment[key] = String(cString: v) }
    }
    return environment
}

struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the configuration file of keeptrack track.",
        discussion: """
            `keeptrack track` reads $XDG_CONFIG_HOME/keeptrack/config.yaml (~/.config/keeptrack/config.yaml) \
            when it exists, or the file of --config: YAML, one key per long option of `track` \
            (`distance-filter: 10`, `significant-changes: true`, `header: [...]`); options on the \
            command line win over the file.

            Examples:
              keeptrack config check
              keeptrack config check /etc/keeptrack/config.yaml
            """,
        subcommands: [Check.self]
    )

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Validate a configuration file: every key known, every value accepted, with the line of any problem.")

        @Argument(help: "The file. Default: $XDG_CONFIG_HOME/keeptrack/config.yaml.")
        var file: String?

        @Flag(help: "Print the keys a file may have, one a line, and exit.")
        var listKeys = false

        func run() throws {
            if listKeys {
                print(TrackConfig.keys.keys.sorted().joined(separator: "\n"))
                return
            }
            let path = file ?? TrackConfig.defaultPath
            do {
                var parses = 0
                let entries = try TrackConfig.check(path, parses: &parses)
                print(
                    "\(path): ok, \(entries.count) setting\(entries.count == 1 ? "" : "s"): "
                        + entries.map(\.key).joined(separator: ", "))
            } catch {
                printError("keeptrack config check: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
