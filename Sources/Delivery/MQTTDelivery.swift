import EndpointEvents
import MQTT

/// MQTT hooks: each event published at QoS 1 to the hook's topic (``Hook/topic(for:)``) on the
/// broker of its `mqtt://` or `mqtts://` URL; delivered once the broker's PUBACK arrives within the
/// timeout. One connection per hook, opened when an event needs it (after the broker's host was
/// checked as a webhook's is, and, over plain MQTT, to the address checked), closed when a publish
/// fails so that nothing libmosquitto queued for a dead connection is sent behind the queue's back.
public actor MQTTDelivery: DeliveryKind {
    let hook: Hook
    let allowPrivate: Bool
    let timeout: Double
    let clientID: String
    var connection: MQTTConnection?
    var connecting: Task<MQTTConnection, any Error>?

    /// - Parameters:
    ///   - allowPrivate: whether the broker may be on a loopback, private or link-local address.
    ///   - timeout: seconds for the connection and for each PUBACK.
    ///   - instance: a tag of this process, so that instances sharing a store have distinct client ids.
    public init(hook: Hook, allowPrivate: Bool, timeout: Double, instance: String) {
        precondition(hook.type == .mqtt, "MQTTDelivery delivers MQTT hooks")
        self.hook = hook
        self.allowPrivate = allowPrivate
        self.timeout = timeout
        clientID = "keeptrack-hook-\(instance)"
    }

    public func deliver(_ event: QueuedEvent) async -> DeliveryAnswer {
        let c: MQTTConnection
        do {
            c = try await open()
        } catch let failure as DeliveryFailure {
            return .retry(after: nil, failure)
        } catch {
            return .retry(after: nil, DeliveryFailure(.broker, "\(error)"))
        }
        let mid: Int32
        do {
            mid = try c.publish(
                topic: hook.topic(device: event.device, kindName: event.kindName), payload: event.body, qos: 1)
        } catch {
            await drop(c)
            return .retry(after: nil, DeliveryFailure(.broker, error.message))
        }
        let acknowledged = await c.acknowledgements(of: [mid], timeout: timeout)
        if acknowledged.contains(mid) { return .delivered }
        let why = c.failure?.message ?? "no PUBACK from \(c.endpoint) within \(timeout) s"
        await drop(c)
        return .retry(after: nil, DeliveryFailure(.broker, why))
    }

    /// The open connection, or a new one.
    func open() async throws -> MQTTConnection {
        if let connection, connection.failure == nil { return connection }
        if let connecting { return try await connecting.value }
        let task = Task { () throws -> MQTTConnection in
            var endpoint = try MQTTEndpoint(parsing: hook.url)
            let address = try await HookAddresses.checked(endpoint.host, allowPrivate: allowPrivate)
            // Plain MQTT connects to the address checked; TLS needs the name to verify the broker.
            if !endpoint.tls { endpoint.host = HookAddresses.text(address) }
            var options = MQTTConnection.Options(clientID: clientID)
            options.connectTimeout = timeout
            let c = try MQTTConnection(endpoint: endpoint, options: options)
            do throws(MQTTError) {
                try await c.connect()
            } catch {
                await c.close()
                throw DeliveryFailure(.broker, error.message)
            }
            return c
        }
        connecting = task
        defer { connecting = nil }
        let c = try await task.value
        if let old = connection, old !== c { await old.close() }
        connection = c
        return c
    }

    func drop(_ c: MQTTConnection) async {
        if connection === c { connection = nil }
        await c.close()
    }

    public func close() async {
        if let connection { await connection.close() }
        connection = nil
    }
}
