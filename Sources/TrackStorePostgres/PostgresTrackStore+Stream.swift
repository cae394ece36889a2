import Formats
import Logging
import PostgresNIO
import TrackServer

/// The live stream on PostgreSQL: every instance sees what any instance stored. Each statement that
/// adds points (a `COPY`, an `INSERT`) notifies `keeptrack_stored` on commit with a small payload,
/// its transaction id and the range of the storage numbers it gave (`stored`, an identity column):
/// `"XID FIRST LAST"`. Each instance listens on a connection of its own and reads those rows, in
/// the order the notifications come (PostgreSQL delivers them in commit order), and publishes them
/// on ``storedRecords``: one path for what this instance stored and what others did.
extension PostgresTrackStore: StoredRecordsSource {
    /// The migration that numbers points in storage order and notifies on commit.
    static let streamMigration = [
        "ALTER TABLE positions ADD COLUMN stored bigint GENERATED ALWAYS AS IDENTITY",
        "CREATE INDEX positions_stored ON positions (stored)",
        """
        CREATE FUNCTION keeptrack_stored_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_stored bigint;
            last_stored bigint;
        BEGIN
            SELECT min(stored), max(stored) INTO first_stored, last_stored FROM added;
            IF first_stored IS NOT NULL THEN
                PERFORM pg_notify('keeptrack_stored',
                                  (txid_current() % 4294967296)::text || ' ' || first_stored || ' ' || last_stored);
            END IF;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER positions_stored AFTER INSERT ON positions REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION keeptrack_stored_notify()
        """,
    ]

    /// Listens on `keeptrack_stored` and publishes each notified statement's rows (read by their
    /// storage numbers and transaction, in storage order) until the task is cancelled.
    ///
    /// - Throws: the connection's error when it fails (the stream then stops following the store).
    public func followStored() async throws {
        let connection = try await PostgresConnection.connect(
            configuration: try Self.connectionConfiguration(url), id: 1, logger: logger)
        do {
            try await connection.listen(on: "keeptrack_stored") { notifications in
                for try await notification in notifications {
                    let parts = notification.payload.split(separator: " ")
                    guard parts.count == 3, let first = Int64(parts[1]), let last = Int64(parts[2]) else { continue }
                    var binds = PostgresBindings()
                    binds.append(first)
                    binds.append(last)
                    binds.append(String(parts[0]))
                    let query = PostgresQuery(
                        unsafeSQL: """
                            SELECT seq, kind, region, extract(epoch FROM time)::float8, ST_Y(position::geometry),
                                   ST_X(position::geometry), alt, h_acc, v_acc, speed, course, valid, attributes::text,
                                   key, device, span
                            FROM positions WHERE stored BETWEEN $1 AND $2 AND xmin::text = $3 ORDER BY stored
                            """, binds: binds)
                    let (records, _) = try await page(query, limit: Int.max - 1, cursorSequence: false)
                    storedRecords.publish(records)
                }
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }
}
