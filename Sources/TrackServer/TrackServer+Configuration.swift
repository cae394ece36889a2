import Delivery
import Geo
import MQTT

extension TrackServer {
    public struct Configuration: Sendable {
        /// The default is 127.0.0.1.
        public var host = "127.0.0.1"
        /// 0 (the default) picks a free port.
        public var port = 0
        /// The token devices must present; `nil` (the default) accepts anyone.
        public var token: String?
        /// The origins whose web pages may call the API (`https://owntracks.example.org`, or `*`): CORS
        /// headers and preflight answers (``CrossOriginMiddleware``). The default is none.
        public var corsOrigins: [String] = []
        /// The largest request body, after decompression. The default is 8 MiB.
        public var maxBodyBytes = 8 << 20
        /// Whether faults are injected (``faults`` and `PUT /v1/faults`); off, the route does not
        /// exist. The default is false (`keeptrack serve --faults` turns it on).
        public var faultInjection = false
        /// The faults injected from the start, when ``faultInjection`` is on.
        public var faults = Faults()
        /// The most connections served at once. At the cap, a new connection takes the place of the
        /// oldest one without a complete request head, else of the one idle the longest between
        /// requests (that one is closed); when every connection is busy, it gets `503` with
        /// `Retry-After` and is closed (over TLS: closed). The default, nil, sizes it from the soft
        /// descriptor limit (``connectionCap(descriptors:)``: 716 for 1,024 descriptors).
        public var maxConnections: Int?
        /// How long a new connection has to send its first complete request head; then it is closed.
        /// The default is 10 seconds.
        public var firstRequestTimeout: Duration = .seconds(10)
        /// Whether ``TrackServer/run(signals:onReady:)`` raises the process's soft descriptor limit
        /// (`RLIMIT_NOFILE`) to its hard limit first, as servers do. The default is true.
        public var raiseDescriptorLimit = true
        /// How long a connection may stay without a complete request head when idle between
        /// requests (and from its opening, when longer than ``firstRequestTimeout``). Then it is
        /// closed. The default is 30 seconds.
        public var idleTimeout: Duration = .seconds(30)
        /// How long a request's body may take to arrive, from the end of its head; past it the
        /// request is answered 408 and the connection closed. The default is 60 seconds.
        public var bodyTimeout: Duration = .seconds(60)
        /// The bytes of request bodies read into memory at once (declared lengths, the largest body
        /// for one without a length, what a gzip body inflates to); a request that would go over it
        /// gets `503` with `Retry-After: 1`. Never less than ``maxBodyBytes``. The default is 32 MiB.
        public var maxBodyBytesInFlight = 32 << 20
        /// The records in a trail page when the request gives no `limit`. The default is 10,000.
        public var defaultPageSize = 10_000
        /// The largest `limit` a trail or map page may ask for. The default is 100,000.
        public var maxPageSize = 100_000
        /// The most points `/map` draws a trail's line through (more are thinned out evenly, and the
        /// page says so). The default is 5,000.
        public var maxPointsDrawn = 5_000
        /// The most devices `/map` draws without `?device=` (the rest are listed). The default is 20.
        public var maxDevicesDrawn = 20
        /// PEM certificate chain and private key: serve HTTPS. The default is plain HTTP.
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// A reverse geocoder speaking Nominatim's `/reverse?format=jsonv2` (its base URL) that names
        /// the visits no area of the user's names (``ReverseGeocoder``). The default is none: no names
        /// from it, no requests.
        public var geocoder: String?
        /// Share links' rates (``ShareLimits``).
        public var shares = ShareLimits()
        /// A broker to take OwnTracks messages from as well (``MQTTIngest``). The default is none.
        public var mqtt: MQTTIngest.Configuration?
        /// A broker Home Assistant listens on, to make every device a device tracker there
        /// (``HomeAssistantRelay``). The default is none.
        public var homeAssistant: HomeAssistantRelay.Configuration?
        /// Whether OsmAnd requests without a credential are stored for devices without a token once
        /// a token or a device credential exists (otherwise they get Traccar's answer to an unknown
        /// device, 400). The default is false.
        public var openRegistration = false
        /// How old a point may get, in seconds, before ``RetentionService`` deletes it. The default
        /// is nil: points are kept.
        public var retention: Double?
        /// The live stream's limits (`GET /v1/stream`).
        public var stream = StreamSettings()
        /// The map page's base map and library (`/map`).
        public var map = MapSettings()
        /// Events and their delivery (docs/events.md).
        public var events = EventSettings()
        /// Locations with a horizontal accuracy worse than this many metres are outliers: stored,
        /// marked `inaccurate`, left out of stops, trips and the map's line (docs/visits.md). Each
        /// device's stored detector state keeps the threshold it judged with; a new threshold holds
        /// from the next point stored (``StopStore/setMaximumAccuracy(_:)``). The default is 200.
        public var maxAccuracy: Double = 200

        public init() {}
    }

    /// Events and their delivery to hooks (docs/events.md).
    public struct EventSettings: Sendable {
        /// Whether hooks may reach loopback, private and link-local addresses (`--allow-private-hooks`).
        /// The default is false: a server that posts where it is told is a tool against its network.
        public var allowPrivateHooks = false
        /// The global speed limit of `overspeed`, in m/s; `nil`: none. The default is nil.
        public var overspeedLimit: Double?
        /// Whether this instance delivers the queued events to hooks. The default is true.
        public var deliver = true
        /// The delivery worker's lanes (in flight per hook, leases, retries).
        public var delivery = DeliveryWorker.Configuration()

