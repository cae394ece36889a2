import ArgumentParser
import Logging
import Tracking

#if canImport(Glibc)
    import Glibc
#endif

/// `--log-level` and `--log-format` of the long-running commands. Logs go to standard error;
/// standard output carries the data.
struct LoggingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The least level logged; coordinates appear in logs only at debug and trace.",
            valueName: "level"))
    var logLevel: Logger.Level = .warning

    @Option(help: ArgumentHelp("json writes one object a line.", valueName: "format"))
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument, CaseIterable {
        case text
        case json
    }

    /// Reads the two options from the arguments, a configuration file's included, before parsing
    /// (logging starts first): `--log-level info` or `--log-level=info`, the last one winning.
    static func scan(_ arguments: [String]) -> (Logger.Level, LogFormat) {
        var level = Logger.Level.warning
        var format = LogFormat.text
        for (i, a) in arguments.enumerated() {
            let (name, value): (Substring, String?) =
                if let equals = a.firstIndex(of: "=") {
                    (a[..<equals], String(a[a.index(after: equals)...]))
                } else {
                    (a[...], i + 1 < arguments.count ? arguments[i + 1] : nil)
                }
            guard let value else { continue }
            if name == "--log-level", let l = Logger.Level(rawValue: value) { level = l }
            if name == "--log-format", let f = LogFormat(rawValue: value) { format = f }
        }
        return (level, format)
    }

    /// Bootstraps swift-log for the process.
    static func bootstrap(_ arguments: [String]) {
        let (level, format) = scan(arguments)
        JSONLogHandler.bootstrapStandardError(level: level, json: format == .json)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
