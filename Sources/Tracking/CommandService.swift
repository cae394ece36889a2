import Logging
import ServiceLifecycle

/// A command's long-running work as a service: SIGTERM and SIGINT start a graceful shutdown, which
/// cancels the work's input (the source stops, the gpsd watch closes) and lets what comes after
/// the input loop finish — flushing output, uploading the outbox within the shutdown timeout.
public struct CommandService: Service {
    let body: @Sendable () async throws -> Void

    public init(body: @escaping @Sendable () async throws -> Void) { self.body = body }

    public func run() async throws {
        try await cancelWhenGracefulShutdown(body)
    }
}

/// Runs `body` in a service group that shuts down gracefully on SIGTERM, SIGINT and SIGHUP.
public func runAsService(_ body: @escaping @Sendable () async throws -> Void) async throws {
    var logger = Logger(label: "keeptrack.lifecycle")
    logger.logLevel = .error
    let group = ServiceGroup(
        configuration: .init(
            services: [
                .init(service: CommandService(body: body), successTerminationBehavior: .gracefullyShutdownGroup)
            ],
            gracefulShutdownSignals: [.sigterm, .sigint, .sighup], logger: logger))
    try await group.run()
}