        public init() {}
    }

    /// The live stream's limits.
    public struct StreamSettings: Sendable, Hashable {
        /// The most stream clients at once (apart from ``Configuration/maxConnections``: an upgraded
        /// connection leaves that count). The default is 4,096.
        public var maxClients = 4096
        /// The messages queued for one client before it is closed (1008). The default is 1,000.
        public var maxQueuedMessages = 1000
        /// The bytes queued for one client before it is closed (1008). The default is 1 MiB.
        public var maxQueuedBytes = 1 << 20
        /// How often a ping goes to each client. The default is 30 seconds.
        public var pingInterval: Duration = .seconds(30)
        /// After how long without a record a device is declared offline (an `offline` event; `online`
        /// when it sends again), on the server's clock. The default is 10 minutes.
        public var offlineAfter: Duration = .seconds(600)

        public init() {}
    }

    /// The map page's base map and library.
    public struct MapSettings: Sendable, Hashable {
        /// The raster tiles' URL template (`{z}`, `{x}`, `{y}`, `{s}`), or `nil` for a plain
        /// background. The default is OpenStreetMap's standard tiles.
        public var tiles: String? = MapSettings.openStreetMapTiles
        /// The tiles' attribution, shown on the map (HTML). The default is OpenStreetMap's.
        public var tilesAttribution =
            "&copy; <a href=\"https://www.openstreetmap.org/copyright\">OpenStreetMap</a> contributors"
        /// Where Leaflet is installed. The default is Debian's `libjs-leaflet`, /usr/share/javascript/leaflet.
        public var leafletDirectory = "/usr/share/javascript/leaflet"
        /// Where dygraphs, the replay's speed chart, is installed. The default is Debian's `libjs-dygraphs`,
        /// /usr/share/javascript/dygraphs; without it the page replays without the chart.
        public var chartDirectory = "/usr/share/javascript/dygraphs"

        public static let openStreetMapTiles = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"

        public init() {}
    }
}

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
        /// ``TrackServer/Configuration/homeAssistant``'s URL or CA file can't be used: why.
        case homeAssistant(MQTTError)
        /// An origin of ``TrackServer/Configuration/corsOrigins`` can't be one: why
        /// (``TrackServer/Configuration/corsOriginProblem(_:)``).
        case corsOrigin(TrackServerError)
        /// ``TrackServer/StreamSettings/maxClients`` is less than 1.
        case maxStreamsBelowOne
        /// ``TrackServer/StreamSettings/offlineAfter`` is less than a second.
        case offlineAfterBelowASecond
        /// ``TrackServer/Configuration/maxAccuracy`` is not a number of metres above 0.
        case maxAccuracyNotPositive
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
        if !(maxAccuracy > 0 && maxAccuracy.isFinite) { return .maxAccuracyNotPositive }
        if let mqtt {
            do { _ = try MQTTEndpoint(parsing: mqtt.url, wildcards: true) } catch { return .mqtt(error) }
        }
        if let homeAssistant {
            do { _ = try HomeAssistantRelay.endpoint(homeAssistant) } catch { return .homeAssistant(error) }
        }
        for origin in corsOrigins { if let why = Self.corsOriginProblem(origin) { return .corsOrigin(why) } }
        return nil
    }

    /// `seconds` as a duration to the millisecond (a `keeptrack serve` timeout option).
    public static func duration(seconds: Double) -> Duration {
        .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

extension TrackServer.Configuration {
    /// What is wrong with an origin of ``corsOrigins``, or `nil`: it must be `*` or
    /// `scheme://host[:port]` (what browsers send as `Origin`: no path, no trailing slash).
    ///
    /// - Returns: a ``TrackServerError`` (``TrackServerError/Code/corsOriginNotAnOrigin``,
    ///   ``TrackServerError/Code/corsOriginWithoutScheme``, ``TrackServerError/Code/corsOriginWithPath``)
    ///   whose ``TrackServerError/field`` is `corsOrigins` and ``TrackServerError/value`` the origin.
    public static func corsOriginProblem(_ origin: String) -> TrackServerError? {
        func problem(_ code: TrackServerError.Code, _ why: String) -> TrackServerError {
            TrackServerError(code, "'\(origin)' \(why)", field: "corsOrigins", value: origin)
        }
        if origin == "*" { return nil }
        guard let schemeEnd = origin.range(of: "://") else {
            return problem(.corsOriginNotAnOrigin, "is not scheme://host[:port]")
        }
        let scheme = origin[..<schemeEnd.lowerBound], host = origin[schemeEnd.upperBound...]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) }) else {
            return problem(.corsOriginWithoutScheme, "has no scheme (http:// or https://)")
        }
        guard !host.isEmpty, !host.contains("/"), !host.contains(where: { $0.isWhitespace || $0 == "," }) else {
            return problem(.corsOriginWithPath, "must be scheme://host[:port], without a path or a trailing slash")
        }
        return nil
    }
}

extension TrackServer {
    /// The rates of share links' requests (docs/limits.md): each share's, and that of tokens that are
    /// no share's (all of them together), each a number of requests a minute, as many at once.
    public struct ShareLimits: Sendable {
        /// The default is 600 (ten a second: a day's map reads its trail a page at a time).
        public var perMinute = 600
        /// The default is 60.
        public var unknownPerMinute = 60

        public init() {}
    }
}
