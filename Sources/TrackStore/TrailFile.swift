import Formats
import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// A stored trail as a file: `svg` (with `regions` drawn), `gpx`, `geojson`, or `trips` (GPX, one track
/// per trip).
public struct TrailFile: Sendable {
    /// The device whose trail it is.
    public var device: String
    public var bytes: [UInt8]
    /// Locations in it (region events not counted).
    public var points: Int
    /// With `trips`: the trips in it (tracks); `nil` for the other formats.
    public var trips: Int? = nil
}

extension TrailFile {
    /// The regions of the GeoJSON file `path` (none without one), to draw on an SVG.
    ///
    /// - Throws: ``TrailExportError`` naming the file and what is wrong with it.
    public static func regions(_ path: String?) throws(TrailExportError) -> [RegionDefinition] {
        guard let path else { return [] }
        do {
            return try RegionDefinition.parseGeoJSON(try readFile(path))
        } catch {
            throw TrailExportError(.regionsFile, path, underlying: error)
        }
    }
}

/// Why a trail can't be exported: what (``code``, ``message``) and where, with the cause kept in
/// ``underlying``.
public struct TrailExportError: Error, CustomStringConvertible {
    /// The kind of problem, for a caller that says what to do about it.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// There is no database to read.
        public static let noDatabase = Code(rawValue: "no-database")
        /// The store holds several devices and none was named: the message lists them.
        public static let severalDevices = Code(rawValue: "several-devices")
        /// The store holds no trail yet.
        public static let noTrail = Code(rawValue: "no-trail")
        /// The device named is not in the store: the message lists those it has.
        public static let unknownDevice = Code(rawValue: "unknown-device")
        /// The regions file to draw can't be read (``TrailExportError/underlying`` says why).
        public static let regionsFile = Code(rawValue: "regions-file")
        /// The store can't be opened or read (``TrailExportError/underlying``: the store's error).
        public static let unreadable = Code(rawValue: "unreadable")
    }

    public var code: Code
    /// What is missing or wrong, and where, without the cause (empty when the cause says it all).
    public var message: String
    /// The error this one comes from (the store's, the regions file's), when there is one.
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// The message, then the cause.
    public var description: String {
        guard let underlying else { return message }
        return message.isEmpty ? "\(underlying)" : "\(message): \(underlying)"
    }
}

extension TrackStore {
    /// `device`'s trail between `from` and `to` (seconds since 1970) in `format` (`svg`, `gpx`, `geojson`,
    /// or `trips`: GPX with one track per trip, as `/trips?format=gpx`); with no `device`,
    /// the only one stored. The trail is read in pages of `pageSize`; `progress`, when given, hears
    /// the records read so far and the device's total after each. With `smooth`, the locations are drawn
    /// and written at their smoothed positions (``TrailRecord/smoothed(_:)``). The visits an SVG
    /// draws and the trips it colours or `trips` writes are the store's
    /// (``StopStore/stops(device:from:to:configuration:)``, as the stops and trips routes answer):
    /// those kept at ingest with the outlier threshold the endpoint judged with, found in the
    /// unsmoothed locations.
    ///
    /// - Throws: ``TrailExportError`` when the device is unknown, or none was named and the store holds
    ///   none or several.
    public func export(
        device: String?, from: Double = -.infinity, to: Double = .infinity, format: String,
        regions: [RegionDefinition] = [], progress: ((_ read: Int, _ total: Int) -> Void)? = nil,
        pageSize: Int = 10_000, smooth: Bool = false
    ) async throws -> TrailFile {
        let devices = try await self.devices()
        let id: String
        let total: Int
        if let device {
            guard let summary = devices.first(where: { $0.id == device }) else {
                throw TrailExportError(
                    .unknownDevice,
                    "no device '\(device)' in \(location); it has: "
                        + devices.map(\.id).joined(separator: ", "))
            }
            id = device
            total = summary.points
        } else {
            guard devices.count == 1 else {
                if devices.isEmpty { throw TrailExportError(.noTrail, "\(location) holds no trail yet.") }
                throw TrailExportError(
                    .severalDevices,
                    "\(location) holds several devices: "
                        + devices.map(\.id).joined(separator: ", "))
            }
            id = devices[0].id
            total = devices[0].points
        }
        var records: [TrailRecord] = []
        var cursor: TrailCursor?
        repeat {
            let page = try await trail(device: id, from: from, to: to, after: cursor, limit: pageSize)
            records += page.records
            cursor = page.next
            progress?(records.count, Swift.max(total, records.count))
        } while cursor != nil
        let shown = smooth ? TrailRecord.smoothed(records) : records
        // The visits and trips the endpoint serves (the stops and trips routes' call): kept at ingest
        // with the threshold the endpoint judged with, computed first when never computed.
        let bytes: [UInt8]
        var trips: Int?
        switch format {
        case "svg":
            let marks = try await stops(device: id, from: from, to: to).marks
            bytes = Array(TrailSVG.render(title: id, records: shown, regions: regions, marks: marks).utf8)
        case "gpx": bytes = TrailExport.gpx(device: id, records: shown)
        case "trips":
            let stops = try await stops(device: id, from: from, to: to)
            trips = stops.trips.count
            bytes = stops.tripsGPX(device: id, records: shown)
        default: bytes = TrailExport.geoJSON(device: id, records: shown)
        }
        return TrailFile(
            device: id, bytes: bytes, points: records.filter { $0.kind == .location }.count, trips: trips)
    }
}
