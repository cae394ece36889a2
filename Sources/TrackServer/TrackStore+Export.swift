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
            throw TrailExportError(description: path, underlying: error)
        }
    }
}

/// Why a trail can't be exported: a sentence saying what is missing or wrong.
public struct TrailExportError: Error, CustomStringConvertible {
    /// What kind of problem it is, for a caller that says what to do about it.
    public enum Code: Sendable, Hashable {
        /// There is no database to read.
        case noDatabase
        /// The store holds several devices and none was named: the description lists them.
        case severalDevices
        /// Anything else: a device unknown, a store that can't be read.
        case other
    }

    public var code: Code
    /// What is missing or wrong, and where, without the cause.
    public var message: String
    /// The error this one comes from (the store's, the regions file's), when there is one.
    public var underlying: (any Error)?

    /// - Parameter description: the sentence (the cause, when given, follows it).
    public init(_ code: Code = .other, description: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = description
        self.underlying = underlying
    }

    public var description: String {
        guard let underlying else { return message }
        return message.isEmpty ? "\(underlying)" : "\(message): \(underlying)"
    }
}

extension TrackStore {
    public typealias Export = TrailFile
    public typealias ExportError = TrailExportError

    /// `device`'s trail between `from` and `to` (seconds since 1970) in `format` (`svg`, `gpx`, `geojson`,
    /// or `trips`: GPX with one track per trip, as `/trips?format=gpx`); with no `device`,
    /// the only one stored. The trail is read in pages of `pageSize`; `progress`, when given, hears
    /// the records read so far and the device's total after each.
    ///
    /// - Throws: ``ExportError`` when the device is unknown, or none was named and the store holds
    ///   none or several.
    public func export(
        device: String?, from: Double = -.infinity, to: Double = .infinity, format: String,
        regions: [RegionDefinition] = [], progress: ((_ read: Int, _ total: Int) -> Void)? = nil,
        pageSize: Int = 10_000
    ) async throws -> TrailFile {
        let devices = try await self.devices()
        let id: String
        let total: Int
        if let device {
            guard let summary = devices.first(where: { $0.id == device }) else {
                throw TrailExportError(
                    description: "no device '\(device)' in \(location); it has: "
                        + devices.map(\.id).joined(separator: ", "))
            }
            id = device
            total = summary.points
        } else {
            guard devices.count == 1 else {
                if devices.isEmpty { throw TrailExportError(description: "\(location) holds no trail yet.") }
                throw TrailExportError(
                    .severalDevices,
                    description: "\(location) holds several devices: "
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
        let bytes: [UInt8] =
            switch format {
            case "svg":
                // Visits and trips marked as the endpoint's stops and trips find them (issue 27).
                Array(
                    TrailSVG.render(
                        title: id, records: records, regions: regions,
                        marks: StopsReport(records: records).marks
                    ).utf8)
            case "gpx": TrailExport.gpx(device: id, records: records)
            case "trips": StopsReport(records: records).tripsGPX(device: id, records: records)
            default: TrailExport.geoJSON(device: id, records: records)
            }
        return TrailFile(device: id, bytes: bytes, points: records.filter { $0.kind == .location }.count)
    }
}
