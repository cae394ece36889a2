import CMosquitto
import Geo
import Synchronization
import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to an MQTT broker through libmosquitto's threaded loop: connect, publish at
/// QoS 0/1 with several messages in flight, learn which were acknowledged (PUBACK), subscribe, and
/// learn when the connection is lost. A lost or failed connection is not re-opened: close it and
/// make a new one (the caller decides when, with its backoff), so nothing the library queued for a
/// dead connection is sent behind the caller's back.
///
/// libmosquitto calls back on its own thread (`mosquitto_loop_start`). The callbacks only update a
/// `Mutex`-guarded state and fire a ``Signal``; tasks wait on that signal (one waiting task at a
/// time: the connection's owner). Messages received are handed to `onMessage` on the library's
/// thread, and their PUBACK leaves only once it returns: a handler that stores synchronously
/// acknowledges only what it stored.
public final class MQTTConnection: Sendable {
    public struct Options: Sendable {
        /// The client id. Two connections with one id push each other off the broker.
        public var clientID: String
        /// Whether the broker forgets our subscriptions and queued messages when we leave. The
        /// default is true; a subscriber that must not miss messages sent while it is away uses
        /// false with a fixed ``clientID``.
        public var cleanSession = true
        /// Seconds between keep-alive pings. The default is 60.
        public var keepAlive = 60
        /// Publishes sent before their PUBACK arrives. The default is 100.
        public var maxInflight = 100
        /// With `mqtts://`: a PEM file of CA certificates; `nil` (the default) trusts the system's
        /// (`/etc/ssl/certs`).
        public var caFile: String?
        /// How long the connection may take, to its CONNACK. The default is 10 s.
        public var connectTimeout: Double = 10
        /// The last will: what the broker publishes for us when the connection ends without our
        /// DISCONNECT (a crash, a kill, a lost network, a keep-alive missed). The default is none.
        public var will: MQTTMessage?

        public init(clientID: String) { self.clientID = clientID }
    }

    /// What the callbacks saw.
    struct State {
        enum Phase: Equatable {
            case new, connecting, connected
            case failed(MQTTError)
        }
        var phase = Phase.new
        /// Mids acknowledged (PUBACK for QoS 1, sent for QoS 0) and not yet claimed by a waiter.
        var acknowledged: Set<Int32> = []
        /// Mids of subscriptions the broker answered.
        var subscribed: Set<Int32> = []
    }

    /// The part the C callbacks reach through libmosquitto's user data pointer.
    final class Events: Sendable {
        let state = Mutex(State())
        let signal = Signal()
        let endpoint: MQTTEndpoint
        let onMessage: (@Sendable (_ topic: String, _ payload: [UInt8]) -> Void)?

        init(endpoint: MQTTEndpoint, onMessage: (@Sendable (String, [UInt8]) -> Void)?) {
            self.endpoint = endpoint
            self.onMessage = onMessage
        }

        static func from(_ raw: UnsafeMutableRawPointer?) -> Events {
            Unmanaged<Events>.fromOpaque(raw!).takeUnretainedValue()
        }

        func update(_ change: (inout State) -> Void) {
            state.withLock { change(&$0) }
            signal.fire()
        }

        func connected(_ rc: Int32) {
            update { s in
                if rc == 0 {
                    s.phase = .connected
                    return
                }
                let reason = String(cString: keeptrack_mosquitto_connack_string(rc))
                // 4: bad user name or password; 5: not authorised (MQTT 3.1.1 CONNACK codes).
                s.phase =
                    rc == 4 || rc == 5
                    ? .failed(
                        MQTTError(
                            .credentials,
                            "the MQTT broker \(endpoint) refuses our credentials (\(reason)): "
                                + "check the user and password in the mqtt:// URL"))
                    : .failed(MQTTError(.refused, "the MQTT broker \(endpoint) refused the connection (\(reason))"))
            }
        }

