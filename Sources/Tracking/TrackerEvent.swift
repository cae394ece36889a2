import Formats
import Geo
import Lifecycle
import LocationService
import Synchronization
import SystemIO
import Upload

#if canImport(Glibc)
    import Glibc
#endif

/// What a running ``Tracker`` reports, in order: the location service's events, the lifecycle's
/// transitions, what the source says about itself, and what the outbox's caps removed.
public enum TrackerEvent: Sendable {
    /// A location, significant change, region event, pause or error from the location service.
    case location(LocationEvent)
    /// A lifecycle transition or expiring task; for transitions into the background, the time left
    /// then (`nil` when unbounded).
    case lifecycle(AppLifecycle.Event, backgroundTimeRemaining: Double?)
    /// The source gave up or took back its hold on the receiver (`released`, `acquired`).
    case source(SourceEvent)
    /// The outbox's count or age cap removed records to make room.
    case outboxEvicted(Outbox.Eviction)
    /// The latest location recorded again while the device does not move, its timestamp the time
    /// now (``Tracker/Configuration/heartbeat``).
    case heartbeat(Location)
}

/// Where a tracker's events go: standard output as JSON Lines (``JSONLinesSink``), a test's array,
/// a program's own handler. Called from the tracker's loop only, in order.
public protocol TrackerEventSink: Sendable {
    func receive(_ event: TrackerEvent) throws
    /// Everything received so far is written out (called when the input ends or pauses).
    func flush() throws
}

extension TrackerEventSink {
    public func flush() throws {}
}

/// Discards every event (a tracker run only for its uploads).
public struct DiscardingSink: TrackerEventSink {
    public init() {}
    public func receive(_ event: TrackerEvent) throws {}
}

/// Calls a closure for every event.
public struct ClosureSink: TrackerEventSink {
    let body: @Sendable (TrackerEvent) throws -> Void
    public init(_ body: @escaping @Sendable (TrackerEvent) throws -> Void) { self.body = body }
    public func receive(_ event: TrackerEvent) throws { try body(event) }
}

/// Writes events as JSON Lines (`EventJSON`'s schema) to a file descriptor: at once when
/// `lineBuffered` (live tracking), in 64 KiB blocks otherwise (a fast replay). When the descriptor
/// is `/dev/null` (a service whose unit discards standard output) nobody reads the lines, and none
/// is formatted.
public final class JSONLinesSink: TrackerEventSink {
    let output: Mutex<OutputBuffer>
    let lineBuffered: Bool
    /// Whether the descriptor is `/dev/null`: events are dropped unformatted.
    public let discards: Bool

    /// - Parameters:
    ///   - fd: where to write. The default is standard output.
    ///   - lineBuffered: flush after every event. The default is `true`.
    public init(fd: Int32 = 1, lineBuffered: Bool = true) {
        output = Mutex(OutputBuffer(fd: fd))
        self.lineBuffered = lineBuffered
        discards = Self.isDevNull(fd)
    }

    /// Whether `fd` is the null device (character device 1:3 on Linux).
    public static func isDevNull(_ fd: Int32) -> Bool {
        var descriptor = stat(), null = stat()
        guard fstat(fd, &descriptor) == 0, stat("/dev/null", &null) == 0 else { return false }
        return descriptor.st_mode & S_IFMT == S_IFCHR && descriptor.st_rdev == null.st_rdev
    }

    public func receive(_ event: TrackerEvent) throws {
        if discards { return }
        try output.withLock { out throws(TrackerError) in
            guard Self.append(event, to: &out.bytes) else { return }
            try out.endRecord(lineBuffered: lineBuffered)
        }
    }

    public func flush() throws {
        try output.withLock { out throws(TrackerError) in try out.flush() }
    }

