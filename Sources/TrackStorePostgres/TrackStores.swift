import Formats
import Geo
import Logging
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

/// The store a `--db` value names: a `postgres://` or `postgresql://` URL (``PostgresURL``) is a
/// ``PostgresTrackStore``, anything else a SQLite file (``SQLiteTrackStore``).
public enum TrackDatabase: Sendable, Hashable, CustomStringConvertible {
    /// A SQLite file.
    case sqlite(path: String)
    /// A PostgreSQL database, by its URL.
    case postgres(url: String)

    /// The database `value` names: a URL or a file.
    public init(_ value: String) {
        self = PostgresURL.isURL(value) ? .postgres(url: value) : .sqlite(path: value)
    }

    /// The endpoint database of `dataDirectory` (SQLite).
    public init(dataDirectory: DataDirectory) {
        self = .sqlite(path: dataDirectory.endpointDatabase)
    }

    /// The value it was named by: the file, or the URL.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): url
        }
    }

    /// Whether there is a database to open: a SQLite file that exists, or any PostgreSQL URL (the
    /// server says whether the database exists when it is opened).
    public var exists: Bool {
        switch self {
        case .sqlite(let path): access(path, F_OK) == 0
        case .postgres: true
        }
    }

    /// Opens the store (a SQLite file is created when missing). Close it (``TrackStore/close()``)
    /// when done. `progress` hears a SQLite store's schema upgrade as it runs
    /// (``SQLiteTrackStore/init(path:progress:)``); `clock` times a PostgreSQL store's connect
    /// deadline (the server's clock; the default is the wall clock).
    ///
    /// - Throws: ``TrackStoreError`` saying what is wrong with the URL or the database.
    public func open(
        environment: [String: String] = [:], logger: Logger = Logger(label: "keeptrack.store"),
        clock: any EpochClock = WallClock(), progress: (@Sendable (SQLiteTrackStore.Upgrade?) -> Void)? = nil
    )
        async throws -> any TrackStore
    {
        switch self {
        case .postgres(let url):
            let parsed = try PostgresURL(parsing: url, environment: environment)
            return try await PostgresTrackStore(url: parsed, clock: clock, logger: logger)
        case .sqlite(let path):
            do {
                return try SQLiteTrackStore(path: path, logger: logger, progress: progress)
            } catch {
                throw TrackStoreError(.cannotOpen, "cannot open the database \(path)", underlying: error)
            }
        }
    }

    /// Runs `body` on the store, opened with ``open(environment:logger:clock:progress:)``, and closes it
    /// whether `body` returns or throws.
    public func withStore<T>(
        environment: [String: String] = [:], logger: Logger = Logger(label: "keeptrack.store"),
        _ body: (any TrackStore) async throws -> T
    ) async throws -> T {
        let store = try await open(environment: environment, logger: logger)
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }

    /// The trail of `device` (the only one stored when nil) as
    /// ``TrackStore/export(device:from:to:format:regions:progress:pageSize:smooth:)`` gives it, from a
    /// database that must exist: `keeptrack export`. Its visits and trips are those the endpoint kept;
    /// a device's that were never kept (a database upgraded, a PostgreSQL batch whose instance stopped
    /// before running its detector) are computed and kept first with `maximumAccuracy` (the
    /// endpoint's outlier threshold, ``StopStore/setMaximumAccuracy(_:)``; `nil`: the default), as the
    /// endpoint's first query would with its own.
    ///
    /// - Throws: ``TrailExportError``: no such database (``TrailExportError/Code/noDatabase``), several
    ///   devices and none named (``TrailExportError/Code/severalDevices``), or what can't be read.
    public func exportTrail(
        device: String?, from: Double, to: Double, format: String,
        regions: [RegionDefinition] = [], progress: ((_ read: Int, _ total: Int) -> Void)? = nil,
        smooth: Bool = false, maximumAccuracy: Double? = nil
    )
        async throws(TrailExportError) -> TrailFile
    {
        guard exists else {
            throw TrailExportError(.noDatabase, "no endpoint database at \(self)")
        }
        let store: any TrackStore
        do {
            store = try await open()
        } catch {
            throw TrailExportError(.unreadable, "", underlying: error)  // the store's error names the database
        }
        if let maximumAccuracy { store.setMaximumAccuracy(maximumAccuracy) }
        do {
            let file = try await store.export(
                device: device, from: from, to: to, format: format, regions: regions,
                progress: progress, smooth: smooth)
            await store.close()
            return file
        } catch {
            await store.close()
            throw (error as? TrailExportError)
                ?? TrailExportError(.unreadable, "cannot read \(store.location)", underlying: error)
        }
    }
}

/// Opens the store a `--db` value names (``TrackDatabase/open(environment:logger:clock:progress:)``).
public func openTrackStore(
    _ database: String, environment: [String: String] = [:],
    logger: Logger = Logger(label: "keeptrack.store"), clock: any EpochClock = WallClock()
) async throws -> any TrackStore {
    try await TrackDatabase(database).open(environment: environment, logger: logger, clock: clock)
}
