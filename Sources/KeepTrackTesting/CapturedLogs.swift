import Logging
import Synchronization

/// A log handler that keeps what it is given (swift-log's bootstrap is per process: tests hand
/// their logger this handler instead).
public final class CapturedLogs: LogHandler, @unchecked Sendable {
    public let lines = Mutex<[(level: Logger.Level, message: String, metadata: Logger.Metadata)]>([])
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init() {}

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        lines.withLock { $0.append((event.level, "\(event.message)", event.metadata ?? [:])) }
    }
}
