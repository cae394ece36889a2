import Formats
import NIOCore
import Prometheus
import Synchronization
import TrackStore

/// The live stream's fan-out: every record a store publishes (``RecordFeed``) becomes one text frame
/// `{"type":"record","device":ID,"record":{...}}`, encoded once and queued for each connected client
/// that may see the device (each ``StreamEvent`` too, as `{"type":"event",...}`), each client with a
/// bounded queue (``StreamQueue``) of its own.
///
/// It knows nothing of WebSockets: a connection registers a ``StreamClient`` and writes what it
/// takes from it. Another live view (the OwnTracks Recorder's `/ws/last`) can register clients too,
/// with its own ``Encoder`` of frames.
final class StreamHub: Sendable {
    /// A frame ready to write: the JSON text of one message.
    struct Frame: Sendable {
        let text: ByteBuffer
    }

    /// Turns a batch of stored records into the frames of one kind of client.
    typealias Encoder = @Sendable (TrailRecord) -> Frame?

    struct Limits: Sendable {
        var maxClients: Int
        var maxMessages: Int
        var maxBytes: Int
    }

    let limits: Limits
    let clients = Mutex([Int: StreamClient]())
    let nextID = Atomic<Int>(0)
    let metrics: StreamMetrics

    init(limits: Limits, metrics: StreamMetrics) {
        self.limits = limits
        self.metrics = metrics
    }

    /// A new client that sees `device` only (all devices when `nil`; when `sees` is given too, the
    /// devices it accepts), or `nil` at ``Limits/maxClients``.
    func register(
        device: String?, sees: (@Sendable (String) -> Bool)? = nil, encoding: StreamEncoding = .record,
        onOverflow: @escaping @Sendable (_ writerBusy: Bool) -> Void
    ) -> StreamClient? {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let client = StreamClient(
            id: id, device: device, sees: sees, encoding: encoding, hub: self, onOverflow: onOverflow)
        let admitted = clients.withLock { c -> Bool in
            guard c.count < limits.maxClients else { return false }
            c[id] = client
            metrics.clients.set(Int64(c.count))
            return true
        }
        guard admitted else {
            metrics.refused.increment()
            return nil
        }
        metrics.connected.increment()
        return client
    }

    /// Whether a client is connected (the stream needs the stored records only then).
    var hasClients: Bool { clients.withLock { !$0.isEmpty } }

    func unregister(_ client: StreamClient) {
        clients.withLock { c in
            c.removeValue(forKey: client.id)
            metrics.clients.set(Int64(c.count))
        }
        client.close()
    }

    /// Queues `records` (one stored batch, in storage order) for every client that may see them.
    func publish(_ records: [TrailRecord]) {
        fanOut(records, device: \.device) { $0.encode($1) }
    }

    /// Queues `events` for every client that may see their devices (``StreamEvent``: a new kind of
    /// event needs nothing here).
    func publish(events: [StreamEvent]) {
        fanOut(events, device: \.device) { $0.event($1) }
    }

    /// Queues `items` for every client that may see their devices, each item encoded once per kind of
    /// client, its frames by device: a client takes its device's (a dictionary lookup), those of the
    /// devices it accepts (``StreamClient/sees``, in order), or all of them.
    private func fanOut<Item>(
        _ items: [Item], device: (Item) -> String, encode: (StreamEncoding, Item) -> Frame?
    ) {
        guard !items.isEmpty else { return }
        let all = clients.withLock { Array($0.values) }
        guard !all.isEmpty else { return }
        var encoded: [StreamEncoding: (all: [Frame], devices: [String], byDevice: [String: [Frame]])] = [:]
        for client in all {
            if encoded[client.encoding] == nil {
                var frames: [Frame] = []
                var devices: [String] = []
                var byDevice: [String: [Frame]] = [:]
                for item in items {
                    guard let frame = encode(client.encoding, item) else { continue }
                    frames.append(frame)
                    devices.append(device(item))
                    byDevice[device(item), default: []].append(frame)
                }
                encoded[client.encoding] = (frames, devices, byDevice)
            }
            let batch = encoded[client.encoding]!
            let frames: [Frame]
            if let only = client.device {
                frames = batch.byDevice[only] ?? []
            } else if let sees = client.sees {
                frames = batch.all.indices.filter { sees(batch.devices[$0]) }.map { batch.all[$0] }
            } else {
                frames = batch.all
            }
            if !frames.isEmpty { client.push(frames) }
        }
    }

    /// Closes every client (the server stops).
    func closeAll() {
        let all = clients.withLock { c in
            defer {
                c.removeAll()
                metrics.clients.set(Int64(0))
            }
            return Array(c.values)
        }
        for client in all { client.close() }
    }
}

/// How stored records and events become frames for a kind of client (`nil`: not sent to it).
struct StreamEncoding: Hashable, Sendable {
    let name: String
    let encode: @Sendable (TrailRecord) -> StreamHub.Frame?
    let event: @Sendable (StreamEvent) -> StreamHub.Frame?

    init(
        name: String, event: @escaping @Sendable (StreamEvent) -> StreamHub.Frame? = { _ in nil },
        encode: @escaping @Sendable (TrailRecord) -> StreamHub.Frame?
    ) {
        self.name = name
        self.encode = encode
        self.event = event
    }

