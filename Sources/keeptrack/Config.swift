import ArgumentParser
import SystemIO
import Yams

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
enum ConfigFile {
    enum Kind {
        case option
        case flag
        case list
    }

    /// Every long option of `track` (a test keeps this in step with the command).
    static let trackKeys: [String: Kind] = [
        "gpsd": .option, "device": .option, "serial": .option, "baud": .option, "all": .flag,
        "distance-filter": .option, "desired-accuracy": .option, "significant-changes": .flag, "regions": .option,
        "dwell": .option, "pause-when-stationary": .flag, "background": .flag, "background-modes": .option,
        "policy": .option, "budget": .option, "warning-lead": .option, "total-cap": .option, "grace": .option,
        "wake-window": .option, "sample-interval": .option, "control": .option, "upload": .option, "format": .option,
        "device-id": .option, "token": .option, "ca-file": .option, "header": .list, "batch-size": .option,
        "batch-wait": .option, "max-backoff": .option, "outbox-max-records": .option, "outbox-max-age": .option,
        "shutdown-timeout": .option, "data-dir": .option, "log-level": .option, "log-format": .option,
    ]

    /// A problem in the file, with its line when known.
    struct Problem: Error, CustomStringConvertible {
        var path: String
        var line: Int?
        var message: String
        var description: String { "\(path)\(line.map { ":\($0)" } ?? ""): \(message)" }
    }

    struct Entry {
        var key: String
        var line: Int
        var arguments: [String]
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
        let text: String
        do {
            text = String(decoding: try readFile(path), as: UTF8.self)
        } catch {
            throw Problem(path: path, line: nil, message: "cannot read: \(error)")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            if let (key, line) = duplicateKey(text) {
                throw Problem(path: path, line: line, message: "'\(key)' is set twice")
            }
            throw Problem(path: path, line: yamlLine(error), message: "not valid YAML: \(yamlProblem(error))")
        } catch {
            throw Problem(path: path, line: nil, message: "not valid YAML: \(error)")
        }
        guard let root else { return [] }
        guard let mapping = root.mapping else {
            throw Problem(path: path, line: root.mark?.line, message: "expected keys and values (a mapping)")
        }
        var entries: [Entry] = []
        var seen: Set<String> = []
        for (keyNode, value) in mapping {
            let line = keyNode.mark?.line ?? 0
            guard let key = keyNode.scalar?.string else {
                throw Problem(path: path, line: line, message: "a key must be a plain name")
            }
            guard let kind = trackKeys[key] else {
                let hint = suggestion(for: key).map { " (did you mean '\($0)'?)" } ?? ""
                throw Problem(path: path, line: line, message: "unknown key '\(key)'\(hint)")
            }
            guard seen.insert(key).inserted else {
                throw Problem(path: path, line: line, message: "'\(key)' is set twice")
            }
            var arguments: [String] = []
            switch kind {
            case .flag:
                guard let b = value.bool else {
                    throw Problem(path: path, line: line, message: "\(key): expected true or false, got '\(value.scalar?.string ?? "a list")'")
                }
                if b { arguments = ["--\(key)"] }
            case .option:
                if key == "gpsd", value.scalar?.string == "" || value.bool == true {
                    arguments = ["--gpsd", "localhost:2947"]
                    break
                }
                guard let scalar = value.scalar?.string, !scalar.isEmpty else {
                    throw Problem(path: path, line: line, message: "\(key): expected a single value")
                }
                arguments = ["--\(key)", scalar]
            case .list:
                let items = value.sequence.map { Array($0) } ?? [value]
                for item in items {
                    guard let scalar = item.scalar?.string else {
                        throw Problem(path: path, line: item.mark?.line ?? line, message: "\(key): expected a list of values")
                    }
                    arguments += ["--\(key)", scalar]
                }
            }
            entries.append(Entry(key: key, line: line, arguments: arguments))
        }
        return entries
    }

    /// Checks the file as `track` would read it, naming the key and line of any problem.
    static func check(_ path: String) throws(Problem) -> [Entry] {
        let entries = try load(path)
        do {
            _ = try Track.parse(entries.flatMap(\.arguments))
        } catch {
            let message = Track.message(for: error)
            // Find the key the message is about.
            let culprit = entries.first { message.contains("--\($0.key)") || message.contains("'\($0.key)'") }
            if let culprit, !(message.hasPrefix("Choose one input")) {
                throw Problem(path: path, line: culprit.line, message: "\(culprit.key): \(message)")
            }
            throw Problem(path: path, line: nil, message: message)
        }
        return entries
    }

    /// The first top-level key set a second time, and its line (YAML parsers refuse them without
    /// saying where).
    static func duplicateKey(_ text: String) -> (String, Int)? {
        var seen: Set<String> = []
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            guard let first = line.first, first != " ", first != "#", first != "-", let colon = line.firstIndex(of: ":") else {
                continue
            }
            let key = String(line[..<colon]).trimmingCharacters(in: [" ", "\"", "'"])
            if !seen.insert(key).inserted { return (key, i + 1) }
        }
        return nil
    }

    static func suggestion(for key: String) -> String? {
        let normalized = key.lowercased().replacingUnderscores()
        if trackKeys[normalized] != nil { return normalized }
        return trackKeys.keys.min { distance($0, key) < distance($1, key) }.flatMap { distance($0, key) <= 3 ? $0 : nil }
    }

    /// Edit distance, for suggestions.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let old = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = old
            }
        }
        return row[b.count]
    }

    static func yamlLine(_ error: YamlError) -> Int? {
        switch error {
        case .scanner(_, _, let mark, _), .parser(_, _, let mark, _): return mark.line
        case .composer(_, _, let mark, _): return mark.line
        default: return nil
        }
    }

    static func yamlProblem(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, _, _), .parser(_, let problem, _, _), .composer(_, let problem, _, _): return problem
        default: return "\(error)"
        }
    }
}

extension String {
    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
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
                let entries = try ConfigFile.check(path)
                print("\(path): ok, \(entries.count) setting\(entries.count == 1 ? "" : "s"): "
                    + entries.map(\.key).joined(separator: ", "))
            } catch {
                printError("keeptrack config check: \(error)")
                throw ExitCode(1)
            }
        }
    }
}
