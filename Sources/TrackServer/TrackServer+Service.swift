import ServiceLifecycle

/// The endpoint as a service of a program's group (`keeptrack replay --upload embedded` runs it
/// beside the tracker and its uploader): it listens until the group stops it, after the uploader
/// that sends to it.
extension TrackServer: Service {
    public func run() async throws {
        try await run(signals: false, onReady: { _ in })
    }
}
