import Formats
import Geo
import Logging
import MQTT
import SystemIO
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

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
