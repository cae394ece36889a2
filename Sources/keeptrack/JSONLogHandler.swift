import Formats
import Geo
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Logs for journald, Loki and other collectors (`--log-format json`): one JSON object per record
/// on standard error, `{"time":"...","level":"warning","label":"keeptrack.upload","message":"...",
/// "metadata":{...}}`.
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
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let out = Self.line(level: event.level, label: label, message: event.message.description, metadata: all)
        _ = out.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// One record as its line: `{"time":"...","level":"...","label":"...","message":"...","metadata":{...}}`.
    static func line(
        level: Logger.Level, label: String, message: String, metadata: Logger.Metadata = [:]
    ) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"time\":\"", to: &out)
        ISOTime.append(WallClock.seconds(), to: &out)
        ByteWriting.appendStatic("\",\"level\":\"", to: &out)
        out.append(contentsOf: level.rawValue.utf8)
        ByteWriting.appendStatic("\",\"label\":", to: &out)
        ByteWriting.appendJSONString(label, to: &out)
        ByteWriting.appendStatic(",\"message\":", to: &out)
        ByteWriting.appendJSONString(message, to: &out)
        if !metadata.isEmpty {
            ByteWriting.appendStatic(",\"metadata\":{", to: &out)
            for (i, (k, v)) in metadata.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                ByteWriting.appendJSONString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                ByteWriting.appendJSONString(v.description, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        ByteWriting.appendStatic("}\n", to: &out)
        return out
    }
}

extension JSONLogHandler {
    /// Bootstraps swift-log for the process: every logger writes to standard error (standard
    /// output carries the data), as text or as one JSON object per line, from `level` up.
    static func bootstrapStandardError(level: Logger.Level, json: Bool) {
        standardErrorIsJSON.store(json, ordering: .relaxed)
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, logLevel: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
