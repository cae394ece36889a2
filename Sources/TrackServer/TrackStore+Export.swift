import Formats
import SystemIO

#if canImport(Glibc)
import Glibc
#endif

/// A stored trail as a file: `svg` (with `regions` drawn), `gpx` or `geojson`.
public struct TrailFile: Sendable {
    /// The device whose trail it is.
    public var device: String
    public var bytes: [UInt8]
    /// Locations in it (region events not counted).
    public var points: Int

    /// The progress line of an export: `exporting: 46%  40,000 of 86,397 records read`.
    public static func progress(_ read: Int, of total: Int) -> String {
        "exporting: \(read * 100 / Swift.max(total, 1))%  \(grouped(read)) of \(grouped(total)) records read"
    }
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
            throw TrailExportError(description: "--regions \(path): \(error)")
        }
    }
}

/// Why a trail can't be exported: a sentence naming what to choose instead.
public struct TrailExportError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) { self.description = description }
}

extension TrackStore {
    public typealias Export = TrailFile
    public typealias ExportError = TrailExportError

    /// `device`'s trail between `from` and `to` (seconds since 1970) in `format`; with no `device`,
    /// the only one stored. The trail is read in pages of `pageSize`; `progress`, when given, hears
    /// the records read so far and the device's total after each.
    ///
    /// - Throws: ``ExportError`` when the device is unknown, or none was named and the store holds
    ///   none or several.
    public func export(device: String?, from: Double = -.infinity, to: Double = .infinity, format: String,
                       regions: [RegionDefinition] = [], progress: ((_ read: Int, _ total: Int) -> Void)? = nil,
                       pageSize: Int = 10_000) async throws -> TrailFile {
        let devices = try await self.devices()
        let id: String
        let total: Int
        if let device {
            guard let summary = devices.first(where: { $0.id == device }) else {
                throw TrailExportError(description: "no device '\(device)' in \(location); it has: "
                    + devices.map(\.id).joined(separator: ", "))
            }
            id = device
            total = summary.points
        } else {
            guard devices.count == 1 else {
                throw TrailExportError(description: devices.isEmpty ? "\(location) holds no trail yet."
                    : "\(location) holds several devices; choose one with --device: " + devices.map(\.id).joined(separator: ", "))
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
        let bytes: [UInt8] = switch format {
        case "svg": Array(TrailSVG.render(title: id, records: records, regions: regions).utf8)
        case "gpx": TrailExport.gpx(device: id, records: records)
        default: TrailExport.geoJSON(device: id, records: records)
        }
        return TrailFile(device: id, bytes: bytes, points: records.filter { $0.kind == .location }.count)
    }
}

extension SQLiteTrackStore {
    /// The trail of `device` (the only one stored when nil) from the database at `path`, which must
    /// exist, with the regions of the GeoJSON file `regions` drawn (`svg`). `progress`, when given,
    /// hears the records read so far and the device's total as the trail is read.
    ///
    /// - Throws: ``TrailExportError`` saying what is missing or can't be read, and what to do.
    public static func export(path: String, device: String?, from: Double, to: Double, format: String,
                              regions: String?, progress: ((_ read: Int, _ total: Int) -> Void)? = nil)
        async throws(TrailExportError) -> TrailFile {
        guard access(path, F_OK) == 0 else {
            throw TrailExportError(description: "no endpoint database at \(path): run `keeptrack replay --upload embedded ...` "
                + "or name one with --db.")
        }
        let store: SQLiteTrackStore
        do {
            store = try SQLiteTrackStore(path: path)
        } catch {
            throw TrailExportError(description: "cannot open \(path): \(error)")
        }
        let definitions = try TrailFile.regions(regions)
        do {
            return try await store.export(device: device, from: from, to: to, format: format, regions: definitions,
                                          progress: progress)
        } catch let error as TrailExportError {
            throw error
        } catch {
            throw TrailExportError(description: "cannot read \(path): \(error)")
        }
    }
}
