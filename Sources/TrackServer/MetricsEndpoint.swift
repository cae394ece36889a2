import Geo
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import SystemIO

/// `GET /metrics` (Prometheus text) on an address of its own, as a service beside a tracker:
/// `keeptrack track --metrics-listen 127.0.0.1:9477`. Every other path is a 404. It knows nothing
/// of the tracker: the text comes from `render` (the process's registry, `Telemetry.prometheusText`).
public final class MetricsEndpoint: Service {
    /// Where to listen: `HOST:PORT` or `[IPv6]:PORT`.
    public struct Address: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Reads `127.0.0.1:9477`, `[::1]:9477`, `0.0.0.0:9477`; `nil` for anything else (no port,
        /// a port outside 0-65535, an empty host).
        public init?(_ text: String) {
            var host: Substring
            let portText: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                    return nil
                }
                host = text[text.index(after: text.startIndex)..<close]
                portText = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            }
            guard !host.isEmpty, !portText.isEmpty, portText.allSatisfy(\.isNumber), portText.count <= 5,
                let port = Int(portText), port <= 65_535
            else { return nil }
            self.init(host: String(host), port: port)
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public let address: Address
    let render: @Sendable () -> String
    let logger: Logger
    let bound = Atomic<Int>(-1)
    let ready = Signal()

    /// - Parameters:
    ///   - address: where to listen (port 0: a free one, see ``listeningPort()``).
    ///   - logger: says where it listens (notice), and what Hummingbird says.
    ///   - render: the Prometheus text, called once per request.
    public init(address: Address, logger: Logger, render: @escaping @Sendable () -> String) {
        self.address = address
        self.logger = logger
        self.render = render
    }

    /// The port it listens on, once it does.
    public func listeningPort() async -> Int {
        while bound.load(ordering: .acquiring) < 0 && !Task.isCancelled { await ready.wait() }
        return bound.load(ordering: .acquiring)
    }

    public func run() async throws {
        let router = Router()
        let render = self.render
        router.get("/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: render())))
        }
        let logger = self.logger
        let address = self.address
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "keeptrack-metrics"),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? address.port
                bound.store(port, ordering: .releasing)
                ready.fire()
                var url = address
                url.port = port
                logger.notice("metrics endpoint listening", metadata: ["url": "http://\(url)/metrics"])
            },
            logger: logger)
        do {
            try await app.run()
        } catch let error as IOError {
            // Said with the address, by the system's name for it, not NIO's `bind(descriptor:ptr:bytes:)`.
            throw TrackServerError(
                .cannotListen,
                "the metrics endpoint cannot listen on \(address): \(errnoText(error.errnoCode).lowercased())",
                value: "\(address)")
        }
    }
}