        func disconnected(_ rc: Int32, errno e: Int32) {
            update { s in
                if case .failed = s.phase { return }
                let why =
                    rc == 0
                    ? "we closed it"
                    : rc == MOSQ_ERR_ERRNO.rawValue && e != 0
                        ? errnoText(e)
                        : String(cString: keeptrack_mosquitto_strerror(rc))
                s.phase =
                    s.phase == .connected
                    ? .failed(MQTTError(.disconnected, "lost the connection to the MQTT broker \(endpoint): \(why)"))
                    : .failed(MQTTError(.unreachable, "cannot connect to the MQTT broker \(endpoint): \(why)"))
            }
        }
    }

    /// libmosquitto's handle, used from any thread (its calls lock; the loop thread runs the socket).
    struct Handle: @unchecked Sendable {
        let raw: OpaquePointer
    }

    public let endpoint: MQTTEndpoint
    public let options: Options
    /// The clock the protocol's timeouts are on (the connection's, the SUBACK's, the PUBACKs'). Passed
    /// to a generic call as `self.clock`: Glibc's `clock()` beside it keeps the bare name from opening.
    let clock: any EpochClock
    let handle: Handle
    let events: Events
    /// Whether the loop thread runs (then `close` stops it) and whether the handle was destroyed.
    let lifecycle = Mutex<(started: Bool, closed: Bool)>((false, false))

    /// libmosquitto opened and initialised, once per process; or why it cannot be.
    static let library: Result<Void, MQTTError> = {
        var message = [CChar](repeating: 0, count: 512)
        guard keeptrack_mosquitto_load(&message, message.count) == 0 else {
            let why = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            return .failure(
                MQTTError(.configuration, "MQTT needs libmosquitto (Debian: apt-get install libmosquitto1): \(why)"))
        }
        keeptrack_mosquitto_lib_init()
        return .success(())
    }()

