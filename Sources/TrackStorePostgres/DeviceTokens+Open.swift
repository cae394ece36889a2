import Logging
import TrackServer

#if canImport(Glibc)
import Glibc
#endif

extension DeviceTokens {
    /// `keeptrack serve devices ACTION [ID]` (``DeviceTokens/command(_:device:store:now:)``) on the
    /// store `database` names, as `serve --db` does: a SQLite file (which must exist, but for add)
    /// or a `postgres://` URL.
    ///
    /// - Throws: ``CredentialError`` naming what is wrong, or the store's error.
    public static func command(_ action: String, device: String?, database: String,
                               environment: [String: String] = [:]) async throws -> String {
        try check(action, device: device)
        if action != "add" && !PostgresURL.isURL(database) && access(database, F_OK) != 0 {
            throw CredentialError(description: "no endpoint database at \(database): name one with --db")
        }
        var logger = Logger(label: "keeptrack.store")
        logger.logLevel = .warning
        let store = try await openTrackStore(database, environment: environment, logger: logger)
        do {
            let out = try await command(action, device: device, store: store)
            await store.close()
            return out
        } catch {
            await store.close()
            throw error
        }
    }
}
