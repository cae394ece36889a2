/// The data directory's layout: where each part of KeepTrack keeps its files in one directory
/// (`$XDG_DATA_HOME/keeptrack` by default).
///
/// Every module that reads or writes the directory names its files through this type, so that the
/// layout is written down once.
public struct DataDirectory: Sendable, Hashable {
    /// The directory itself.
    public var path: String

    /// The directory at `path`.
    public init(_ path: String) {
        self.path = path
    }

    /// `$XDG_DATA_HOME/keeptrack`, else `$HOME/.local/share/keeptrack` (`./.local/share/keeptrack`
    /// without a home).
    public static func standard(environment: [String: String]) -> DataDirectory {
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return DataDirectory(xdg + "/keeptrack") }
        return DataDirectory((environment["HOME"] ?? ".") + "/.local/share/keeptrack")
    }

    /// The upload outbox (SQLite).
    public var outbox: String { path + "/outbox.sqlite" }

    /// The endpoint's database (SQLite): `keeptrack serve`'s and `--upload embedded`'s.
    public var endpointDatabase: String { path + "/endpoint.sqlite" }

    /// The monitored regions' definitions (JSON).
    public var regions: String { path + "/regions.json" }

    /// The states the tracker last saw the monitored regions in (JSON).
    public var regionStates: String { path + "/region-states.json" }

    /// The directory the embedded endpoint's trails are written to, one GeoJSON file a device.
    public var trails: String { path + "/trails" }
}
