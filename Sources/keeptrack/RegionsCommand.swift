import ArgumentParser
import Formats
import Geo
import LocationService
import Tracking

#if canImport(Glibc)
import Glibc
#endif

/// Where persistent data lives: `--data-dir`, else `$XDG_DATA_HOME/keeptrack`.
struct DataDirectoryOption: ParsableArguments {
    @Option(help: ArgumentHelp("Directory for persistent data. Default: $XDG_DATA_HOME/keeptrack "
                               + "(~/.local/share/keeptrack).", valueName: "dir"))
    var dataDir: String?

    /// The data directory: --data-dir, or $XDG_DATA_HOME/keeptrack.
    var directory: String {
        var environment: [String: String] = [:]
        for key in ["XDG_DATA_HOME", "HOME"] {
            if let v = getenv(key) { environment[key] = String(cString: v) }
        }
        return dataDir ?? RegionStore.defaultDirectory(environment: environment)
    }

    var store: RegionStore { RegionStore(directory: directory) }
}

struct Regions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the persisted set of monitored regions (used by `keeptrack track`).",
        discussion: """
            The set lives in the data directory (regions.json) with the states the tracker last \\
            saw (region-states.json), so monitoring picks up where it left off after a restart. \\
            `keeptrack track` monitors it whenever it is given a location option and no --regions.

            Examples:
              keeptrack regions import fixtures/walk-15min.regions.geojson
              keeptrack regions list
              keeptrack regions remove marienplatz
            """,
        subcommands: [Import.self, List.self, Remove.self]
    )

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the regions of a GeoJSON file (Points with a radius property, Polygons); same id replaces.")

        @Argument(help: "The GeoJSON file.") var file: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            var options = try LocationOptions.parse([])
            options.regions = file
            var c = Tracker.Configuration()
            try options.addRegions(to: &c)
            if !c.regionFailures.isEmpty {
                throw ValidationError("\(file): " + c.regionFailures.joined(separator: "; ") + " (nothing imported)")
            }
            let incoming = c.regions.regions
            var byID: [String: Region] = [:]
            do {
                for r in try data.store.loadRegions() { byID[r.id] = r }
            } catch {
                throw ValidationError("\(error)")
            }
            let before = byID.count
            for r in incoming { byID[r.id] = r }
            do {
                try data.store.saveRegions(Array(byID.values))
            } catch {
                throw ValidationError("\(error)")
            }
            print("imported \(incoming.count) regions (\(byID.count - before) new); \(byID.count) monitored in \(data.store.directory)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the monitored regions and their last known states, one JSON object per line.")

        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let monitor: RegionMonitor
            do {
                monitor = try data.store.loadMonitor()
            } catch {
                throw ValidationError("\(error)")
            }
            var out = OutputBuffer()
            for r in monitor.regions.sorted(by: { $0.id < $1.id }) {
                ByteWriting.appendStatic("{\"region\":", to: &out.bytes)
                ByteWriting.appendJSONString(r.id, to: &out.bytes)
                switch r.shape {
                case .circle(let c, let radius):
                    ByteWriting.appendStatic(",\"shape\":\"circle\",\"lat\":", to: &out.bytes)
                    ByteWriting.appendFixed(c.latitude, decimals: 9, to: &out.bytes)
                    ByteWriting.appendStatic(",\"lon\":", to: &out.bytes)
                    ByteWriting.appendFixed(c.longitude, decimals: 9, to: &out.bytes)
                    ByteWriting.appendStatic(",\"radius\":", to: &out.bytes)
                    ByteWriting.appendFixed(radius, decimals: 1, to: &out.bytes)
                case .polygon(let p):
                    ByteWriting.appendStatic(",\"shape\":\"polygon\",\"vertices\":", to: &out.bytes)
                    ByteWriting.appendInt(Int64(p.vertices.count), to: &out.bytes)
                }
                ByteWriting.appendStatic(",\"state\":", to: &out.bytes)
                ByteWriting.appendJSONString(monitor.state(for: r.id).rawValue, to: &out.bytes)
                ByteWriting.appendStatic("}\n", to: &out.bytes)
                try out.flushIfNeeded()
            }
            try out.flush()
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop monitoring regions by id.")

        @Argument(help: "Region ids.") var ids: [String]
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            var regions: [Region]
            do {
                regions = try data.store.loadRegions()
            } catch {
                throw ValidationError("\(error)")
            }
            let unknown = ids.filter { id in !regions.contains { $0.id == id } }
            if !unknown.isEmpty {
                throw ValidationError("no monitored region with id \(unknown.joined(separator: ", ")); see keeptrack regions list")
            }
            regions.removeAll { ids.contains($0.id) }
            do {
                try data.store.saveRegions(regions)
            } catch {
                throw ValidationError("\(error)")
            }
            print("removed \(ids.count); \(regions.count) monitored")
        }
    }
}