    /// - Parameters:
    ///   - clock: the clock the protocol's timeouts are on. The default is the wall clock.
    ///   - onMessage: called on libmosquitto's thread for each message received; the message's
    ///     PUBACK (QoS 1) is sent once it returns.
    /// - Throws: ``MQTTError`` (`.configuration`) for TLS files or options libmosquitto refuses.
    public init(
        endpoint: MQTTEndpoint, options: Options, clock: any EpochClock = WallClock(),
        onMessage: (@Sendable (_ topic: String, _ payload: [UInt8]) -> Void)? = nil
    ) throws(MQTTError) {
        try Self.library.get()
        self.endpoint = endpoint
        self.options = options
        self.clock = clock
        let events = Events(endpoint: endpoint, onMessage: onMessage)
        self.events = events
        guard
            let raw = keeptrack_mosquitto_new(
                options.clientID, options.cleanSession, Unmanaged.passUnretained(events).toOpaque())
        else {
            throw MQTTError(.configuration, "cannot create an MQTT client with id '\(options.clientID)'")
        }
        handle = Handle(raw: raw)
        // From here on every stored property is set: a throw runs `deinit`, whose `closeNow`
        // destroys the handle (destroying it here too would free it twice).
        func check(_ rc: Int32, _ what: String, caFile: String? = nil) throws(MQTTError) {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                let reason = String(cString: keeptrack_mosquitto_strerror(rc))
                throw MQTTError(.configuration, "\(what): \(reason)", caFile: caFile)
            }
        }
        try check(
            keeptrack_mosquitto_int_option(
                raw, MOSQ_OPT_SEND_MAXIMUM, Int32(clamping: max(1, min(65535, options.maxInflight)))),
            "the number of messages in flight")
        // The loop thread must not reconnect by itself: the owner closes a lost connection and opens a
        // new one after its backoff.
        try check(keeptrack_mosquitto_reconnect_delay_set(raw, 86_400, 86_400, false), "the reconnect delay")
        if let user = endpoint.username {
            try check(keeptrack_mosquitto_username_pw_set(raw, user, endpoint.password), "the user name")
        }
        if let will = options.will {
            try check(
                will.payload.withUnsafeBytes { p in
                    keeptrack_mosquitto_will_set(
                        raw, will.topic, Int32(p.count), p.baseAddress, will.qos, will.retain)
                }, "the last will on '\(will.topic)'")
        }
        if endpoint.tls {
            if let ca = options.caFile {
                guard access(ca, R_OK) == 0 else {
                    let e = errno
                    throw MQTTError(.configuration, "the CA file \(ca): \(errnoText(e))", caFile: ca, errno: e)
                }
            }
            try check(
                keeptrack_mosquitto_tls_set(
                    raw, options.caFile, options.caFile == nil ? "/etc/ssl/certs" : nil, nil, nil, nil),
                "the CA file \(options.caFile ?? "(system trust store)")",
                caFile: options.caFile ?? "/etc/ssl/certs")
        }
        keeptrack_mosquitto_connect_callback_set(raw) { _, obj, rc in Events.from(obj).connected(rc) }
        keeptrack_mosquitto_disconnect_callback_set(raw) { _, obj, rc in
            let e = errno
            Events.from(obj).disconnected(rc, errno: e)
        }
        keeptrack_mosquitto_publish_callback_set(raw) { _, obj, mid in
            Events.from(obj).update { $0.acknowledged.insert(mid) }
        }
        keeptrack_mosquitto_subscribe_callback_set(raw) { _, obj, mid, _, _ in
            Events.from(obj).update { $0.subscribed.insert(mid) }
        }
        if onMessage != nil {
            keeptrack_mosquitto_message_callback_set(raw) { _, obj, message in
                guard let m = message?.pointee else { return }
                let events = Events.from(obj)
                let topic = m.topic.map { String(cString: $0) } ?? ""
                let payload = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(m.payloadlen))) } ?? []
                events.onMessage?(topic, payload)
            }
        }
    }

    deinit {
        closeNow()
    }

    /// The connection's failure, or `nil` while it is connecting or connected.
    public var failure: MQTTError? {
        if case .failed(let e) = events.state.withLock({ $0.phase }) { return e }
        return nil
    }

    /// Connects, and returns once the broker accepted us (CONNACK).
    ///
    /// - Throws: ``MQTTError``: `.unreachable` (refused, unresolvable, no answer within
    ///   ``Options/connectTimeout``), `.credentials` or `.refused` (the broker's CONNACK).
    public func connect() async throws(MQTTError) {
        events.update { $0.phase = .connecting }
        let handle = self.handle
        let keepAlive = Int32(options.keepAlive)
        let endpoint = self.endpoint
        // Name resolution blocks: not on the cooperative pool.
        let (rc, e): (Int32, Int32) = await withCheckedContinuation { c in
            startThread(name: "mqtt connect") {
                let rc = keeptrack_mosquitto_connect_async(handle.raw, endpoint.host, Int32(endpoint.port), keepAlive)
                c.resume(returning: (rc, errno))
            }
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            let why =
                rc == MOSQ_ERR_ERRNO.rawValue
                ? errnoText(e)
                : rc == MOSQ_ERR_EAI.rawValue
                    ? "cannot resolve \(endpoint.host)" : String(cString: keeptrack_mosquitto_strerror(rc))
            let error = MQTTError(.unreachable, "cannot connect to the MQTT broker \(endpoint): \(why)")
            events.update { $0.phase = .failed(error) }
            throw error
        }
        let started = lifecycle.withLock { l -> Bool in
            guard !l.closed else { return false }
            l.started = keeptrack_mosquitto_loop_start(handle.raw) == MOSQ_ERR_SUCCESS.rawValue
            return l.started
        }
        guard started else {
            let error = MQTTError(.unreachable, "cannot start the MQTT client's thread for \(endpoint)")
            events.update { $0.phase = .failed(error) }
            throw error
        }
        let deadline = clock.now.advanced(by: .seconds(options.connectTimeout))
        while true {
            switch events.state.withLock({ $0.phase }) {
            case .connected: return
            case .failed(let error): throw error
            default: break
            }
            let left = clock.now.duration(to: deadline)
            if left <= .zero || Task.isCancelled {
                let error = MQTTError(
                    .unreachable,
                    Task.isCancelled
                        ? "cancelled while connecting to \(endpoint)"
                        : "no answer from the MQTT broker \(endpoint) within \(Int(options.connectTimeout)) s")
                events.update { $0.phase = .failed(error) }
                throw error
            }
            await events.signal.wait(until: deadline, on: self.clock)
        }
    }

    /// Queues `message`; returns its mid (``acknowledgements(of:timeout:)`` says when the broker has it).
    ///
    /// - Throws: ``MQTTError`` when the connection is lost or the message cannot be sent.
    public func publish(_ message: MQTTMessage) throws(MQTTError) -> Int32 {
        try publish(topic: message.topic, payload: message.payload, qos: message.qos, retain: message.retain)
    }

    /// Queues a message; returns its mid (``acknowledgements(of:timeout:)`` says when the broker has it).
    ///
    /// - Throws: ``MQTTError`` when the connection is lost or the message cannot be sent.
    public func publish(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false) throws(MQTTError)
        -> Int32
    {
        if let failure { throw failure }
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { p in
            keeptrack_mosquitto_publish(handle.raw, &mid, topic, Int32(p.count), p.baseAddress, qos, retain)
        }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw failure
                ?? MQTTError(
                    .disconnected,
                    "cannot publish to the MQTT broker \(endpoint): "
                        + String(cString: keeptrack_mosquitto_strerror(rc)))
        }
        return mid
    }

    /// Waits until every mid of `mids` is acknowledged, the connection fails, `timeout` seconds
    /// pass or the task is cancelled; returns the mids acknowledged (all of them, or fewer).
    public func acknowledgements(of mids: [Int32], timeout: Double) async -> Set<Int32> {
        var waiting = Set(mids)
        var done: Set<Int32> = []
        let deadline = clock.now.advanced(by: .seconds(timeout))
        while true {
            let failed = events.state.withLock { s -> Bool in
                let got = waiting.intersection(s.acknowledged)
                s.acknowledged.subtract(got)
                waiting.subtract(got)
                done.formUnion(got)
                if case .failed = s.phase { return true }
                return false
            }
            let left = clock.now.duration(to: deadline)
            if waiting.isEmpty || failed || left <= .zero || Task.isCancelled { return done }
            await events.signal.wait(until: deadline, on: self.clock)
        }
    }

    /// Subscribes to `filter` and waits for the broker's SUBACK.
    ///
    /// - Throws: ``MQTTError`` when the connection fails or no SUBACK comes within `timeout`.
    public func subscribe(_ filter: String, qos: Int32 = 1, timeout: Double = 10) async throws(MQTTError) {
        var mid: Int32 = 0
        let rc = keeptrack_mosquitto_subscribe(handle.raw, &mid, filter, qos)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            throw failure
                ?? MQTTError(
                    .configuration,
                    "cannot subscribe to '\(filter)' on \(endpoint): "
                        + String(cString: keeptrack_mosquitto_strerror(rc)))
        }
        let deadline = clock.now.advanced(by: .seconds(timeout))
        while true {
            let (ok, failed) = events.state.withLock { s -> (Bool, MQTTError?) in
                if case .failed(let e) = s.phase { return (false, e) }
                return (s.subscribed.remove(mid) != nil, nil)
            }
            if ok { return }
            if let failed { throw failed }
            let left = clock.now.duration(to: deadline)
            if left <= .zero || Task.isCancelled {
                throw MQTTError(.unreachable, "no SUBACK from the MQTT broker \(endpoint) for '\(filter)'")
            }
            await events.signal.wait(until: deadline, on: self.clock)
        }
    }

    /// Returns the reason once the connection is lost (or at once if it is), or `nil` when the task
    /// is cancelled first.
    public func lost() async -> MQTTError? {
        while !Task.isCancelled {
            if let failure { return failure }
            await events.signal.wait()
        }
        return nil
    }

    /// Disconnects, stops the library's thread and frees the client (off the cooperative pool: the
    /// thread's join blocks). Later calls do nothing.
    public func close() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            startThread(name: "mqtt close") { [self] in
                closeNow()
                c.resume()
            }
        }
    }

    func closeNow() {
        let started = lifecycle.withLock { l -> Bool? in
            guard !l.closed else { return nil }
            l.closed = true
            return l.started
        }
        guard let started else { return }
        keeptrack_mosquitto_disconnect(handle.raw)
        if started { keeptrack_mosquitto_loop_stop(handle.raw, false) }
        keeptrack_mosquitto_destroy(handle.raw)
        events.update { s in
            if case .failed = s.phase { return }
            s.phase = .failed(MQTTError(.disconnected, "the connection to \(endpoint) was closed"))
        }
    }
}
