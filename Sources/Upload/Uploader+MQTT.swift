import Formats
import MQTT
import Synchronization

/// The uploader's MQTT transport: one broker connection at a time, opened when a batch needs it and
/// closed as soon as a batch does not complete (lost connection, PUBACKs missing after the timeout,
/// background time out), so that what libmosquitto queued for it dies with it and the outbox stays
/// the only record of what is unsent. The next batch, after the uploader's backoff, opens a new one.
final class MQTTPublisher: Sendable {
    let endpoint: MQTTEndpoint
    let options: MQTTConnection.Options
    /// Where records go: the URL's topic, or `owntracks/USER/DEVICE`.
    let topic: String
    /// With ``HomeAssistantFormat``: its topics, gate and status (the URL's topic is the discovery prefix).
    let homeAssistant: HomeAssistantLane?
    let current = Mutex<MQTTConnection?>(nil)

    init(configuration: Uploader.Configuration, device: String) throws(UploadError) {
        do {
            endpoint = try MQTTEndpoint(parsing: configuration.url)
        } catch {
            throw UploadError(.configuration, "the MQTT URL", underlying: error)
        }
        if configuration.caFile != nil && !endpoint.tls {
            throw UploadError(.configuration, "a CA file goes with mqtts:// (TLS), not mqtt://")
        }
        let prefix = endpoint.topic.isEmpty ? HomeAssistantDiscovery.defaultPrefix : endpoint.topic
        let homeAssistant = (configuration.format as? HomeAssistantFormat).map {
            HomeAssistantLane(format: $0, device: device, prefix: prefix)
        }
        self.homeAssistant = homeAssistant
        // Its own client id: an OwnTracks target of the same device on the same broker is another client.
        var options = MQTTConnection.Options(
            clientID: homeAssistant == nil ? "keeptrack-\(device)" : "keeptrack-\(device)-homeassistant")
        options.will = homeAssistant.map { $0.format.will(topics: $0.topics) }
        options.caFile = configuration.caFile
        options.maxInflight = configuration.maxInflight
        options.connectTimeout = min(10, configuration.timeout)
        self.options = options
        // The user: one set in the settings (--user), else the URL's user name (a broker's ACL usually
        // allows a user only owntracks/USER/#), else the settings' default.
        let settings = configuration.formatSettings
        let user = settings.user != UploadFormatSettings().user ? settings.user : endpoint.username ?? settings.user
        topic = endpoint.topic.isEmpty ? "owntracks/\(user)/\(device)" : endpoint.topic
        for level in topic.split(separator: "/", omittingEmptySubsequences: false)
        where level.contains("+") || level.contains("#") {
            throw UploadError(
                .configuration,
                "the MQTT topic '\(topic)' contains a wildcard (+ or #): "
                    + "give the topic in the URL or another device id")
        }
    }

    /// The open connection, or a new one once connected.
    func connection() async throws(MQTTError) -> MQTTConnection {
        if let c = current.withLock({ $0 }), c.failure == nil { return c }
        await reset()
        let lane = homeAssistant
        var onMessage: (@Sendable (String, [UInt8]) -> Void)?
        if let lane { onMessage = { topic, payload in lane.received(topic: topic, payload: payload) } }
        let c = try MQTTConnection(endpoint: endpoint, options: options, onMessage: onMessage)
        do throws(MQTTError) {
            try await c.connect()
            // Home Assistant's birth and will, from the start of the connection.
            if let lane { try await c.subscribe(lane.topics.status, qos: 1, timeout: options.connectTimeout) }
        } catch {
            await c.close()
            throw error
        }
        current.withLock { $0 = c }
        return c
    }

    /// Closes the connection (the next batch opens another).
    func reset() async {
        await current.withLock { c -> MQTTConnection? in
            defer { c = nil }
            return c
        }?.close()
    }

    func close() async { await reset() }
}

extension Uploader {
    /// What a failed connection comes to. Bad credentials, TLS files or a missing libmosquitto1 are
    /// settings to fix, as a 401 is: a drain stops at once, a run tries again at the longest backoff.
    static func attempt(connecting error: MQTTError) -> Attempt {
        switch error.code {
        case .credentials, .configuration:
            return .settings(reason: error.message, check: error.caFile != nil ? [.caFile] : [.url])
        default: return .retry(after: nil, reason: error.message)
        }
    }

    /// One batch over MQTT: every record published at QoS 1 as OwnTracks JSON (``OwnTracksFormat``'s
    /// body, or ``EncryptedOwnTracksFormat``'s with a secret; dwells, which OwnTracks has no form for, and transitions the settings leave out are
    /// acknowledged as skipped), the ones whose PUBACK arrived acknowledged in the outbox, the
    /// rest kept for the next attempt.
    func publish(_ batch: [TrailRecord], via publisher: MQTTPublisher) async -> Attempt {
        if let lane = publisher.homeAssistant { return await publish(batch, via: publisher, to: lane) }
        let connection: MQTTConnection
        do {
            connection = try await publisher.connection()
        } catch {
            return Self.attempt(connecting: error)
        }
        var published: [(mid: Int32, record: TrailRecord)] = []
        var skipped: [TrailRecord] = []
        var failure: String?
        for r in batch {
            let format = configuration.mqttFormat
            guard let body = format.request(for: [r], device: device, settings: configuration.formatSettings)?.body
            else {
                skipped.append(r)
                continue
            }
            do {
                published.append((try connection.publish(topic: publisher.topic, payload: body, qos: 1), r))
            } catch {
                failure = error.message
                break
            }
        }
        let acknowledged = await connection.acknowledgements(of: published.map(\.mid), timeout: configuration.timeout)
        let stored = published.filter { acknowledged.contains($0.mid) }.map(\.record)
        if !stored.isEmpty || !skipped.isEmpty {
            if case .retry(let after, let reason) = acknowledge(
                stored + skipped, skipped: skipped.count,
                requests: stored.count)
            {
                await publisher.reset()
                return .retry(after: after, reason: reason)
            }
        }
        guard stored.count < published.count || failure != nil else { return .done }
        let lost = connection.failure
        await publisher.reset()
        if let failure { return .retry(after: nil, reason: failure) }
        if Task.isCancelled { return .retry(after: nil, reason: "cancelled: the background time ran out") }
        if let lost { return .retry(after: nil, reason: lost.message) }
        return .retry(
            after: nil,
            reason: "no PUBACK from the MQTT broker \(publisher.endpoint) for "
                + "\(published.count - stored.count) of \(published.count) records within \(Int(configuration.timeout)) s"
        )
    }
}
