import ConfigFile

#if canImport(Glibc)
    import Glibc
#endif

/// The configuration file of `keeptrack serve`: YAML, one key per long option (as `track`'s,
/// ``TrackConfig``), read from `--config FILE` or, when it exists, `serve.yaml` beside `track`'s
/// `config.yaml`. Command-line options win over the file.
///
/// ```yaml
/// port: 5055
/// db: postgres://keeptrack@db/keeptrack
/// token: s3cret
/// cors-origin:                # repeatable options take a list
///   - https://owntracks.example.org
/// ```
enum ServeConfig {
    /// Every long option of `serve` (a test keeps this in step with the command).
    static let keys: [String: ConfigKind] = [
        "host": .option, "port": .option, "db": .option, "token": .option, "max-body": .option,
        "max-connections": .option, "idle-timeout": .option, "body-timeout": .option, "max-bodies-in-flight": .option,
        "faults": .flag, "refuse": .flag, "fail-rate": .option, "fail-status": .option, "retry-after": .option,
        "delay": .option, "drop-rate": .option, "tls-cert": .option, "tls-key": .option, "open-registration": .flag,
        "retention": .option, "mqtt": .option, "cors-origin": .list, "log-level": .option, "log-format": .option,
        "data-dir": .option, "first-request-timeout": .option, "tiles": .option, "max-streams": .option,
        "offline-after": .option, "geocoder": .option, "homeassistant": .option, "homeassistant-ca-file": .option,
        "allow-private-hooks": .flag, "overspeed": .option, "max-accuracy": .option,
    ]

    static let reader = ConfigReader(schema: keys)

    /// The default file: `$XDG_CONFIG_HOME/keeptrack/serve.yaml` (`~/.config/keeptrack/serve.yaml`).
    static var defaultPath: String {
        let trackFile = TrackConfig.defaultPath
        return String(trackFile.dropLast("config.yaml".count)) + "serve.yaml"
    }

    /// `serve`'s arguments with its file read in (``readingIn(_:)``).
    static func insertingFile(into arguments: [String]) throws(ConfigFileError) -> [String] {
        try readingIn(arguments)?.arguments ?? arguments
    }

    /// `serve`'s file as read into its arguments (not for `serve devices` or `serve share`, whose
    /// store is `--db`'s); `nil` for another command, or when there is no file.
    static func readingIn(_ arguments: [String]) throws(ConfigFileError) -> ConfigReadIn? {
        guard arguments.first == "serve", !["devices", "share"].contains(arguments.dropFirst().first ?? "") else {
            return nil
        }
        return try reader.readingIn(
            arguments, at: 1, option: "--config", defaultPath: defaultPath,
            exists: { access($0, F_OK) == 0 })
    }
}