    /// Appends `event`'s line; `false` when the event has none (a budget refresh, a not-running
    /// transition).
    public static func append(_ event: TrackerEvent, to out: inout [UInt8]) -> Bool {
        switch event {
        case .location(let e):
            switch e {
            case .location(let l): EventJSON.appendLocation("location", l, to: &out)
            case .significantChange(let l): EventJSON.appendLocation("significant-change", l, to: &out)
            case .paused(let l): EventJSON.appendTimed("updates-paused", time: l.timestamp, to: &out)
            case .resumed(let l): EventJSON.appendTimed("updates-resumed", time: l.timestamp, to: &out)
            case .region(let r, _):
                switch r {
                case .enter(let id, let t): EventJSON.appendRegion("enter", id: id, time: t, to: &out)
                case .exit(let id, let t): EventJSON.appendRegion("exit", id: id, time: t, to: &out)
                case .dwell(let id, let t): EventJSON.appendRegion("dwell", id: id, time: t, to: &out)
                case .state(let id, let state):
                    EventJSON.appendStringObject(["event": "state", "region": id, "state": state.rawValue], to: &out)
                }
            case .visit(let v, let at):
                EventJSON.appendVisit(
                    time: at.timestamp, arrival: v.arrival, departure: v.departure,
                    coordinate: v.coordinate, horizontalAccuracy: v.horizontalAccuracy, to: &out)
            case .trip(let t, _):
                EventJSON.appendTrip(
                    start: t.start, end: t.end, distance: t.distance, maximumSpeed: t.maximumSpeed,
                    from: t.startCoordinate, to: t.endCoordinate, to: &out)
            case .error(let error):
                EventJSON.appendStringObject(
                    ["event": "error", "code": error.code.rawValue, "reason": error.reason],
                    to: &out)
            }
        case .lifecycle(let e, let remaining):
            switch e {
            case .transition(let t):
                let name: StaticString
                switch t.to {
                case .active: name = "active"
                case .inactive: name = "inactive"
                case .background: name = t.from == .suspended ? "resumed" : "background"
                case .suspended: name = "suspended"
                case .terminated: name = "terminated"
                case .notRunning: return false
                }
                EventJSON.appendLifecycle(
                    name, time: t.time, reason: t.reason.description,
                    backgroundTimeRemaining: t.to == .background ? .some(remaining) : nil,
                    to: &out)
            case .expiring(_, let task, let time):
                EventJSON.appendExpiring(task: task, time: time, to: &out)
            case .refreshed:
                return false
            }
        case .source(let e):
            EventJSON.appendStringObject(
                [
                    "event": "source", "kind": e.kind.rawValue, "source": e.source,
                    "message": e.message,
                ], to: &out)
        case .outboxEvicted(let e):
            EventJSON.appendOutboxEvicted(count: e.total, byCount: e.byCount, byAge: e.byAge, to: &out)
        case .heartbeat(let l):
            EventJSON.appendLocation("heartbeat", l, to: &out)
        }
        return true
    }
}

/// Buffered writes to a file descriptor (standard output by default), flushed in 64 KiB blocks.
public struct OutputBuffer: Sendable {
    public var bytes: [UInt8] = []
    public let fd: Int32

    public init(fd: Int32 = 1) {
        self.fd = fd
        bytes.reserveCapacity(80 * 1024)
    }

    public mutating func flushIfNeeded() throws(TrackerError) {
        if bytes.count >= 64 * 1024 { try flush() }
    }

    public mutating func flush() throws(TrackerError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw TrackerError(errno: errno)
            }
            done += n
        }
        bytes.removeAll(keepingCapacity: true)
    }

    /// Ends a record: flushed at once for live output, in 64 KiB blocks otherwise.
    public mutating func endRecord(lineBuffered: Bool) throws(TrackerError) {
        if lineBuffered { try flush() } else { try flushIfNeeded() }
    }

    /// Appends text as it is.
    public mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// Appends a quoted, escaped JSON string.
    public mutating func appendJSONString(_ text: String) { ByteWriting.appendJSONString(text, to: &bytes) }

    /// Appends a one-line JSON object whose values are all strings.
    public mutating func appendStringObject(_ pairs: KeyValuePairs<StaticString, String>) {
        EventJSON.appendStringObject(pairs, to: &bytes)
    }
}

/// Passes every event on to `base`, and gives back the clean pages start-up touched
/// (`CleanPages.release()`) when the tracker settles: at its first location, and whenever
/// the app is suspended. A long-running `keeptrack track` then keeps its working set resident,
/// not the code that parsed its arguments and configuration.
public final class CleanPagesSink<Base: TrackerEventSink>: TrackerEventSink {
    public let base: Base
    private let located = Atomic<Bool>(false)
    /// How many times pages were given back, and how many bytes.
    public let releases = Mutex<(count: Int, bytes: Int)>((0, 0))

    public init(_ base: Base) { self.base = base }

    public func receive(_ event: TrackerEvent) throws {
        try base.receive(event)
        switch event {
        case .location(.location), .location(.significantChange):
            if !located.load(ordering: .relaxed), !located.exchange(true, ordering: .relaxed) { release() }
        case .lifecycle(.transition(let transition), _) where transition.to == .suspended:
            release()
        default:
            break
        }
    }

    public func flush() throws { try base.flush() }

    private func release() {
        let bytes = CleanPages.release()
        releases.withLock { $0 = ($0.count + 1, $0.bytes + bytes) }
    }
}
