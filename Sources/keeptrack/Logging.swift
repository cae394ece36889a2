import ArgumentParser
import Formats
import Geo
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// `--log-level` and `--log-format` of the long-running commands. Logs go to standard error;
/// standard output carries the data.
struct LoggingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical. The default is warning. "
                               + "Coordinates appear in logs only at debug and trace.", valueName: "level"))
    var logLevel: Logger.Level = .warning

    @Option(help: ArgumentHelp("text or json (one object per line). The default is text.", valueName: "format"))
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
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                return JSONLogHandler(label: label, logLevel: level)
            }
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// One JSON object per log record on standard error:
/// `{"time":"...","level":"warning","label":"keeptrack.upload","message":"...","metadata":{...}}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, logLevel: Logger.Level) {
        self.label = label
        self.logLevel = logLevel
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level, message = event.message, explicit = event.metadata
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"time\":\"", to: &out)
        ISOTime.append(wallClockSeconds(), to: &out)
        ByteWriting.appendStatic("\",\"level\":\"", to: &out)
        out.append(contentsOf: level.rawValue.utf8)
        ByteWriting.appendStatic("\",\"label\":", to: &out)
        ByteWriting.appendJSONString(label, to: &out)
        ByteWriting.appendStatic(",\"message\":", to: &out)
        ByteWriting.appendJSONString(message.description, to: &out)
        let all = metadata.merging(explicit ?? [:]) { $1 }
        if !all.isEmpty {
            ByteWriting.appendStatic(",\"metadata\":{", to: &out)
            for (i, (k, v)) in all.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                ByteWriting.appendJSONString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                ByteWriting.appendJSONString(v.description, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("}\n", to: &out)
        _ = out.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension Logger {
    /// A location's coordinates as log metadata: the numbers at debug level and below, redacted
    /// above (a trail is personal data).
    func coordinates(_ l: Location) -> Logger.Metadata {
        guard logLevel <= .debug else { return ["lat": "<redacted>", "lon": "<redacted>"] }
        return ["lat": "\(l.coordinate.latitude)", "lon": "\(l.coordinate.longitude)"]
    }
}
