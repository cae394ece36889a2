import Formats
import Geo
import Logging
import MQTT
import OwnTracksCrypto
import ServiceLifecycle
import Synchronization
import Dispatch
import TrackStore

/// The endpoint's MQTT side: subscribed at QoS 1 to OwnTracks topics on a broker, it stores every
/// message as `POST /owntracks` does (``Ingest/ownTracks(_:user:device:)``: device
/// `user/device`), the user and device being the topic's second and third levels
/// (`owntracks/USER/DEVICE`), so a fleet of phones publishing to a broker lands in the same store.
///
/// A message is stored before its PUBACK leaves (libmosquitto sends it once the handler returned),
/// and the session is persistent (``Configuration/clientID``, clean session off): while the
/// endpoint is away, the broker keeps QoS 1 messages for it. What is sent twice (QoS 1 is at least
/// once) is stored once, by the store's key. A lost connection is opened again after a backoff
/// (from 1 s doubling to ``Configuration/maxBackoff``, 30 s, with jitter), as the uploader does.
public final class MQTTIngest: Service, Sendable {
    public struct Configuration: Sendable {
        /// The broker: `mqtt(s)://[user[:password]@]host[:port][/filter]`; a filter there replaces
        /// ``topicFilter``.
        public var url: String
        /// The topic filter. The default is `owntracks/+/+`.
        public var topicFilter = "owntracks/+/+"
        /// The client id of the persistent session. The default is `keeptrack-serve`.
        public var clientID = "keeptrack-serve"
        /// With `mqtts://`: a PEM file of CA certificates. The default is the system's.
        public var caFile: String?
        /// The first retry's wait. The default is 1 s.
        public var initialBackoff: Double = 1
        /// The longest wait between connection attempts. The default is 30 s (while the endpoint is
        /// away, the broker queues its messages, and may drop them past its `max_queued_messages`).
        public var maxBackoff: Double = 30

        public init(url: String, topicFilter: String = "owntracks/+/+") {
            self.url = url
            self.topicFilter = topicFilter
        }
    }

    let ingest: Ingest
    let status: MQTTStatus
    let configuration: Configuration
    let endpoint: MQTTEndpoint
    /// The waits between connection attempts.
    let clock: any EpochClock
    let logger: Logger

    init(
        ingest: Ingest, status: MQTTStatus, configuration: Configuration, clock: any EpochClock, logger: Logger
    ) throws(MQTTError) {
        self.ingest = ingest
        self.status = status
        let endpoint = try MQTTEndpoint(parsing: configuration.url, wildcards: true)
        var configuration = configuration
        if !endpoint.topic.isEmpty { configuration.topicFilter = endpoint.topic }
        self.configuration = configuration
        self.endpoint = endpoint
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { [self] in
            var failures = 0
            while !Task.isCancelled {
                var options = MQTTConnection.Options(clientID: configuration.clientID)
                options.cleanSession = false
                options.caFile = configuration.caFile
                var wait: Double?
                do {
                    let connection = try MQTTConnection(endpoint: endpoint, options: options) { [self] topic, payload in
                        receive(topic: topic, payload: payload)
                    }
                    do {
                        try await connection.connect()
                        try await connection.subscribe(configuration.topicFilter, qos: 1)
                    } catch {
                        await connection.close()
                        throw error
                    }
                    failures = 0
                    status.subscribed()
                    logger.info(
                        "subscribed", metadata: ["broker": "\(endpoint)", "topic": "\(configuration.topicFilter)"])
                    let lost = await connection.lost()
                    await connection.close()
                    status.subscribed(false)
                    guard let lost else { return }
                    logger.warning("MQTT connection lost", metadata: ["reason": "\(lost.message)"])
                } catch {
                    // Credentials are a setting to fix: tried again at the longest backoff.
                    if (error as? MQTTError)?.code == .credentials { wait = configuration.maxBackoff }
                    logger.warning("MQTT connection failed", metadata: ["reason": "\(error)"])
                }
                failures += 1
                let pause =
                    wait
                    ?? Backoff(initial: configuration.initialBackoff, maximum: configuration.maxBackoff)
                    .delay(failures: failures)
                try? await clock.sleep(until: clock.now.advanced(by: .seconds(pause)), tolerance: nil)
            }
        }
    }

    /// One message, on libmosquitto's thread: stored (or refused) before its PUBACK leaves.
    func receive(topic: String, payload: [UInt8]) {
        defer { status.signal.fire() }
        // An empty payload clears a retained message: nothing to store.
        guard !payload.isEmpty else { return }
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count >= 3, !levels[1].isEmpty, !levels[2].isEmpty else {
            ingest.metrics.rejected(1)
            logger.warning("MQTT message refused: its topic is not PREFIX/USER/DEVICE", metadata: ["topic": "\(topic)"])
            return
        }
        do {
            // libmosquitto's thread waits for the store (its PUBACK goes once this returns).
            let ingest = self.ingest
            let (user, device) = (String(levels[1]), String(levels[2]))
            _ = try waitFor { try await ingest.ownTracks(payload, user: user, device: device) }
        } catch let error as OwnTracksCryptoError {
            // Counted by outcome (keeptrack_serve_encrypted_total); nothing stored.
            ingest.metrics.rejected(1)
            logger.warning("MQTT message refused: encrypted", metadata: ["topic": "\(topic)", "code": "\(error.code)"])
        } catch let error as FormatsError {
            ingest.metrics.rejected(1)
            // The reason may quote a coordinate: only at debug level.
            logger.warning("MQTT message refused", metadata: ["topic": "\(topic)"])
            logger.debug("refusal", metadata: ["reason": "\(error)"])
        } catch {
            // Its PUBACK is already queued: the broker will not send it again.
            logger.error("MQTT message lost: the store failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }
}

/// Runs `work` in a task and blocks the calling thread (one that is not Swift's cooperative pool's:
/// libmosquitto's) until it is done.
func waitFor<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task {
        let r: Result<T, any Error>
        do { r = .success(try await work()) } catch { r = .failure(error) }
        result.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

/// Whether the MQTT subscription is in place, how many times it was made, and a signal fired at each
/// change and each message handled.
final class MQTTStatus: Sendable {
    let state = Mutex((subscribed: false, count: 0))
    let signal = Signal()

    func subscribed(_ on: Bool = true) {
        state.withLock {
            $0.subscribed = on
            if on { $0.count += 1 }
        }
        signal.fire()
    }
}

extension TrackServer {
    /// Returns once the MQTT subscription is in place (at once when it is), for a caller that
    /// publishes next; waits forever without ``Configuration/mqtt``. One caller at a time.
    public func mqttSubscription() async {
        while !mqttIsSubscribed && !Task.isCancelled { await mqtt.signal.wait() }
    }

    /// Returns once the MQTT side handled a message or changed state since the last call (or at
    /// once, when it did before): a caller waiting for a condition re-checks it after each return.
    public func mqttActivity() async {
        await mqtt.signal.wait()
    }

    /// Whether the MQTT subscription is in place now.
    public var mqttIsSubscribed: Bool { mqtt.state.withLock { $0.subscribed } }

    /// How many times the subscription was made (1 on the first connection, one more after each
    /// reconnection).
    public var mqttSubscriptions: Int { mqtt.state.withLock { $0.count } }
}
