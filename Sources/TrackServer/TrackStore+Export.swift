import Formats
import SystemIO

#if canImport(Glibc)
import Glibc
#endif

extension TrackStore {
    /// A stored trail as a file: `svg` (with `regions` drawn), `gpx` or `geojson`.
    public struct Export: Sendable {
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

    /// Why a trail can't be exported: a sentence naming what to choose instead.
    public struct ExportError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The trail of `device` (the only one stored when nil) from the database at `path`, which must
    /// exist, with the regions of the GeoJSON file `regions` drawn (`svg`). `progress`, when given,
    /// hears the records read so far and the device's total as the trail is read.
    ///
    /// - Throws: ``ExportError`` saying what is missing or can't be read, and what to do.
    public static func export(path: String, device: String?, from: Double, to: Double, format: String,
                              regions: String?, progress: ((_ read: Int, _ total: Int) -> Void)? = nil)
        throws(ExportError) -> Export {
        guard access(path, F_OK) == 0 else {
            throw ExportError(description: "no endpoint database at \(path): run `keeptrack replay --upload embedded ...` "
                + "or name one with --db.")
        }
        let store: TrackStore
        do {
            store = try TrackStore(path: path)
        } catch {
            throw ExportError(description: "cannot open \(path): \(error)")
        }
        var definitions: [RegionDefinition] = []
        if let regions {
            do {
                definitions = try RegionDefinition.parseGeoJSON(try readFile(regions))
            } catch {
                throw ExportError(description: "--regions \(regions): \(error)")
            }
        }
        do {
            return try store.export(device: device, from: from, to: to, format: format, regions: definitions,
                                    progress: progress)
        } catch let error as ExportError {
            throw error
        } catch {
            throw ExportError(description: "cannot read \(path): \(error)")
        }
    }

    /// `device`'s trail between `from` and `to` (seconds since 1970) in `format`; with no `device`,
    /// the only one stored. With `progress`, the trail is read in pages of `pageSize` and `progress`
    /// hears the records read so far and the device's total after each.
    ///
    /// - Throws: ``ExportError`` when the device is unknown, or none was named and the store holds
    ///   none or several.
    public func export(device: String?, from: Double = -.infinity, to: Double = .infinity, format: String,
                       regions: [RegionDefinition] = [], progress: ((_ read: Int, _ total: Int) -> Void)? = nil,
                       pageSize: Int = 10_000) throws -> Export {
        let devices = try self.devices()
        let id: String
        let total: Int
        if let device {
            guard devices.contains(where: { $0.id == device }) else {
                throw ExportError(description: "no device '\(device)' in \(path); it has: "
                    + devices.map(\.id).joined(separator: ", "))
            }
            id = device
            total = devices.first { $0.id == device }?.points ?? 0
        } else {
            guard devices.count == 1 else {
                throw ExportError(description: devices.isEmpty ? "\(path) holds no trail yet."
                    : "\(path) holds several devices; choose one with --device: " + devices.map(\.id).joined(separator: ", "))
            }
            id = devices[0].id
            total = devices[0].points
        }
        var records: [TrailRecord] = []
        if let progress {
            var cursor: Cursor?
            repeat {
                let page = try trail(device: id, from: from, to: to, after: cursor, limit: pageSize)
                records += page.records
                cursor = page.next
                progress(records.count, Swift.max(total, records.count))
            } while cursor != nil
        } else {
            records = try trail(device: id, from: from, to: to)
        }
        let bytes: [UInt8] = switch format {
        case "svg": Array(TrailSVG.render(title: id, records: records, regions: regions).utf8)
        case "gpx": TrailExport.gpx(device: id, records: records)
        default: TrailExport.geoJSON(device: id, records: records)
        }
        return Export(device: id, bytes: bytes, points: records.filter { $0.kind == .location }.count)
    }
}
