/// The retention facet of a store: points older than a cutoff deleted a bounded batch at a time,
/// each batch in its own short transaction, so that ingest waits at most one batch.
public protocol RetentionStore: AnyObject {
    /// Deletes at most `limit` points whose time is before `cutoff` (seconds since 1970) in one
    /// short transaction, keeping the device summaries true (count, first time, latest position; a
    /// device with nothing left is removed) and the stops kept at ingest (none before a device's
    /// first remaining point); returns how many went, 0 when nothing is older.
    func deleteExpired(before cutoff: Double, limit: Int) async throws -> Int
}
