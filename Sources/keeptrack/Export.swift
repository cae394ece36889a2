import ArgumentParser
import SystemIO
import Tracking
import Formats
import TrackServer

#if canImport(Glibc)
import Glibc
#endif

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export a stored trail as a picture (SVG), GeoJSON or GPX.",
        discussion: """
            Reads a trail from the endpoint's database (the embedded endpoint's, in the data \
            directory, by default) and writes it to standard output or --output. The SVG draws the \
            track, the regions of --regions, the stops (5 minutes within 50 m), region enter and \
            exit points, start and end, and a scale: no map tiles, nothing fetched.

            Examples:
              keeptrack replay --upload embedded --regions fixtures/walk-15min.regions.geojson fixtures/walk-15min.nmea
              keeptrack export --format svg --regions fixtures/walk-15min.regions.geojson --output walk.svg
              keeptrack export --db endpoint.sqlite --device van-1 --from 2024-06-11T12:00:00Z --format gpx
            """
    )

    @Option(help: "svg, geojson or gpx. The default is svg.")
    var format: String = "svg"

    @Option(help: ArgumentHelp("The endpoint's database. Default: endpoint.sqlite in the data directory.", valueName: "file"))
    var db: String?

    @Option(help: ArgumentHelp("The device (needed when the database holds several).", valueName: "id"))
    var device: String?

    @Option(help: ArgumentHelp("From this time (ISO 8601 UTC).", valueName: "time"))
    var from: String?

    @Option(help: ArgumentHelp("Up to this time (ISO 8601 UTC).", valueName: "time"))
    var to: String?

    @Option(help: ArgumentHelp("Draw these regions (GeoJSON, as --regions of replay).", valueName: "file.geojson"))
    var regions: String?

    @Option(help: ArgumentHelp("Write here instead of standard output.", valueName: "file"))
    var output: String?

    @OptionGroup var data: DataDirectoryOption

    func validate() throws {
        if !["svg", "geojson", "gpx"].contains(format) { throw ValidationError("--format must be svg, geojson or gpx.") }
        for (name, value) in [("--from", from), ("--to", to)] {
            if let value, ISOTime.parse(value) == nil {
                throw ValidationError("\(name) takes an ISO 8601 UTC time (2024-06-11T12:00:00Z), got '\(value)'.")
            }
        }
    }

    func run() throws {
        let path = db ?? data.directory + "/endpoint.sqlite"
        guard access(path, F_OK) == 0 else {
            throw ValidationError("no endpoint database at \(path): run `keeptrack replay --upload embedded ...` "
                + "or name one with --db.")
        }
        let store: TrackStore
        do {
            store = try TrackStore(path: path)
        } catch {
            throw ValidationError("cannot open \(path): \(error)")
        }
        let devices = try store.devices()
        let id: String
        if let device {
            guard devices.contains(where: { $0.id == device }) else {
                throw ValidationError("no device '\(device)' in \(path); it has: "
                    + devices.map(\.id).joined(separator: ", "))
            }
            id = device
        } else {
            guard devices.count == 1 else {
                throw ValidationError(devices.isEmpty ? "\(path) holds no trail yet."
                    : "\(path) holds several devices; choose one with --device: " + devices.map(\.id).joined(separator: ", "))
            }
            id = devices[0].id
        }
        let records = try store.trail(device: id, from: from.flatMap(ISOTime.parse) ?? -.infinity,
                                      to: to.flatMap(ISOTime.parse) ?? .infinity)
        var definitions: [RegionDefinition] = []
        if let regions {
            do {
                definitions = try RegionDefinition.parseGeoJSON(try readFile(regions))
            } catch {
                throw ValidationError("--regions \(regions): \(error)")
            }
        }
        let bytes: [UInt8] = switch format {
        case "svg": Array(TrailSVG.render(title: id, records: records, regions: definitions).utf8)
        case "gpx": TrailExport.gpx(device: id, records: records)
        default: TrailExport.geoJSON(device: id, records: records)
        }
        if let output {
            try writeFile(output, bytes)
            printError("\(output): \(records.filter { $0.kind == .location }.count) points of \(id)")
        } else {
            var out = OutputBuffer()
            out.bytes = bytes
            try out.flush()
        }
    }
}
