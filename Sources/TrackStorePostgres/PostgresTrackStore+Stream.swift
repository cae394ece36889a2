import Formats
import Geo
import Logging
import PostgresNIO
import TrackStore

/// The live stream on PostgreSQL: every instance sees what any instance stored. Each statement that
/// adds points (a `COPY`, an `INSERT`) is notified on `keeptrack_stored` with a small payload, its
/// transaction id and the range of the storage numbers it gave (`stored`, an identity column):
/// `"XID FIRST LAST"`, then, when they fit, the numbers it stored and its devices
/// (``StoredAnnouncement``). Each instance listens on a connection of its own and reads those rows
/// not published yet, in the order the notifications come, and publishes them on ``storedRecords``:
/// one path for what this instance stored and what others did. While no subscriber needs the
/// records, it reads nothing: the devices are in the payload.
///
/// The notification is sent right after the statement's commit, on the same connection, in a
/// transaction of its own (``notifyStored(_:logger:)``), not by the statement's transaction: a
/// transaction that notifies holds one lock of the whole cluster from the start of its commit to
/// its end, its WAL flush included (PostgreSQL's `PreCommit_Notify`), so every batch's commit
/// waited for the one before it to reach the disk, and none shared a flush (two instances on one
/// database stored half of what one did; docs/performance.md). The statement's trigger leaves
/// the payload in the session (`keeptrack.stored`), and a transaction that only notifies writes no
/// WAL. An instance killed between a commit and its notification leaves that statement
/// unannounced: the other instances' streams find it with the first statement announced
/// ``unannouncedSweep`` or more after their last look (``catchUp(above:cursor:)``, as after a
/// reconnection).
///
/// When the listening connection fails (the database restarts, the backend is terminated), it is
/// opened again after a wait (``listenBackoff``, on the server's clock), and what was stored meanwhile
/// is read and published before the notifications that follow (``StoredCursor``): no record lost or
/// published twice.
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

    /// The statement's trigger no longer notifies (see above): it leaves its payload in the
    /// session, for ``notifyStored(_:logger:)`` to send after the commit ('' when it stored nothing).
    static let notifyAfterCommitMigration = [
        """
        CREATE OR REPLACE FUNCTION keeptrack_stored_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_stored bigint;
            last_stored bigint;
        BEGIN
            SELECT min(stored), max(stored) INTO first_stored, last_stored FROM added;
            PERFORM set_config('keeptrack.stored',
                               CASE WHEN first_stored IS NULL THEN ''
                                    ELSE (txid_current() % 4294967296)::text || ' ' || first_stored || ' ' || last_stored
                               END, false);
            RETURN NULL;
        END
        $$
        """
    ]

    /// The statement's payload names what it stored, when that fits in a notification (under 8,000
    /// bytes): its storage numbers as ranges and its devices (``StoredAnnouncement``). While no
    /// subscriber needs the records (the live stream without a client), a listener then publishes the
    /// devices and counts the numbers published without reading a row: every instance read back
    /// every row any instance stored for its offline watch, 278,309 rows for 200,000 stored
    /// (docs/performance.md). One pass over the statement's rows gives the devices and, when its
    /// numbers are consecutive, the one range; a statement whose numbers interleave with a concurrent
    /// one's runs a second pass for their runs.
    static let storedRangesMigration = [
        """
        CREATE OR REPLACE FUNCTION keeptrack_stored_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            first_stored bigint;
            last_stored bigint;
            stored_count bigint;
            ranges text;
            devices text;
            plain boolean;
            payload text;
        BEGIN
            SELECT min(first), max(last), sum(n), string_agg(device, E'\\n' ORDER BY first),
                   bool_and(device <> '' AND strpos(device, E'\\n') = 0)
                INTO first_stored, last_stored, stored_count, devices, plain
                FROM (SELECT device, min(stored) AS first, max(stored) AS last, count(*) AS n
                      FROM added GROUP BY device) d;
            IF first_stored IS NULL THEN
                PERFORM set_config('keeptrack.stored', '', false);
                RETURN NULL;
            END IF;
            payload := (txid_current() % 4294967296)::text || ' ' || first_stored || ' ' || last_stored;
            IF stored_count = last_stored - first_stored + 1 THEN
                ranges := first_stored || '-' || last_stored;
            ELSE
                -- Numbers shared with a concurrent statement: the runs of consecutive ones.
                SELECT string_agg(low || '-' || high, ' ' ORDER BY low) INTO ranges
                    FROM (SELECT min(stored) AS low, max(stored) AS high
                          FROM (SELECT stored, stored - row_number() OVER (ORDER BY stored) AS run FROM added) n
                          GROUP BY run) r;
            END IF;
            IF plain AND octet_length(payload) + octet_length(ranges) + octet_length(devices) + 2 < 8000 THEN
                payload := payload || E'\\n' || ranges || E'\\n' || devices;
            END IF;
            PERFORM set_config('keeptrack.stored', payload, false);
            RETURN NULL;
        END
        $$
        """
    ]

    /// Announces on `keeptrack_stored` what the statement just committed on `connection` stored
    /// (the payload its trigger left in the session), then clears it. A failure is logged: the
    /// points are stored, and the other instances' streams find them with the next announcement.
    static func notifyStored(_ connection: PostgresConnection, logger: Logger) async {
        do {
            try await connection.query(
                """
                SELECT pg_notify('keeptrack_stored', p), set_config('keeptrack.stored', '', false)
                FROM (SELECT current_setting('keeptrack.stored', true) AS p) s WHERE p <> ''
                """, logger: logger)
        } catch {
            logger.warning(
                "a stored batch was not announced to the live stream",
                metadata: ["error.type": "\(type(of: error))"])
        }
    }

    /// How often, at most, a listener looks for statements committed and never announced (their
    /// instance killed between the commit and the notification), at the next announcement.
    static let unannouncedSweep: Duration = .seconds(15)

    /// The waits before opening the listening connection again: from 0.5 s doubling to 30 s.
    public static let listenBackoff = Backoff(initial: 0.5, maximum: 30)

    /// The `application_name` of this instance's listening connection (not counted as an instance).
    public var listenerName: String { "keeptrack-listener " + name.dropFirst(Self.applicationPrefix.count) }

    /// Listens on `keeptrack_stored` and publishes each notified statement's rows (read by their
    /// storage numbers and transaction, in storage order) until the task is cancelled. What was stored
    /// since the store opened and before the listener was in place is published first: a stream client
    /// served as soon as the server listens misses nothing another instance stores meanwhile. A failed
    /// connection is opened again after a wait on `clock`, what was stored meanwhile published first
    /// (reported on ``storedRecords``: ``RecordFeed/FollowReport``).
    public func followStored(clock: any EpochClock) async throws {
        var cursor = StoredCursor()
        cursor.begin(at: openedStored)
        var failures = 0
        var random = SystemRandomNumberGenerator()
        var reconnecting = false
        while true {
            do {
                try await listenOnce(&cursor, clock: clock, reconnecting: reconnecting) { failures = 0 }
            } catch {
                if Task.isCancelled || error is CancellationError { throw CancellationError() }
                logger.warning(
                    "the live stream's connection to PostgreSQL failed: reconnecting",
                    metadata: ["error.type": "\(type(of: error))"])
            }
            try Task.checkCancellation()
            reconnecting = true
            failures += 1
            storedRecords.report(.failed)
            let wait = Self.listenBackoff.delay(failures: failures, using: &random)
            try await clock.sleep(until: clock.now.advanced(by: .milliseconds(Int64(wait * 1000))), tolerance: nil)
        }
    }

    /// One listening connection, until it fails: `LISTEN`, then what was stored while none listened
    /// (since the store opened, or since the last connection failed: `reconnecting`, reported), then
    /// each notification. `ready` is called once caught up.
    func listenOnce(
        _ cursor: inout StoredCursor, clock: any EpochClock, reconnecting: Bool, ready: () -> Void
    ) async throws {
        var configuration = try Self.connectionConfiguration(url)
        configuration.options.additionalStartupParameters = [("application_name", listenerName)]
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await connection.listen(on: "keeptrack_stored") { notifications in
                // LISTEN is in place: what commits from now on is notified.
                if let floor = cursor.catchUpFloor {
                    let missed = try await catchUp(above: floor, cursor: &cursor)
                    if reconnecting { storedRecords.report(.caughtUp(records: missed)) }
                } else {
                    cursor.begin(at: try await highestStored())
                }
                ready()
                var looked = clock.now
                for try await notification in notifications {
                    guard let announced = StoredAnnouncement(payload: notification.payload) else { continue }
                    try await publish(announced, cursor: &cursor)
                    // Statements committed and never announced (their instance killed in between).
                    if looked.duration(to: clock.now) >= Self.unannouncedSweep, let floor = cursor.catchUpFloor {
                        looked = clock.now
                        _ = try await catchUp(above: floor, cursor: &cursor)
                    }
                }
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }

    /// What `announced` stored and this instance has not published: while no subscriber needs the
    /// records and the announcement names its numbers and devices, its devices, read from nothing;
    /// else its range's rows not published yet, read (``publishNew(from:through:cursor:)``).
    func publish(_ announced: StoredAnnouncement, cursor: inout StoredCursor) async throws {
        if let ranges = announced.ranges, let devices = announced.devices, !storedRecords.needsRecords {
            guard !cursor.covers(ranges) else { return }
            cursor.publish(ranges: ranges)
            storedRecords.publish(devices: devices)
            return
        }
        _ = try await publishNew(from: announced.first, through: announced.last, cursor: &cursor)
    }

    /// The record's columns read back: the storage number first, then the trail's 16 columns.
    static let recordColumns = """
        stored, seq, kind, region, extract(epoch FROM time)::float8, ST_Y(position::geometry),
               ST_X(position::geometry), alt, h_acc, v_acc, speed, course, valid, attributes::text,
               key, device, span
        """

    /// The most ranges one read names (``stored(_:in:)``); a read with more reads the whole span.
    static let maxReadRanges = 1000

    /// `columns` of the rows whose storage numbers are in `ranges` (sorted, disjoint; an upper bound
    /// of `Int64.max` is no bound), in storage order.
    static func stored(_ columns: String, in ranges: [ClosedRange<Int64>]) -> PostgresQuery {
        var binds = PostgresBindings()
        if ranges.count == 1, let range = ranges.first {
            binds.append(range.lowerBound)
            var sql = "SELECT \(columns) FROM positions WHERE stored >= $1"
            if range.upperBound < .max {
                binds.append(range.upperBound)
                sql += " AND stored <= $2"
            }
            return PostgresQuery(unsafeSQL: sql + " ORDER BY stored", binds: binds)
        }
        binds.append(ranges.map(\.lowerBound))
        binds.append(ranges.map(\.upperBound))
        return PostgresQuery(
            unsafeSQL: """
                SELECT \(columns) FROM unnest($1::int8[], $2::int8[]) AS r(low, high)
                JOIN positions ON stored BETWEEN r.low AND r.high ORDER BY stored
                """, binds: binds)
    }

    /// Publishes the rows from `first` (through `last`) not published yet, in storage order, as one
    /// batch, reading only the numbers not published (``StoredCursor/unpublished(from:through:)``):
    /// their records when a subscriber needs them, else only their numbers and devices (two columns
    /// read, not seventeen decoded, a position converted and attributes parsed). Returns how many
    /// records.
    ///
    /// Two instances on one database each read back every record both stored while a subscriber
    /// needs the records (a stream client, the Home Assistant relay): 200,000 rows read and decoded
    /// for 100,000 stored (docs/performance.md).
    func publishNew(from first: Int64, through last: Int64?, cursor: inout StoredCursor) async throws -> Int {
        var ranges = cursor.unpublished(from: first, through: last)
        guard !ranges.isEmpty else { return 0 }
        if ranges.count > Self.maxReadRanges { ranges = [ranges[0].lowerBound...ranges[ranges.count - 1].upperBound] }
        guard storedRecords.needsRecords else {
            var devices: [String] = []
            var seen: Set<String> = []
            var numbers: [Int64] = []
            for try await row in try await liveQuery(Self.stored("stored, device", in: ranges), logger: logger) {
                var cells = RowCells(row)
                let stored = try cells.next(Int64.self)
                guard cursor.isNew(stored) else { continue }
                let device = try cells.next(String.self)
                numbers.append(stored)
                if seen.insert(device).inserted { devices.append(device) }
            }
            cursor.publish(numbers)
            storedRecords.publish(devices: devices)
            return numbers.count
        }
        var batch: [TrailRecord] = []
        var numbers: [Int64] = []
        for try await row in try await liveQuery(Self.stored(Self.recordColumns, in: ranges), logger: logger) {
            var cells = RowCells(row)
            let stored = try cells.next(Int64.self)
            guard cursor.isNew(stored) else { continue }
            batch.append(try Self.record(&cells).record)
            numbers.append(stored)
        }
        cursor.publish(numbers)
        if !batch.isEmpty { storedRecords.publish(batch) }
        return batch.count
    }

    /// The highest storage number given so far (0 when none).
    func highestStored() async throws -> Int64 {
        let rows = try await liveQuery("SELECT coalesce(max(stored), 0)::int8 FROM positions", logger: logger)
        var highest: Int64 = 0
        for try await value in rows.decode(Int64.self) { highest = value }
        return highest
    }

    /// Publishes what was committed above `floor` and not published (its notification lost with the
    /// connection, or never sent), in storage order; returns how many records.
    func catchUp(above floor: Int64, cursor: inout StoredCursor) async throws -> Int {
        try await publishNew(from: floor + 1, through: nil, cursor: &cursor)
    }
}