    static func == (a: Self, b: Self) -> Bool { a.name == b.name }
    func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// `GET /v1/stream`'s `{"type":"record","device":ID,"record":{...}}`, the record as a trail reads it,
    /// and its `{"type":"event",...}` (``StreamEvent``).
    static let record = StreamEncoding(
        name: "record",
        event: { e in
            var out: [UInt8] = []
            e.appendMessage(to: &out)
            return StreamHub.Frame(text: ByteBuffer(bytes: out))
        }
    ) { r in
        var out: [UInt8] = []
        out.reserveCapacity(300)
        ByteWriting.appendStatic("{\"type\":\"record\",\"device\":", to: &out)
        ByteWriting.appendJSONString(r.device, to: &out)
        ByteWriting.appendStatic(",\"record\":", to: &out)
        JSONBatch.append(r, to: &out)
        out.append(UInt8(ascii: "}"))
        return StreamHub.Frame(text: ByteBuffer(bytes: out))
    }

    /// ``record`` for a share link's stream: the records of its `window` only (a phone's backlog
    /// uploaded while the link is open has points from before it) and the outlier marks of the points
    /// in it (one encoding per window: a record or an event is encoded once for the clients of the
    /// same window).
    static func record(within window: ClosedRange<Double>) -> StreamEncoding {
        StreamEncoding(
            name: "record \(window.lowerBound) \(window.upperBound)",
            event: { e in
                e.within(from: window.lowerBound, to: window.upperBound).flatMap { record.event($0) }
            },
            encode: { r in window.contains(r.time) ? record.encode(r) : nil })
    }
}

/// One connected client of the stream: its filter and its bounded queue. The connection takes
/// frames with ``next()`` until it returns `nil`.
final class StreamClient: Sendable {
    typealias Queue = StreamQueue<StreamHub.Frame, CheckedContinuation<StreamHub.Frame?, Never>>

    let id: Int
    /// The only device it sees, or `nil` for all (or those ``sees`` accepts).
    let device: String?
    /// Which devices it sees when ``device`` is `nil` (`nil`: all): the OwnTracks Recorder's
    /// `/ws/last?user=U`, that user's devices.
    let sees: (@Sendable (String) -> Bool)?
    let encoding: StreamEncoding
    let queue: Mutex<Queue>
    /// Called when the queue overflows, with whether the writer is held up in a write (the client does
    /// not read: the connection is to be closed from outside the writer).
    let onOverflow: @Sendable (_ writerBusy: Bool) -> Void
    /// Whether the connection's writer is in a write.
    let writing = Atomic<Bool>(false)
    let metrics: StreamMetrics

    init(
        id: Int, device: String?, sees: (@Sendable (String) -> Bool)? = nil, encoding: StreamEncoding,
        hub: StreamHub, onOverflow: @escaping @Sendable (_ writerBusy: Bool) -> Void
    ) {
        self.id = id
        self.device = device
        self.sees = sees
        self.encoding = encoding
        self.queue = Mutex(Queue(maxMessages: hub.limits.maxMessages, maxBytes: hub.limits.maxBytes))
        self.onOverflow = onOverflow
        self.metrics = hub.metrics
    }

    func push(_ frames: [StreamHub.Frame]) {
        var resumed: [(CheckedContinuation<StreamHub.Frame?, Never>, StreamHub.Frame)] = []
        var overflowed = false
        queue.withLock { q in
            for frame in frames {
                switch q.push(frame, bytes: frame.text.readableBytes) {
                case .none: break
                case .resume(let waiter, let frame): resumed.append((waiter, frame))
                case .overflow: overflowed = true
                }
                if overflowed { break }
            }
        }
        for (waiter, frame) in resumed { waiter.resume(returning: frame) }
        if overflowed {
            metrics.overflows.increment()
            onOverflow(writing.load(ordering: .acquiring))
        }
    }

    /// The next frame to write, waiting for one; `nil` once the stream ends.
    func next() async -> StreamHub.Frame? {
        await withCheckedContinuation { (c: CheckedContinuation<StreamHub.Frame?, Never>) in
            let action = queue.withLock { $0.next(waiter: c) }
            switch action {
            case .frame(let frame): c.resume(returning: frame)
            case .wait: break
            case .end: c.resume(returning: nil)
            }
        }
    }

    /// Whether the queue overflowed (the connection is closed with 1008).
    var overflowed: Bool {
        queue.withLock { q in
            if case .overflowed = q.state { return true }
            return false
        }
    }

    func close() {
        queue.withLock { $0.close() }?.resume(returning: nil)
    }
}

/// The stream's counters in `/metrics`.
struct StreamMetrics: Sendable {
    let clients: Gauge
    let connected: Counter
    let refused: Counter
    let messages: Counter
    let overflows: Counter
    let followFailures: Counter
    let caughtUp: Counter

    init(registry r: PrometheusCollectorRegistry) {
        func name(_ n: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "keeptrack", subsystem: "serve", metricName: n, unitName: unit,
                helpText: help)
        }
        clients = r.makeGauge(descriptor: name("stream_clients", "", "Live stream clients connected."))
        connected = r.makeCounter(descriptor: name("stream_connections", "total", "Live stream clients accepted."))
        refused = r.makeCounter(
            descriptor: name(
                "stream_refused", "total",
                "Live stream clients refused at the stream client cap."))
        messages = r.makeCounter(descriptor: name("stream_messages_sent", "total", "Live stream messages written."))
        overflows = r.makeCounter(
            descriptor: name(
                "stream_overflow_closes", "total",
                "Live stream clients closed (1008) for not reading: queue overflowed."))
        followFailures = r.makeCounter(
            descriptor: name(
                "stream_store_reconnects", "total",
                "Live stream: the connection following the store (PostgreSQL LISTEN) failed and was reopened."))
        caughtUp = r.makeCounter(
            descriptor: name(
                "stream_caught_up_records", "total",
                "Live stream: records stored while the store was not followed, read after reconnecting."))
    }
}
