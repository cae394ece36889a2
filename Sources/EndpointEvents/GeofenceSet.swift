import Geo
import LocationService

#if canImport(Glibc)
    import Glibc
#endif

/// The endpoint's geofences indexed for evaluation, shared by every device's (``GeofenceState``):
/// which geofences a location's grid cell lists, by the grid the device's ``RegionMonitor`` uses.
///
/// Each geofence carries the ``revision`` its store gave it when it was last put, and the set its
/// ``generation``, which moves with every change (a put, a removal): a device's state notices a
/// change by the generation, and finds the geofences it has never evaluated (new or replaced) as
/// those of a revision past the generation it last saw.
///
/// Immutable once built: copies share their storage. Building one of 100,000 geofences takes a sort
/// of their cells.
public struct GeofenceSet: Sendable {
    struct Slot: Sendable {
        var geofence: Geofence
        var revision: UInt64
    }

    /// What a location must be near for a geofence to be inside by a margin, tested before the
    /// exact distance: for a circle of at most ``planarRadiusLimit`` centred within
    /// ``planarLatitudeLimit`` of the equator, its centre and radius (a planar distance in a local
    /// projection, allowing 1 % + 1 m for its error, as the device's monitor's cheap test does); for
    /// any other geofence its bounds (`radius` negative).
    struct Probe: Sendable {
        var latitude: Double
        var longitude: Double
        var radius: Double
        var south: Double
        var west: Double
        var north: Double
        var east: Double
        /// Whether the geofence applies to every device.
        var everyDevice: Bool

        static let planarRadiusLimit = 10_000.0
        static let planarLatitudeLimit = 70.0

        init(_ g: Geofence) {
            everyDevice = g.devices == nil
            let b = g.region.bounds
            (south, west, north, east) = (b.south, b.west, b.north, b.east)
            if case .circle(let c, let r) = g.region.shape, r <= Self.planarRadiusLimit,
                abs(c.latitude) <= Self.planarLatitudeLimit
            {
                (latitude, longitude, radius) = (c.latitude, c.longitude, r)
            } else {
                (latitude, longitude, radius) = (0, 0, -1)
            }
        }

        /// A location as the cheap test takes it: its metres per degree of longitude computed once,
        /// not once for each geofence its cell lists.
        struct Location {
            var latitude: Double
            var longitude: Double
            /// Metres per degree of longitude at `latitude`, in the planar projection.
            var metresPerDegreeLongitude: Double

            init(latitude: Double, longitude: Double) {
                (self.latitude, self.longitude) = (latitude, longitude)
                metresPerDegreeLongitude = Probe.metresPerDegree * cos(latitude * .pi / 180)
            }
        }

        static let metresPerDegree = Geodesy.meanRadius * .pi / 180

        /// Whether `location` may be inside by `margin` metres: `false` only when it certainly is
        /// not.
        @inline(__always)
        func mayBeInside(_ location: Location, margin: Double) -> Bool {
            let (lat, lon) = (location.latitude, location.longitude)
            if radius >= 0 {
                var dLon = lon - longitude
                if dLon > 180 { dLon -= 360 } else if dLon < -180 { dLon += 360 }
                let dx = dLon * location.metresPerDegreeLongitude
                let dy = (lat - latitude) * Self.metresPerDegree
                let reach = max(0, radius - margin) * 1.01 + 1
                return dx * dx + dy * dy <= reach * reach
            }
            // Bounds: an unwrapped polygon's longitudes may pass ±180; the location's twins are tried.
            guard lat >= south - 1e-9, lat <= north + 1e-9 else { return false }
            for shift in [0.0, 360, -360] {
                let x = lon + shift
                if x >= west - 1e-9 && x <= east + 1e-9 { return true }
            }
            return false
        }
    }

