/// Something that happened to a fix source other than a fix: connections, losses, errors.
///
/// Events carry no coordinates; their `message` is safe to log at any level.
public struct SourceEvent: Hashable, Sendable, CustomStringConvertible {
    /// What happened.
    public enum Kind: String, Hashable, Sendable, Codable {
        /// The source is delivering (gpsd connected and watching, device opened, log opened).
        case connected
        /// The source was lost (gpsd went away, device unplugged); it will retry.
        case disconnected
        /// A problem the source cannot fix by itself (permission denied, no such device, bad data).
        case error
        /// The source gave up its hold on the receiver on request (gpsd watch released).
        case released
        /// The source took its hold back on request.
        case acquired
        /// A replayed log ended (and will start again when looping).
        case endOfInput
    }

    public var kind: Kind
    /// The source's name: `gpsd 127.0.0.1:2947`, `/dev/ttyACM0`, `log walk.nmea`.
    public var source: String
    /// A sentence a user can act on.
    public var message: String
    /// The source's typed error, for ``Kind/error`` and ``Kind/disconnected`` (the module's error
    /// struct: `GPSInputError` for gpsd, serial devices and logs); ``message`` is its description.
    public var error: (any Error)?

    public init(_ kind: Kind, source: String, message: String) {
        self.kind = kind
        self.source = source
        self.message = message
    }

    /// An event about a failure: its message is the error's description.
    public init(_ kind: Kind, source: String, error: any Error) {
        self.init(kind, source: source, message: "\(error)")
        self.error = error
    }

    /// Equal when of the same kind and source, saying the same (the error is compared by its description).
    public static func == (a: Self, b: Self) -> Bool {
        a.kind == b.kind && a.source == b.source && a.message == b.message
            && a.error.map { "\($0)" } == b.error.map { "\($0)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(source)
        hasher.combine(message)
    }

    public var description: String { "\(source): \(kind.rawValue): \(message)" }
}

/// What a fix source delivers: fixes, and events about the source itself.
public enum SourceElement: Hashable, Sendable {
    case fix(Fix)
    case event(SourceEvent)

    /// The fix, if this element is one.
    public var fix: Fix? {
        if case .fix(let f) = self { return f }
        return nil
    }

    /// The event, if this element is one.
    public var event: SourceEvent? {
        if case .event(let e) = self { return e }
        return nil
    }
}

/// A stream of fixes and source events, whatever the receiver: gpsd, a serial device or a log.
///
/// The location layer consumes this protocol and never learns where fixes came from.
public protocol FixSource: AsyncSequence, Sendable where Element == SourceElement, Failure == Never {
    /// A human-readable name for messages (no coordinates).
    var name: String { get }

    /// The executor a consumer should read this source on, `nil` for any: a source read by a
    /// thread of its own (gpsd) runs the consumer's tasks on that thread, so that an element
    /// costs no thread hand-off. Consumers run their loop inside
    /// `withTaskExecutorPreference(source.preferredExecutor)`. The default is `nil`.
    var preferredExecutor: (any TaskExecutor)? { get }
}

extension FixSource {
    public var preferredExecutor: (any TaskExecutor)? { nil }
}
