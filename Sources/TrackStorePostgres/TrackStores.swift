import Logging
import TrackServer

/// Opens the store a `--db` value names: a `postgres://` or `postgresql://` URL (``PostgresURL``)
/// opens a ``PostgresTrackStore``; anything else is a SQLite file (``SQLiteTrackStore``). Close it
/// (``TrackStore/close()``) when done.
///
/// - Throws: ``TrackStoreError`` saying what is wrong with the URL or the database.
public func openTrackStore(_ database: String, environment: [String: String] = [:],
                           logger: Logger = Logger(label: "keeptrack.store")) async throws -> any TrackStore {
    if PostgresURL.isURL(database) {
        return try await PostgresTrackStore(url: PostgresURL(parsing: database, environment: environment), logger: logger)
    }
    do {
        return try SQLiteTrackStore(path: database)
    } catch {
        throw TrackStoreError(message: "cannot open the database \(database): \(error)")
    }
}