    /// Moves with every change of the geofences (the store's counter).
    public let generation: UInt64
    /// By revision, oldest first (then by name: the same geofences give the same slots).
    let slots: [Slot]
    /// The slots' probes, in the slots' order.
    let probes: [Probe]
    let byName: [String: Int32]
    /// `cell << 32 | slot`, sorted: the geofences each cell lists.
    let index: [UInt64]
    /// Geofences over more than ``maximumCells`` cells: tested against the cell's span instead.
    let large: [(slot: Int32, span: RegionGrid.Span)]
    let grid: RegionGrid

    /// The grid's cell size in degrees (about 1.1 km north-south).
    public static let cellDegrees = 0.01
    /// A geofence over more cells than this is not listed cell by cell.
    static let maximumCells = 64

    /// The empty set.
    public init() {
        self.init([], generation: 0)
    }

    /// Every geofence at revision 1, generation 1: a set that never changes.
    public init(_ geofences: [Geofence]) {
        self.init(geofences.map { ($0, 1) }, generation: geofences.isEmpty ? 0 : 1)
    }

    /// - Parameters:
    ///   - geofences: each with the revision its store gave it (at most `generation`); names unique.
    ///   - generation: the store's counter of changes.
    public init(_ geofences: [(geofence: Geofence, revision: UInt64)], generation: UInt64) {
        precondition(geofences.allSatisfy { $0.revision <= generation }, "a revision past the set's generation")
        self.generation = generation
        let grid = RegionGrid(cellDegrees: Self.cellDegrees)
        self.grid = grid
        let sorted = geofences.sorted { ($0.revision, $0.geofence.name) < ($1.revision, $1.geofence.name) }
        slots = sorted.map { Slot(geofence: $0.geofence, revision: $0.revision) }
        probes = slots.map { Probe($0.geofence) }
        var byName: [String: Int32] = [:]
        byName.reserveCapacity(slots.count)
        var words: [UInt64] = []
        words.reserveCapacity(slots.count * 2)
        var large: [(slot: Int32, span: RegionGrid.Span)] = []
        for (i, slot) in slots.enumerated() {
            let previous = byName.updateValue(Int32(i), forKey: slot.geofence.name)
            precondition(previous == nil, "two geofences named \(slot.geofence.name)")
            let span = grid.span(of: slot.geofence.region)
            if span.count > Self.maximumCells {
                large.append((slot: Int32(i), span: span))
            } else {
                grid.forEachCell(of: slot.geofence.region) { words.append($0 << 32 | UInt64(i)) }
            }
        }
        words.sort()
        index = words
        self.byName = byName
        self.large = large
    }

    /// How many geofences.
    public var count: Int { slots.count }

    /// The geofences, oldest revision first.
    public var geofences: [Geofence] { slots.map(\.geofence) }

    /// The geofence named `name`.
    public subscript(name: String) -> Geofence? {
        byName[name].map { slots[Int($0)].geofence }
    }

    /// The revision of the geofence named `name`.
    func revision(of name: String) -> UInt64? {
        byName[name].map { slots[Int($0)].revision }
    }

    /// Calls `body` with each slot the cell of `point` lists (whose bounds touch it), in slot order
    /// within the index, then the large ones that cover it.
    func forEachCandidate(at point: Coordinate, _ body: (Int32) -> Void) {
        let cell = grid.cellNumber(latitude: point.latitude, longitude: point.longitude)
        let key = cell << 32
        var lo = 0, hi = index.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if index[mid] < key { lo = mid + 1 } else { hi = mid }
        }
        while lo < index.count && index[lo] >> 32 == cell {
            body(Int32(truncatingIfNeeded: index[lo] & 0xFFFF_FFFF))
            lo += 1
        }
        for (slot, span) in large where span.contains(cell) { body(slot) }
    }

    /// The slots whose revision is past `generation`, oldest first.
    func slots(after generation: UInt64) -> Range<Int> {
        var lo = 0, hi = slots.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if slots[mid].revision <= generation { lo = mid + 1 } else { hi = mid }
        }
        return lo..<slots.count
    }
}
