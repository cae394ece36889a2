/// One GNSS epoch: everything a receiver said about one instant, merged from its sentences.
///
/// Unknown values are `nil`. A fix whose ``mode`` is ``Mode/none`` carries no usable position even
/// when the receiver repeated a stale one; ``hasPosition`` is the test consumers use.
public struct Fix: Hashable, Sendable {
    /// The receiver's fix dimension.
    public enum Mode: UInt8, Hashable, Sendable, Codable {
        case none = 1
        case twoD = 2
        case threeD = 3

        /// `"none"`, `"2d"` or `"3d"`, as printed by `keeptrack decode`.
        public var name: String {
            switch self {
            case .none: "none"
            case .twoD: "2d"
            case .threeD: "3d"
            }
        }
    }

    /// How the position was obtained (GGA quality, GNS/RMC mode indicator).
    public enum Quality: UInt8, Hashable, Sendable, Codable {
        case invalid = 0
        case gps = 1
        case dgps = 2
        case pps = 3
        case rtkFixed = 4
        case rtkFloat = 5
        case estimated = 6
        case manual = 7
        case simulated = 8

        public var name: String { staticName.description }

        /// ``name`` as static text, for writers that append bytes.
        public var staticName: StaticString {
            switch self {
            case .invalid: "invalid"
            case .gps: "gps"
            case .dgps: "dgps"
            case .pps: "pps"
            case .rtkFixed: "rtk-fixed"
            case .rtkFloat: "rtk-float"
            case .estimated: "estimated"
            case .manual: "manual"
            case .simulated: "simulated"
            }
        }
    }

    /// Where ``horizontalAccuracy`` and ``verticalAccuracy`` came from.
    public enum AccuracySource: UInt8, Hashable, Sendable, Codable {
        /// The receiver's own error estimate (NMEA GST sigmas, gpsd eph/epv).
        case receiver
        /// Estimated from dilution of precision: DOP × ``Fix/uere``.
        case dopEstimate
    }

    /// A set of GNSS constellations.
    public struct Systems: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        public static let gps = Systems(rawValue: 1 << 0)
        public static let glonass = Systems(rawValue: 1 << 1)
        public static let galileo = Systems(rawValue: 1 << 2)
        public static let beidou = Systems(rawValue: 1 << 3)
        public static let qzss = Systems(rawValue: 1 << 4)
        public static let navic = Systems(rawValue: 1 << 5)
    }

    /// The user-equivalent range error, in metres, used to turn DOP into an accuracy when the
    /// receiver gives no error estimate of its own: `hAcc = HDOP × 5.0 m`, `vAcc = VDOP × 5.0 m`.
    ///
    /// 5 m is a typical 1-sigma UERE for single-frequency GPS without corrections; with HDOP ≈ 1
    /// it gives the ~5 m radius phones report outdoors. Differential fixes use the same constant
    /// (conservative).
    public static let uere: Double = 5.0

    /// UTC time of the epoch, or `nil` when none of its sentences carried a time.
    public var time: GNSSTime?
    /// Latitude and longitude, when the epoch had a position.
    public var coordinate: Coordinate?
    /// Altitude above mean sea level, in metres.
    public var altitudeMSL: Double?
    /// Geoid separation (ellipsoid height minus MSL height), in metres.
    public var geoidSeparation: Double?
    /// Speed over ground, in metres per second.
    public var speed: Double?
    /// Course over ground, degrees clockwise from true north, in 0..<360.
    public var course: Double?
    /// Magnetic variation, degrees, east positive.
    public var magneticVariation: Double?
    /// Fix dimension. Defaults to ``Mode/none``.
    public var mode: Mode
    /// Positioning quality, when a sentence stated it.
    public var quality: Quality?
    /// Satellites used in the solution.
    public var satellitesUsed: Int?
    /// Satellites in view, summed over constellations.
    public var satellitesInView: Int?
    public var hdop: Double?
    public var vdop: Double?
    public var pdop: Double?
    /// Horizontal accuracy: radius in metres (1-sigma, DRMS) around ``coordinate``.
    public var horizontalAccuracy: Double?
    /// Vertical accuracy in metres (1-sigma).
    public var verticalAccuracy: Double?
    /// Where the accuracies came from.
    public var accuracySource: AccuracySource?
    /// Constellations that contributed sentences to the epoch.
    public var systems: Systems
    /// First and last line of the source (1-based) that contributed to this epoch, when known.
    public var lines: ClosedRange<Int>?

    @inlinable
    public init(
        time: GNSSTime? = nil, coordinate: Coordinate? = nil, altitudeMSL: Double? = nil,
        geoidSeparation: Double? = nil, speed: Double? = nil, course: Double? = nil,
        magneticVariation: Double? = nil, mode: Mode = .none, quality: Quality? = nil,
        satellitesUsed: Int? = nil, satellitesInView: Int? = nil, hdop: Double? = nil, vdop: Double? = nil,
        pdop: Double? = nil, horizontalAccuracy: Double? = nil, verticalAccuracy: Double? = nil,
        accuracySource: AccuracySource? = nil, systems: Systems = [], lines: ClosedRange<Int>? = nil
    ) {
        self.time = time
        self.coordinate = coordinate
        self.altitudeMSL = altitudeMSL
        self.geoidSeparation = geoidSeparation
        self.speed = speed
        self.course = course
        self.magneticVariation = magneticVariation
        self.mode = mode
        self.quality = quality
        self.satellitesUsed = satellitesUsed
        self.satellitesInView = satellitesInView
        self.hdop = hdop
        self.vdop = vdop
        self.pdop = pdop
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.accuracySource = accuracySource
        self.systems = systems
        self.lines = lines
    }

    /// Whether the epoch has a usable 2D or 3D position.
    @inlinable
    public var hasPosition: Bool { mode != .none && coordinate != nil }

    /// Height above the WGS84 ellipsoid, when both MSL altitude and geoid separation are known.
    public var altitudeHAE: Double? {
        guard let altitudeMSL, let geoidSeparation else { return nil }
        return altitudeMSL + geoidSeparation
    }
}

extension Fix: CustomStringConvertible {
    /// Leaves the coordinate out: a trail is personal data.
    public var description: String {
        "Fix(time: \(time.map(\.iso8601) ?? "nil"), mode: \(mode.name), hasPosition: \(hasPosition))"
    }
}
