import ArgumentParser
import ConfigFile

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
/// ```
///
/// Reading and checking the YAML (sizes, aliases, keys, kinds of value) is the `ConfigFile`
/// library's ``ConfigReader``; this maps its settings to `track`'s options.
enum ConfigFile {
    /// Every long option of `track` (a test keeps this in step with the command).
    static let trackKeys: [String: ConfigKind] = [
        "gpsd": .optionalValue(fallback: "localhost:2947"), "device": .option, "serial": .option, "baud": .option,
        "all": .flag, "distance-filter": .option, "desired-accuracy": .option, "significant-changes": .flag,
        "regions": .option, "dwell": .option, "pause-when-stationary": .flag, "background": .flag,
        "background-modes": .option, "policy": .option, "budget": .option, "warning-lead": .option,
        "total-cap": .option, "grace": .option, "wake-window": .option, "sample-interval": .option,
        "control": .option, "upload": .option, "format": .option, "device-id": .option, "token": .option,
        "ca-file": .option, "header": .list, "batch-size": .option, "batch-wait": .option, "max-backoff": .option,
        "outbox-max-records": .option, "outbox-max-age": .option, "shutdown-timeout": .option, "data-dir": .option,
        "log-level": .option, "log-format": .option, "time-interval": .option, "heading-change": .option,
        "stationary-radius": .option, "stationary-timeout": .option, "significant-change-distance": .option,
        "significant-change-interval": .option, "max-fix-age": .option, "metrics-listen": .option,
    ]

    static let reader = ConfigReader(schema: trackKeys)

    /// A problem in the file, with its line when known.
    typealias Problem = ConfigProblem

    /// One key of the file as command-line arguments.
    struct Entry {
        var key: String
        var line: Int
        var arguments: [String]
        /// For a list, each item's arguments and line.
        var items: [(arguments: [String], line: Int)] = []
    }

    /// The default file: `$XDG_CONFIG_HOME/keeptrack/config.yaml` (`~/.config/keeptrack/config.yaml`).
    static var defaultPath: String {
        if let xdg = getenv("XDG_CONFIG_HOME").map({ String(cString: $0) }), !xdg.isEmpty {
            return xdg + "/keeptrack/config.yaml"
        }
        return (getenv("HOME").map { String(cString: $0) } ?? ".") + "/.config/keeptrack/config.yaml"
    }

    /// The file's settings as command-line arguments, key by key.
    static func load(_ path: String) throws(Problem) -> [Entry] {
        try reader.read(path: path).map { setting in
            switch setting.value {
            case .flag(let on):
                Entry(key: setting.key, line: setting.line, arguments: on ? ["--\(setting.key)"] : [])
            case .option(let value):
                Entry(key: setting.key, line: setting.line, arguments: ["--\(setting.key)", value])
            case .list(let values):
                Entry(key: setting.key, line: setting.line,
                      arguments: values.flatMap { ["--\(setting.key)", $0.value] },
                      items: values.map { (["--\(setting.key)", $0.value], $0.line) })
            }
        }
    }

    /// List items checked per parse: argument-parser's parse is quadratic in the number of
    /// arguments (`SplitArguments.remove(at:)` for each one consumed), so a long list is checked
    /// in slices of this size: linear overall (20,000 `header:` items took 45 s in one parse).
    static let sliceSize = 128

    /// Checks the file as `track` would read it, naming the key and line of any problem.
    ///
    /// - Complexity: O(n) in the file's size: lists are parsed in slices of ``sliceSize`` items
    ///   along with every other key, so cross-key rules still apply to each item.
    static func check(_ path: String, parses: inout Int) throws(Problem) -> [Entry] {
        let entries = try load(path)
        let single = entries.filter(\.items.isEmpty)
        let base = single.flatMap(\.arguments)
        let lists = entries.filter { !$0.items.isEmpty }
        func parse(_ arguments: [String], culprits: [(key: String, line: Int)]) throws(Problem) {
            parses += 1
            do {
                _ = try Track.parse(arguments)
            } catch {
                let message = Track.message(for: error)
                // Find the key the message is about.
                let culprit = culprits.first { message.contains("--\($0.key)") || message.contains("'\($0.key)'") }
                if let culprit, !(message.hasPrefix("Choose one input")) {
                    throw Problem(.badValue, path, line: culprit.line, "\(culprit.key): \(message)")
                }
                throw Problem(.badValue, path, line: nil, message)
            }
        }
        let baseCulprits = single.map { (key: $0.key, line: $0.line) }
        if lists.isEmpty {
            try parse(base, culprits: baseCulprits)
            return entries
        }
        for list in lists {
            var start = 0
            while start < list.items.count {
                let slice = list.items[start..<min(start + sliceSize, list.items.count)]
                do throws(Problem) {
                    try parse(base + slice.flatMap(\.arguments), culprits: baseCulprits + [(list.key, list.line)])
                } catch {
                    // Name the item: check the slice's items one by one.
                    for item in slice {
                        try parse(base + item.arguments, culprits: baseCulprits + [(list.key, item.line)])
                    }
                    throw error
                }
                start += sliceSize
            }
        }
        return entries
    }
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
            abstract: "Validate a configuration file: every key known, every value accepted, with the line of any problem.")

        @Argument(help: "The file. Default: $XDG_CONFIG_HOME/keeptrack/config.yaml.")
        var file: String?

        @Flag(help: "Print the keys a file may have, one a line, and exit.")
        var listKeys = false

        func run() throws {
            if listKeys {
                print(ConfigFile.trackKeys.keys.sorted().joined(separator: "\n"))
                return
            }
            let path = file ?? ConfigFile.defaultPath
            do {
                var parses = 0
                let entries = try ConfigFile.check(path, parses: &parses)
                print("\(path): ok, \(entries.count) setting\(entries.count == 1 ? "" : "s"): "
                    + entries.map(\.key).joined(separator: ", "))
            } catch {
                printError("keeptrack config check: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
