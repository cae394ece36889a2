import AsyncHTTPClient
import EndpointEvents
import Geo
import NIOCore
import NIOHTTP1
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Webhooks and Home Assistant's webhook trigger: a `POST` of the event's JSON to the hook's URL,
/// signed (``EventSignature``), with the event's id and kind in headers. A 2xx is delivered; a
/// redirect is not followed and counts as a failure (as any other answer, a timeout or a network
/// error: tried again). Before a request the host's addresses are checked (``HookAddresses``) and
/// the connection goes to the address checked.
///
/// One per hook; requests to it may run at once (the worker's in-flight bound). Its HTTP client is
/// its own, so a hook that hangs holds no connection another hook needs.
public final class WebhookDelivery: DeliveryKind {
    let hook: Hook
    let target: Hook.Target
    let allowPrivate: Bool
    let timeout: Double
    /// How long a checked address is used before the host is resolved again, in seconds.
    static let addressLifetime = 30.0

    struct State {
        /// Clients by the address they connect to (one, unless the host's address changes).
        var clients: [String: HTTPClient] = [:]
        var order: [String] = []
        /// The address checked last, and until when it is used.
        var address: (text: String, until: Double)?
        var closed = false
    }

    let state = Mutex(State())

    /// - Parameters:
    ///   - allowPrivate: whether the hook may reach loopback, private and link-local addresses.
    ///   - timeout: seconds a request may take, to the end of its answer's head.
    public init(hook: Hook, allowPrivate: Bool, timeout: Double) {
        precondition(hook.type != .mqtt, "an MQTT hook is delivered by MQTTDelivery")
        self.hook = hook
        target = hook.target
        self.allowPrivate = allowPrivate
        self.timeout = timeout
    }

    public func deliver(_ event: QueuedEvent) async -> DeliveryAnswer {
        let client: HTTPClient
        do {
            client = try await self.client()
        } catch {
            return .retry(after: nil, error)
        }
        var request = HTTPClientRequest(url: hook.url)
        request.method = .POST
        request.headers.add(name: "User-Agent", value: "keeptrack-hook")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: EventSignature.idHeader, value: event.id)
        request.headers.add(name: EventSignature.kindHeader, value: event.kindName)
        if !hook.secret.isEmpty {
            request.headers.add(
                name: EventSignature.header, value: EventSignature.signature(body: event.body, secret: hook.secret))
        }
        request.body = .bytes(event.body)
        let host = target.host
        do {
            let response = try await client.execute(request, timeout: .milliseconds(Int64(timeout * 1000)))
            let status = Int(response.status.code)
            // The body is read (a little) so the connection can serve the next request.
            _ = try? await response.body.collect(upTo: 16 * 1024)
            switch status {
            case 200..<300:
                return .delivered
            case 300..<400:
                let location = response.headers.first(name: "Location").map { " to \($0.prefix(200))" } ?? ""
                return .retry(
                    after: nil,
                    DeliveryFailure(
                        .redirect, "\(host) answered \(status), a redirect\(location), which hooks never follow",
                        status: status))
            default:
                let retryAfter = response.headers.first(name: "Retry-After").flatMap(Double.init).map { max(0, $0) }
                return .retry(after: retryAfter, DeliveryFailure(.status, "\(host) answered \(status)", status: status))
            }
        } catch let error as HTTPClientError
            where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout
        {
            return .retry(
                after: nil, DeliveryFailure(.timeout, "\(host) did not answer within \(Self.seconds(timeout))"))
        } catch {
            return .retry(
                after: nil, DeliveryFailure(.network, "cannot reach \(host):\(target.port): \(Self.reason(error))"))
        }
    }

    /// A network error as an admin reads it: a system error by its name (`connection refused`),
    /// NIO's wording of it (`connection reset (error set): Connection refused) (errno: 111)`) left
    /// out; anything else as it describes itself.
    static func reason(_ error: any Error) -> String {
        guard let io = error as? IOError else { return "\(error)" }
        return String(cString: strerror(io.errnoCode)).lowercased()
    }

    static func seconds(_ t: Double) -> String {
        t == t.rounded() ? "\(Int(t)) s" : "\(t) s"
    }

    /// The client for the host's current checked address.
    func client() async throws(DeliveryFailure) -> HTTPClient {
        // How long its own check stays good, not a time of day: the one monotonic helper.
        let now = monotonicSeconds()
        let cached = state.withLock { s -> HTTPClient? in
            guard let a = s.address, a.until > now else { return nil }
            return s.clients[a.text]
        }
        if let cached { return cached }
        let address = HookAddresses.text(try await HookAddresses.checked(target.host, allowPrivate: allowPrivate))
        let until = now + Double(Self.addressLifetime)
        let (client, retired) = state.withLock { s -> (HTTPClient?, HTTPClient?) in
            guard !s.closed else { return (nil, nil) }
            s.address = (address, until)
            if let c = s.clients[address] { return (c, nil) }
            let c = makeClient(connectingTo: address)
            s.clients[address] = c
            s.order.append(address)
            // A host whose address keeps changing keeps a few clients, not one per address.
            guard s.order.count > 4 else { return (c, nil) }
            return (c, s.clients.removeValue(forKey: s.order.removeFirst()))
        }
        if let retired { Task { try? await retired.shutdown() } }
        guard let client else { throw DeliveryFailure(.configuration, "the hook's lane is closed") }
        return client
    }

    func makeClient(connectingTo address: String) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .milliseconds(Int64(min(5, timeout) * 1000)), read: .milliseconds(Int64(timeout * 1000))))
        // The connection goes to the address checked, whatever the name resolves to by then; TLS
        // still verifies the name.
        if HookAddresses.literal(target.host) == nil { configuration.dnsOverride = [target.host: address] }
        configuration.connectionPool = .init(idleTimeout: .seconds(30))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public func close() async {
        let clients = state.withLock { s -> [HTTPClient] in
            s.closed = true
            defer { s.clients = [:] }
            return Array(s.clients.values)
        }
        for c in clients { try? await c.shutdown() }
    }
}
