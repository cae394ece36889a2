import ArgumentParser
import SystemIO
import Tracking
import Formats
import TrackStore
import TrackStorePostgres

#if canImport(Glibc)
    import Glibc
#endif

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export a stored trail as a picture (SVG), GeoJSON or GPX.",
        discussion: """
            Reads a trail from the endpoint's database (the embedded endpoint's, in the data \
            directory, by default) and writes it to standard output or --output. The SVG draws the \
            track, the regions of --regions, the visits (a stay of 3 minutes or more, with its \
            times and duration) and each trip between them in a colour of its own, region enter \
            and exit points, start and end, and a scale: no map tiles, nothing fetched. --trips \
            writes GPX with one track per trip (as GET /v1/devices/ID/trips?format=gpx). The visits \
            and trips are those the endpoint kept (as GET /v1/devices/ID/stops and /trips answer), \
            judged with serve's --max-accuracy; give export the same --max-accuracy for a device \
            whose stops were never kept (a database upgraded), which export keeps first. Locations \
            the endpoint marked outliers (a 0,0 point, a 1,500 m fix, a jump and back) are left out; \
            --smooth writes smoothed positions (as GET /v1/devices/ID/trail?smooth=kalman).

            Examples:
              keeptrack replay --upload embedded \\
                --regions fixtures/walk-15min.regions.geojson fixtures/walk-15min.nmea
              keeptrack export --format svg \\
                --regions fixtures/walk-15min.regions.geojson --output walk.svg
              keeptrack export --db endpoint.sqlite --device van-1 \\
                --from 2024-06-11T12:00:00Z --format gpx
              keeptrack export --trips --output trips.gpx
            """
    )

    @Option(help: "svg, geojson or gpx.")
    var format: String = "svg"

    @Option(
        help: ArgumentHelp(
            "The endpoint's database, a file or postgres://... Default: endpoint.sqlite in the data directory.",
            valueName: "file|url"))
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

    @Flag(help: "Write the trips between visits: GPX, one track per trip (instead of --format).")
    var trips = false

    @Flag(
        help:
            "Write smoothed positions (a Kalman filter and smoother weighted by each fix's accuracy) instead of the raw ones."
    )
    var smooth = false

    @Option(
        help: ArgumentHelp(
            "Serve's --max-accuracy, for a device whose stops and trips the endpoint never kept (a "
                + "database upgraded): export keeps them first, locations with an accuracy worse than this "
                + "left out as outliers (those kept keep the threshold they were judged with). The default is 200.",
            valueName: "metres"))
    var maxAccuracy: Double?

    @OptionGroup var data: DataDirectoryOption

    func validate() throws {
        if let maxAccuracy, !(maxAccuracy > 0 && maxAccuracy.isFinite) {
            throw ValidationError("--max-accuracy must be a number of metres above 0.")
        }
        if !["svg", "geojson", "gpx"].contains(format) {
            throw ValidationError("--format must be svg, geojson or gpx.")
        }
        if trips && format == "geojson" {
            throw ValidationError("--trips writes GPX (one track per trip): leave out --format geojson.")
        }
        for (name, value) in [("--from", from), ("--to", to)] {
            if let value, ISOTime.parse(value) == nil {
                throw ValidationError("\(name) takes an ISO 8601 UTC time (2024-06-11T12:00:00Z), got '\(value)'.")
            }
        }
    }

    func run() async throws {
        let definitions: [RegionDefinition]
        do {
            definitions = try TrailFile.regions(regions)
        } catch {
            throw ValidationError("--regions \(error)")
        }
        let database = db.map(TrackDatabase.init) ?? TrackDatabase(dataDirectory: data.layout)
        let export: TrailFile
        let line = progressWanted(stdoutUsed: output == nil) ? ProgressLine.Throttled(draw: printErrorInline) : nil
        do throws(TrailExportError) {
            export = try await database.exportTrail(
                device: device, from: from.flatMap(ISOTime.parse) ?? -.infinity,
                to: to.flatMap(ISOTime.parse) ?? .infinity,
                format: trips ? "trips" : format,
                regions: definitions,
                progress: line.map { line in
                    { line.update(Self.progress($0, of: $1)) }
                }, smooth: smooth, maximumAccuracy: maxAccuracy)
            line?.end()
        } catch {
            switch error.code {
            case .noDatabase:
                guard db == nil else { throw CommandFailure(error.description) }
                throw ValidationError("\(error): run `keeptrack replay --upload embedded ...` or name one with --db.")
            case .severalDevices: throw ValidationError("\(error); choose one with --device.")
            default: throw CommandFailure(error.description)
            }
        }
        if let output {
            try writeFile(output, export.bytes)
            if !trips { printError("\(output): \(export.points) points of \(export.device)") }
        } else {
            var out = OutputBuffer()
            out.bytes = export.bytes
            try out.flush()
        }
        if trips { printError(Self.tripsLine(export, output: output)) }
    }

    /// What `--trips` says: how many it wrote, and why none when there is none (an empty GPX is
    /// no mistake, but it looks like one).
    static func tripsLine(_ export: TrailFile, output: String?) -> String {
        let n = export.trips ?? 0
        let what =
            n == 0
            ? "no trip of \(export.device): a trip runs from one stop to the next, and none lies whole "
                + "within its \(grouped(export.points)) points here (a range cuts the trips it ends in; docs/visits.md)"
            : "\(grouped(n)) trip\(n == 1 ? "" : "s") of \(export.device)"
        return output.map { "\($0): \(what)" } ?? what
    }
}

extension Export {
    /// The progress line of an export: `exporting: 46%  40,000 of 86,397 records read`.
    static func progress(_ read: Int, of total: Int) -> String {
        "exporting: \(read * 100 / Swift.max(total, 1))%  \(grouped(read)) of \(grouped(total)) records read"
    }
}
