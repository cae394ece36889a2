import Logging
import TrackServer

/// Opens the store a `--db` value names: a `postgres://` or `postgresql://` URL (``PostgresURL``)
/// opens a ``PostgresTrackStore``; anything else is a SQLite file (``SQLiteTrackStore``). Close it
/// (``TrackStore/close()``) when done.
///
/// - Throws: ``TrackStoreError`` saying what is wrong with the URL or the database.
///
/// `progress` hears a SQLite store's schema upgrade as it runs (``SQLiteTrackStore/init(path:progress:)``).
public func openTrackStore(_ database: String, environment: [String: String] = [:],
                           logger: Logger = Logger(label: "keeptrack.store"),
                           progress: (@Sendable (String) -> Void)? = nil) async throws -> any TrackStore {
    if PostgresURL.isURL(database) {
        return try await PostgresTrackStore(url: PostgresURL(parsing: database, environment: environment), logger: logger)
    }
    do {
        return try SQLiteTrackStore(path: database, progress: progress)
    } catch {
        throw TrackStoreError(message: "cannot open the database \(database): \(error)")
    }
}

/// The trail of `device` (the only one stored when nil) from the store `database` names (a SQLite
/// file, which must exist, or a `postgres://` URL), as ``SQLiteTrackStore/export(path:device:from:to:format:regions:progress:)``
/// does for a file: `keeptrack export --db`.
///
/// - Throws: ``TrailExportError`` saying what is missing or can't be read, and what to do.
public func exportTrail(database: String, device: String?, from: Double, to: Double, format: String,
                        regions: String?, progress: ((_ read: Int, _ total: Int) -> Void)? = nil)
    async throws(TrailExportError) -> TrailFile {
    guard PostgresURL.isURL(database) else {
        return try await SQLiteTrackStore.export(path: database, device: device, from: from, to: to, format: format,
                                                 regions: regions, progress: progress)
    }
    let definitions = try TrailFile.regions(regions)
    let store: any TrackStore
    do {
        store = try await openTrackStore(database)
    } catch {
        throw TrailExportError(description: "\(error)")
    }
    do {
        let file = try await store.export(device: device, from: from, to: to, format: format, regions: definitions,
                                          progress: progress)
        await store.close()
        return file
    } catch {
        await store.close()
        throw (error as? TrailExportError) ?? TrailExportError(description: "cannot read \(store.location): \(error)")
    }
}
