import BuildInfo
import Formats
import Geo
import Logging
import MQTT
import ServiceLifecycle
import Synchronization
import TrackStore

/// The endpoint's devices in Home Assistant (`keeptrack serve --homeassistant`): every device the
/// store knows, whatever it uploaded with, becomes a device tracker by MQTT discovery
/// (``HomeAssistantDiscovery``, the topics the uploader's `--format homeassistant` uses), its
/// positions published from the store, its availability the offline detector's (``OfflineWatch``):
/// `offline` once silent past `--offline-after`, `online` with its next record.
///
/// Durable the endpoint's way: positions are already stored, so the relay reads them from the store,
/// woken by its record feed (``RecordFeed``: the handler only notes the device, ingest never waits
/// for the broker), and keeps in the store how far it got with each device (``HomeAssistantStore``):
/// the time of the last position the broker acknowledged. A restart or a broker outage resumes from
/// there; a position acknowledged but not yet noted is sent again after a crash, which a retained
/// attributes message makes harmless. A device the relay never published starts at its latest
/// position when the relay started (a new device: at its first).
///
/// Positions go in each device's trail order; one older than the last published is left out (it
/// would move the tracker back). Locations and heartbeats only: Home Assistant computes zones from
/// the position.
///
/// One connection, QoS 1, clean session; its last will is `offline` on the relay's own availability
/// topic, which every entity also follows (``HomeAssistantDiscovery/Topics/relayAvailability``):
/// while the endpoint is gone, its devices are unavailable. ``HomeAssistantGate`` decides, device by
/// device, when positions may go (announced first, settled, Home Assistant's birth after a
/// reconnection, held while it is offline). A lost connection is opened again after a backoff, as
/// ``MQTTIngest`` does.
public final class HomeAssistantRelay: Service, Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The broker Home Assistant's MQTT integration uses: `mqtt(s)://[user[:password]@]host[:port]`,
        /// then `/PREFIX` when its discovery prefix is not `homeassistant`.
        public var url: String
        /// With `mqtts://`: a PEM file of CA certificates. The default is the system's.
        public var caFile: String?
        /// The client id. The default is `keeptrack-serve-homeassistant`.
        public var clientID = "keeptrack-serve-homeassistant"
        /// The first retry's wait, and the longest wait between connection attempts. The defaults
        /// are 1 s and 30 s.
        public var initialBackoff: Double = 1
        public var maxBackoff: Double = 30
        /// Positions read from the store at a time, per device. The default is 500.
        public var pageSize = 500
        /// Seconds to wait for the broker's acknowledgements. The default is 30.
        public var timeout: Double = 30

        public init(url: String) { self.url = url }
    }

    /// The most positions held from the record feed, and late ones held per device, until published.
    static let maxHeld = 10_000

    /// The relay's own availability topic (no device's object id starts with `_`).
    static let relayTopic = "keeptrack/_serve/availability"

    /// What the callbacks (the record feed, the offline detector, Home Assistant's status) leave for
    /// the relay's task.
    struct Inbox {
        /// Devices with records stored since the task last looked.
        var stored: Set<String> = []
        /// The positions stored, in commit order, at most ``HomeAssistantRelay/maxHeld`` (for the ones
        /// that arrive after newer ones: the store's order is by time).
        var records: [TrailRecord] = []
        /// The detector's latest word on each device (`true`: online).
        var availability: [String: Bool] = [:]
        /// What Home Assistant said on its status topic, in order.
        var heard: [HomeAssistantGate.Status] = []
    }

    let configuration: Configuration
    let endpoint: MQTTEndpoint
    let prefix: String
    let store: any TrackStore
    let watch: OfflineWatch
    let clock: any EpochClock
    let logger: Logger
    let inbox = Mutex(Inbox())
    let signal = Signal()
    /// The record feed's subscription, made at ``init``.
    let feed = Mutex<RecordFeed.Subscription?>(nil)
    /// Set at the server's graceful shutdown.
    let stopping = Atomic<Bool>(false)

    init(
        configuration: Configuration, store: any TrackStore, watch: OfflineWatch, clock: any EpochClock,
        logger: Logger
    ) throws(MQTTError) {
        let endpoint = try Self.endpoint(configuration)
        self.configuration = configuration
        self.endpoint = endpoint
        prefix = endpoint.topic.isEmpty ? HomeAssistantDiscovery.defaultPrefix : endpoint.topic
        self.store = store
        self.watch = watch
        self.clock = clock
        self.logger = logger
        listen()
    }

    /// The broker `configuration` names.
    ///
    /// - Throws: ``MQTTError`` (`.configuration`) for a URL that is not a broker's or a CA file without TLS.
    static func endpoint(_ configuration: Configuration) throws(MQTTError) -> MQTTEndpoint {
        let endpoint = try MQTTEndpoint(parsing: configuration.url)
        if configuration.caFile != nil && !endpoint.tls {
            throw MQTTError(.configuration, "a CA file goes with mqtts:// (TLS), not mqtt://")
        }
        return endpoint
    }

    /// The cursors' key in the store: the broker and the discovery prefix.
    var target: String { "\(endpoint)/\(prefix)" }

    func topics(_ device: String) -> HomeAssistantDiscovery.Topics {
        var t = HomeAssistantDiscovery.Topics(device: device, prefix: prefix)
        t.relayAvailability = Self.relayTopic
        return t
    }

    /// Listens to the record feed and the offline detector from the start (before the server takes
    /// its first record): what they say waits in ``inbox``.
    private func listen() {
        let subscription = store.storedRecords.subscribe { [self] records in
            inbox.withLock { i in
                for r in records {
                    i.stored.insert(r.device)
                    if r.valid, r.kind == .location || r.kind == .heartbeat, i.records.count < Self.maxHeld {
                        i.records.append(r)
                    }
                }
            }
            signal.fire()
        }
        watch.observe { [self] events in
            inbox.withLock { i in
                for e in events {
                    switch e.kind {
                    case .online: i.availability[e.device] = true
                    case .offline: i.availability[e.device] = false
                    default: break
                    }
                }
            }
            signal.fire()
        }
        feed.withLock { $0 = subscription }
    }

    public func run() async throws {
        defer { if let subscription = feed.withLock({ $0 }) { store.storedRecords.unsubscribe(subscription) } }
        // A graceful shutdown lets the publishing in progress end (its acknowledgements, its cursor),
        // then the relay says offline; a cancellation stops at once.
        await withGracefulShutdownHandler { [self] in
            guard var state = await load() else { return }
            var failures = 0
            while !stopped {
                do {
                    try await connected(&state)
                } catch {
                    guard !stopped else { return }
                    logger.warning(
                        "Home Assistant: MQTT connection failed or lost", metadata: ["reason": "\(error)"])
                }
                // Counted from the last connection that worked.
                if state.wasConnected { failures = 0 }
                state.wasConnected = false
                failures += 1
                // Credentials are a setting to fix: tried again at the longest backoff.
                let pause =
                    state.lastError?.code == .credentials
                    ? configuration.maxBackoff
                    : Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
                        .delay(failures: failures)
                await signal.wait(until: clock.now.advanced(by: .seconds(pause)), on: clock)
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .releasing)
            signal.fire()
        }
    }

    /// Whether the server stops (gracefully, or cancelled).
    var stopped: Bool { stopping.load(ordering: .acquiring) || Task.isCancelled }

    /// Each device's cursor and latest position, read once (again after a wait while the store fails).
    func load() async -> RelayState? {
        var failures = 0
        while !stopped {
            do {
                let cursors = try await store.homeAssistantCursors(target: target)
                let latest = try await store.latest(device: nil)
                var state = RelayState(cursors: cursors, gate: HomeAssistantGate())
                // What the feed brought since the relay subscribed is new: from its first position on.
                let fed = inbox.withLock { i in
                    i.records.reduce(into: [String: Double]()) {
                        $0[$1.device] = min($0[$1.device] ?? $1.time, $1.time)
                    }
                }
                for p in latest {
                    state.known.insert(p.device)
                    state.lastReceived[p.device] = p.lastReceived
                    if cursors[p.device] == nil { state.start[p.device] = min(p.time, fed[p.device] ?? p.time) }
                }
                state.known.formUnion(cursors.keys)
                return state
            } catch {
                failures += 1
                logger.error(
                    "Home Assistant: cannot read the relay's cursors from the store",
                    metadata: ["error.type": "\(type(of: error))"])
                let pause = Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
                    .delay(failures: failures)
                await signal.wait(until: clock.now.advanced(by: .seconds(pause)), on: clock)
            }
        }
        return nil
    }

    /// One connection: opened, subscribed to Home Assistant's status, the relay said online, then
    /// devices relayed until the connection is lost (thrown) or the server stops (the relay
    /// says offline and leaves).
    func connected(_ state: inout RelayState) async throws {
        var options = MQTTConnection.Options(clientID: configuration.clientID)
        options.caFile = configuration.caFile
        options.will = MQTTMessage(topic: Self.relayTopic, text: HomeAssistantDiscovery.offline, retain: true)
        let statusTopic = "\(prefix)/status"
        let connection: MQTTConnection
        do {
            connection = try MQTTConnection(endpoint: endpoint, options: options) { [self] topic, payload in
                guard topic == statusTopic else { return }
                let status = HomeAssistantGate.Status(payload: payload)
                guard status != .unknown else { return }
                inbox.withLock { $0.heard.append(status) }
                signal.fire()
            }
        } catch {
            state.lastError = error
            throw error
        }
        defer { state.published = [:] }
        do {
            try await connection.connect()
            try await connection.subscribe(statusTopic, qos: 1)
            try await publish(
                [MQTTMessage(topic: Self.relayTopic, text: HomeAssistantDiscovery.online, retain: true)], on: connection
            )
        } catch {
            state.lastError = error as? MQTTError
            await connection.close()
            throw error
        }
        state.lastError = nil
        state.wasConnected = true
        let now = clock.now.secondsSince1970
        state.gate.connected(now: now)
        for d in state.gates.keys { state.gates[d]!.connected(now: now) }
        // Every device announced on each connection, with its availability now.
        state.work.formUnion(state.known)
        logger.info("Home Assistant: connected", metadata: ["broker": "\(endpoint)", "prefix": "\(prefix)"])
        do {
            try await relay(&state, on: connection)
        } catch {
            state.lastError = error as? MQTTError
            await connection.close()
            throw error
        }
        // The server stops: the devices are no longer relayed. Acknowledged before the
        // connection closes (in a task of its own: this one is cancelled), a few seconds at most.
        if let mid = try? connection.publish(
            MQTTMessage(topic: Self.relayTopic, text: HomeAssistantDiscovery.offline, retain: true))
        {
            _ = await Task { await connection.acknowledgements(of: [mid], timeout: 5) }.value
        }
        await connection.close()
    }

    /// Relays until the server stops; throws when the connection is lost.
    func relay(_ state: inout RelayState, on connection: MQTTConnection) async throws {
        while !stopped {
            if let lost = connection.failure { throw lost }
            let taken = inbox.withLock { i -> Inbox in
                defer { i = Inbox() }
                return i
            }
            for status in taken.heard {
                state.gate.heard(status)
                for d in state.gates.keys { state.gates[d]!.heard(status) }
                // Home Assistant (re)started: announce every device again.
                if status == .online { state.work.formUnion(state.known) }
            }
            state.known.formUnion(taken.stored)
            state.work.formUnion(taken.stored)
            // Positions older than their device's cursor (sent concurrently, or a backlog after newer
            // fixes): the store read after the cursor will not find them; published from the feed.
            for r in taken.records {
                guard let cursor = state.cursors[r.device], r.time <= cursor,
                    !(state.recent[r.device]?.contains(r.time) ?? false),
                    state.late[r.device, default: []].count < Self.maxHeld
                else { continue }
                state.late[r.device, default: []].append(r)
            }
            state.recent = [:]
            for (d, online) in taken.availability {
                state.availability[d] = online
                state.known.insert(d)
                state.work.insert(d)
            }
            var wake: Double?
            var more = false
            for device in state.work.sorted() {
                if stopped { return }
                let now = clock.now.secondsSince1970
                var gate = state.gates[device] ?? state.gate
                switch gate.decide(now: now) {
                case .announce:
                    try await announce(device, &state, on: connection)
                    gate.announced(now: clock.now.secondsSince1970)
                    state.gates[device] = gate
                    if case .wait(let until) = gate.decide(now: clock.now.secondsSince1970), let until {
                        wake = min(wake ?? until, until)
                    }
                case .wait(let until):
                    if let until { wake = min(wake ?? until, until) }
                case .publish:
                    let online = availability(of: device, state)
                    if state.published[device] != online {
                        try await publish([availabilityMessage(device, online)], on: connection)
                        state.published[device] = online
                    }
                    try await late(device, &state, on: connection)
                    switch try await positions(device, &state, on: connection) {
                    case .done: state.work.remove(device)
                    case .more: more = true
                    case .storeFailed:
                        let later = clock.now.secondsSince1970 + configuration.initialBackoff
                        wake = min(wake ?? later, later)
                    }
                }
            }
            // More pages to send: on at once.
            if more { continue }
            await signal.wait(until: wake.map { EpochInstant(secondsSince1970: $0) }, on: clock)
        }
    }

    /// The device's availability: the detector's, else (a device it has not seen yet) whether it sent
    /// within `--offline-after`, else online (it has just sent).
    func availability(of device: String, _ state: RelayState) -> Bool {
        if let known = state.availability[device] ?? watch.isOnline(device) { return known }
        if let received = state.lastReceived[device] {
            let after = watch.detector.withLock { $0.after }
            return EpochInstant(secondsSince1970: received).advanced(by: after) > clock.now
        }
        return true
    }

    func availabilityMessage(_ device: String, _ online: Bool) -> MQTTMessage {
        MQTTMessage(
            topic: topics(device).availability,
            text: online ? HomeAssistantDiscovery.online : HomeAssistantDiscovery.offline, retain: true)
    }

    /// The device's discovery configurations and its availability, retained, acknowledged.
    func announce(_ device: String, _ state: inout RelayState, on connection: MQTTConnection) async throws {
        let t = topics(device)
        var d = HomeAssistantDiscovery.Device(name: device, softwareVersion: BuildInfo.version)
        d.model = "keeptrack serve"
        let online = availability(of: device, state)
        try await publish(
            [
                MQTTMessage(
                    topic: t.trackerConfig, payload: HomeAssistantDiscovery.trackerConfig(d, topics: t), retain: true),
                MQTTMessage(
                    topic: t.speedConfig, payload: HomeAssistantDiscovery.speedSensorConfig(d, topics: t), retain: true),
                availabilityMessage(device, online),
            ], on: connection)
        state.published[device] = online
        logger.debug("Home Assistant: announced", metadata: ["device": "\(device)"])
    }

    /// The device's late positions (older than its cursor), in time order, then its latest again, so
    /// that the tracker ends where the device is; at most one copy of each. Lost with a connection
    /// that fails before their acknowledgement (they are not in the store's order).
    func late(_ device: String, _ state: inout RelayState, on connection: MQTTConnection) async throws {
        guard let late = state.late.removeValue(forKey: device), !late.isEmpty else { return }
        let t = topics(device)
        var messages = late.sorted { $0.time < $1.time }.map {
            MQTTMessage(topic: t.attributes, payload: HomeAssistantDiscovery.attributes($0), retain: true)
        }
        if let latest = state.lastPublished[device] {
            messages.append(
                MQTTMessage(topic: t.attributes, payload: HomeAssistantDiscovery.attributes(latest), retain: true))
        }
        try await publish(messages, on: connection)
        logger.debug(
            "Home Assistant: published late positions", metadata: ["device": "\(device)", "positions": "\(late.count)"])
    }

    /// One page of the device's positions after its cursor, published; the cursor advanced to the
    /// last acknowledged and noted in the store.
    func positions(_ device: String, _ state: inout RelayState, on connection: MQTTConnection) async throws -> Progress
    {
        let cursor = state.cursors[device]
        // A microsecond past the cursor (PostgreSQL keeps times to the microsecond).
        let from = cursor.map { $0 + 1e-6 } ?? state.start[device] ?? -.infinity
        let page: (records: [TrailRecord], next: TrailCursor?)
        do {
            page = try await store.trail(device: device, from: from, after: nil, limit: configuration.pageSize)
        } catch {
            logger.error(
                "Home Assistant: cannot read a device's positions",
                metadata: ["device": "\(device)", "error.type": "\(type(of: error))"])
            return .storeFailed
        }
        let t = topics(device)
        var sent: [(mid: Int32, record: TrailRecord)] = []
        var last = cursor ?? -.infinity
        for r in page.records where r.time > last && (r.kind == .location || r.kind == .heartbeat) {
            let mid = try connection.publish(
                MQTTMessage(topic: t.attributes, payload: HomeAssistantDiscovery.attributes(r), retain: true))
            sent.append((mid, r))
            last = r.time
        }
        let acknowledged = await connection.acknowledgements(of: sent.map(\.mid), timeout: configuration.timeout)
        let published = sent.prefix { acknowledged.contains($0.mid) }.map(\.record)
        for r in published { state.recent[device, default: []].insert(r.time) }
        if let newest = published.last { state.lastPublished[device] = newest }
        var reached = published.last?.time
        if sent.isEmpty, let lastRecord = page.records.last, lastRecord.time > (cursor ?? -.infinity) {
            // Nothing to publish in the page (other kinds, or older): past it.
            reached = lastRecord.time
        }
        if let reached {
            state.cursors[device] = reached
            state.start[device] = nil
            do {
                // In a task of its own: a server stopping cancels this one, and the cursor must land.
                let (store, target) = (self.store, self.target)
                try await Task { try await store.setHomeAssistantCursors([device: reached], target: target) }.value
            } catch {
                // Kept in memory; a restart sends the positions again (retained: harmless).
                logger.warning(
                    "Home Assistant: cannot note the relay's cursor in the store",
                    metadata: ["device": "\(device)", "error.type": "\(type(of: error))"])
            }
            logger.debug("Home Assistant: published", metadata: ["device": "\(device)", "positions": "\(sent.count)"])
        }
        guard acknowledged.count == sent.count else {
            if let lost = connection.failure { throw lost }
            throw MQTTError(
                .disconnected,
                "no PUBACK from the MQTT broker \(endpoint) for \(sent.count - acknowledged.count) of "
                    + "\(sent.count) positions within \(Int(configuration.timeout)) s")
        }
        return page.next == nil ? .done : .more
    }

    /// Where a device's positions are after ``positions(_:_:on:)``.
    enum Progress {
        /// All published.
        case done
        /// A page published, more to read.
        case more
        /// The store failed: tried again after a wait.
        case storeFailed
    }

    /// Publishes `messages` and waits for their acknowledgements.
    func publish(_ messages: [MQTTMessage], on connection: MQTTConnection) async throws {
        var mids: [Int32] = []
        for m in messages { mids.append(try connection.publish(m)) }
        let acknowledged = await connection.acknowledgements(of: mids, timeout: configuration.timeout)
        guard acknowledged.count == mids.count else {
            if let lost = connection.failure { throw lost }
            if Task.isCancelled { throw CancellationError() }
            throw MQTTError(
                .disconnected,
                "no PUBACK from the MQTT broker \(endpoint) within \(Int(configuration.timeout)) s")
        }
    }
}

