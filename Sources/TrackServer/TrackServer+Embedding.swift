import Formats
import Geo
import Logging
import MQTT
import SystemIO
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

extension TrackServer.Configuration {
    /// What is wrong with the settings, by field.
    public enum Problem: Error, Sendable, Hashable {
        /// ``TrackServer/Configuration/port`` is not 0 to 65535.
        case portOutOfRange
        /// ``TrackServer/Configuration/faults`` can't be used: why (``Faults/problem``).
        case faults(TrackServerError)
        /// ``TrackServer/Configuration/faults`` are set while ``TrackServer/Configuration/faultInjection`` is off.
        case faultsWithoutFaultInjection
        /// ``TrackServer/Configuration/maxConnections`` is less than 1.
        case maxConnectionsBelowOne
        /// ``TrackServer/Configuration/idleTimeout`` or ``TrackServer/Configuration/bodyTimeout`` is not more
        /// than 0 and at most a day.
        case timeoutOutOfRange
        /// ``TrackServer/Configuration/firstRequestTimeout`` is not more than 0 and at most a day.
        case firstRequestTimeoutOutOfRange
        /// ``TrackServer/Configuration/maxBodyBytes`` is less than 1,024.
        case maxBodyBytesBelow1024
        /// Only one of ``TrackServer/Configuration/tlsCertificate`` and ``TrackServer/Configuration/tlsKey``.
        case tlsCertificateAndKeyApart
        /// ``TrackServer/Configuration/retention`` is less than an hour.
        case retentionBelowAnHour
        /// ``TrackServer/Configuration/mqtt``'s URL can't be used: why.
        case mqtt(MQTTError)
        /// An origin of ``TrackServer/Configuration/corsOrigins`` can't be one: why
        /// (``TrackServer/Configuration/corsOriginProblem(_:)``).
        case corsOrigin(TrackServerError)
        /// ``TrackServer/StreamSettings/maxClients`` is less than 1.
        case maxStreamsBelowOne
        /// ``TrackServer/StreamSettings/offlineAfter`` is less than a second.
        case offlineAfterBelowASecond
    }

    /// What is wrong with these settings, or nil; the first problem found.
    public var problem: Problem? {
        if !(0...65535).contains(port) { return .portOutOfRange }
        if let problem = faults.problem { return .faults(problem) }
        if !faultInjection && faults != Faults() { return .faultsWithoutFaultInjection }
        if let maxConnections, maxConnections < 1 { return .maxConnectionsBelowOne }
        let day = Duration.seconds(86_400)
        if !(idleTimeout > .zero && idleTimeout <= day) || !(bodyTimeout > .zero && bodyTimeout <= day) {
            return .timeoutOutOfRange
        }
        if !(firstRequestTimeout > .zero && firstRequestTimeout <= day) { return .firstRequestTimeoutOutOfRange }
        if maxBodyBytes < 1024 { return .maxBodyBytesBelow1024 }
        if (tlsCertificate == nil) != (tlsKey == nil) { return .tlsCertificateAndKeyApart }
        if let retention, !(retention >= 3600) { return .retentionBelowAnHour }
        if stream.maxClients < 1 { return .maxStreamsBelowOne }
        if stream.offlineAfter < .seconds(1) { return .offlineAfterBelowASecond }
        if let mqtt {
            do { _ = try MQTTEndpoint(parsing: mqtt.url, wildcards: true) } catch { return .mqtt(error) }
        }
        for origin in corsOrigins { if let why = Self.corsOriginProblem(origin) { return .corsOrigin(why) } }
        return nil
    }

    /// `seconds` as a duration to the millisecond (a `keeptrack serve` timeout option).
    public static func duration(seconds: Double) -> Duration {
        .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

extension TrackServer {
    /// The line `keeptrack serve` prints once it listens:
    /// `{"event":"listening","url":"http://127.0.0.1:5055","database":"..."}`.
    public func listeningLine(port: Int) -> [UInt8] {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let scheme = configuration.tlsCertificate == nil ? "http" : "https"
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"event\":\"listening\",\"url\":", to: &out)
        ByteWriting.appendJSONString("\(scheme)://\(host):\(port)", to: &out)
        ByteWriting.appendStatic(",\"database\":", to: &out)
        ByteWriting.appendJSONString(store.location, to: &out)
        ByteWriting.appendStatic("}\n", to: &out)
        return out
    }

    /// Runs as ``run(signals:onReady:)`` does, handing `announce` the lines `keeptrack serve` prints:
    /// ``listeningLine(port:)`` once it listens, then, with ``Configuration/mqtt``,
    /// `{"event":"subscribed","broker":"HOST:PORT","topic":"owntracks/+/+"}` once subscribed.
    public func run(signals: Bool, announce: @escaping @Sendable ([UInt8]) -> Void) async throws {
        try await run(signals: signals) { [self] port in
            announce(listeningLine(port: port))
            guard let mqtt = configuration.mqtt, let broker = try? MQTTEndpoint(parsing: mqtt.url, wildcards: true)
            else { return }
            Task {
                await mqttSubscription()
                var out: [UInt8] = []
                ByteWriting.appendStatic("{\"event\":\"subscribed\",\"broker\":", to: &out)
                ByteWriting.appendJSONString("\(broker)", to: &out)
                ByteWriting.appendStatic(",\"topic\":", to: &out)
                ByteWriting.appendJSONString(broker.topic.isEmpty ? mqtt.topicFilter : broker.topic, to: &out)
                ByteWriting.appendStatic("}\n", to: &out)
                announce(out)
            }
        }
    }

    /// A test endpoint for one process (`--upload embedded`) over `store` (the caller opens it: the
    /// data directory's endpoint database, `TrackStorePostgres`' `TrackDatabase(dataDirectory:)`): a
    /// free loopback port, a random token, logging warnings only. Run it in the same service group as
    /// the uploader, started before it and stopped after it; close the store after.
    public static func embedded(store: any TrackStore) throws -> TrackServer {
        var c = Configuration()
        c.token = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined()
        var logger = Logger(label: "keeptrack.serve")
        logger.logLevel = .warning
        return try TrackServer(configuration: c, store: store, logger: logger)
    }

    /// What ``exportTrail(device:directory:)`` wrote.
    public struct ExportedTrail: Sendable {
        public var path: String
        public var points: Int
        public var regionEvents: Int
        /// Visit and trip records (a visit counts twice: at arrival and at departure).
        public var visitsAndTrips = 0
        /// Heartbeat records (the latest location again while the device did not move).
        public var heartbeats = 0
    }

    /// Writes the stored trail of `device` as GeoJSON to `directory/DEVICE.geojson`.
    public func exportTrail(device: String, directory: String) async throws -> ExportedTrail {
        let records = try await store.trail(device: device)
        let points = records.filter { $0.kind == .location }.count
        makeDirectories(directory)
        // An OwnTracks device is user/device: one file name.
        let path = directory + "/\(device.replacing("/", with: "_")).geojson"
        try writeFile(path, TrailExport.geoJSON(device: device, records: records))
        let visits = records.filter { $0.kind.isVisitOrTrip }.count
        let heartbeats = records.filter { $0.kind == .heartbeat }.count
        return ExportedTrail(
            path: path, points: points, regionEvents: records.count - points - visits - heartbeats,
            visitsAndTrips: visits, heartbeats: heartbeats)
    }
}
