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

    /// Reads the two options from raw arguments, before parsing (logging starts first).
    static func scan(_ arguments: [String]) -> (Logger.Level, LogFormat) {
        var level = Logger.Level.warning
        var format = LogFormat.text
        for (i, a) in arguments.enumerated() where i + 1 < arguments.count {
            if a == "--log-level", let l = Logger.Level(rawValue: arguments[i + 1]) { level = l }
            if a == "--log-format", let f = LogFormat(rawValue: arguments[i + 1]) { format = f }
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