/// The relay's task's own state, across connections.
struct RelayState {
    /// The last position the broker acknowledged, by device (as in the store).
    var cursors: [String: Double]
    /// Where a device never published starts (its latest position when the relay started).
    var start: [String: Double] = [:]
    /// When each device known at the start last sent.
    var lastReceived: [String: Double] = [:]
    /// The gate of a device not announced on this connection yet (fed the connection's events).
    var gate: HomeAssistantGate
    /// Each announced device's gate.
    var gates: [String: HomeAssistantGate] = [:]
    /// Every device seen.
    var known: Set<String> = []
    /// Devices with something to do.
    var work: Set<String> = []
    /// The detector's latest word per device (`true`: online).
    var availability: [String: Bool] = [:]
    /// Positions older than the cursor, from the feed, to publish (``HomeAssistantRelay/late(_:_:on:)``).
    var late: [String: [TrailRecord]] = [:]
    /// The times published from the store since the feed's records were last taken (those are not late).
    var recent: [String: Set<Double>] = [:]
    /// The last position published of each device (sent again after late ones).
    var lastPublished: [String: TrailRecord] = [:]
    /// The availability published on this connection, by device.
    var published: [String: Bool] = [:]
    /// Why the last connection failed.
    var lastError: MQTTError?
    /// Whether the last connection was made (the backoff starts again after it).
    var wasConnected = false
}
