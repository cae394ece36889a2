import ArgumentParser
import Foundation
import Geo
import LocationService
import Tracking

#if canImport(Glibc)
    import Glibc
#endif

/// Where persistent data lives: `--data-dir`, else `$XDG_DATA_HOME/keeptrack`.
struct DataDirectoryOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Directory for persistent data. Default: $XDG_DATA_HOME/keeptrack "
                + "(~/.local/share/keeptrack).", valueName: "dir"))
    var dataDir: String?

    /// The data directory: --data-dir, or $XDG_DATA_HOME/keeptrack.
    var layout: DataDirectory {
        dataDir.map(DataDirectory.init) ?? .standard(environment: environment(["XDG_DATA_HOME", "HOME"]))
    }

    /// The data directory's path.
    var directory: String { layout.path }

    var store: RegionStore { RegionStore(directory: directory) }
}

struct Regions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the persisted set of monitored regions (used by `keeptrack track`).",
        discussion: """
            The set lives in the data directory (regions.json) with the states the tracker last \
            saw (region-states.json), so monitoring picks up where it left off after a restart. \
            `keeptrack track` monitors it whenever it is given a location option and no --regions.

            Examples:
              keeptrack regions import fixtures/walk-15min.regions.geojson
              keeptrack regions list
              keeptrack regions state marienplatz
              keeptrack regions remove marienplatz
            """,
        subcommands: [Import.self, List.self, State.self, Remove.self]
    )

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the regions of a GeoJSON file (Points with a radius property, Polygons); same id replaces.")

        @Argument(help: "The GeoJSON file.") var file: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let store = data.store
            let result: RegionStore.ImportResult
            do {
                result = try store.importGeoJSON(file: file)
            } catch {
                throw error.commandError(argument: file)
            }
            print(
                "imported \(counted(result.imported, "region")) (\(result.added) new); \(result.total) monitored in \(store.directory)"
            )
        }
    }

    struct State: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print a stored region's state as the tracker last saved it (at most a second old while it runs).",
            discussion: """
                Like CLLocationManager's requestState(for:): inside, outside, or unknown before the \
                tracker has seen a fix. With --control, the running tracker at that socket answers \
                with its live state instead (for the regions it monitors).

                Examples:
                  keeptrack regions state marienplatz
                  keeptrack regions state marienplatz --control /tmp/keeptrack-1000/control.sock
                """)

        @Argument(help: "The region's id.") var id: String
        @OptionGroup var data: DataDirectoryOption
        @Option(help: ArgumentHelp("Ask the tracker running with this control socket.", valueName: "path"))
        var control: String?

        func run() throws {
            if let control {
                let reply = try controlRequest("state " + id, at: control)
                // The tracker's refusal, `{"error":"no monitored region with id X"}`, in words.
                if let object = try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any],
                    let refusal = object["error"] as? String
                {
                    throw ValidationError(refusal)
                }
                print(reply, terminator: reply.hasSuffix("\n") ? "" : "\n")
                return
            }
            var out = OutputBuffer()
            do {
                out.bytes = try data.store.stateLine(of: id)
            } catch {
                throw error.commandError()
            }
            try out.flush()
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the monitored regions and their last known states, one JSON object per line.")

        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            var out = OutputBuffer()
            do {
                try data.store.writeList { bytes in
                    out.bytes = bytes
                    try out.flush()
                }
            } catch let error as LocationError {
                throw error.commandError()
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop monitoring regions by id.")

        @Argument(help: "Region ids.") var ids: [String]
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let remaining: Int
            do {
                remaining = try data.store.remove(ids: ids)
            } catch {
                throw error.commandError()
            }
            print("removed \(ids.count); \(remaining) monitored")
        }
    }
}
