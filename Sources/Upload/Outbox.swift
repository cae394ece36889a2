import Formats
import Geo
import GRDB
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The durable outbox: every accepted location and region transition, stored with a stable id
/// (device id + monotonic sequence) before anything else happens to it, until the endpoint has it.
///
/// GRDB over SQLite in WAL mode with `synchronous=NORMAL`: a committed append survives the
/// process being killed at any point (kill -9); a power cut may lose the last few. Sequence
/// numbers follow the largest one stored and a high-water mark kept before any record leaves, so
/// they are never reused, even after every row left.
///
/// An append is cheap enough to commit every fix: it writes the table's last leaf page and
/// nothing else (no sequence table, no index but a partial one on transitions), and an outbox
/// has 1 KB pages (one made with 4 KB pages is converted at open while small), so a commit a
/// second writes about 1.5 KB a record (`tools/bench-commit.py`).
///
/// Caps bound the outbox by count and age. What a cap evicts (the oldest first) is counted
/// (``Stats/evicted``) and returned by the call that caused it, never dropped silently.
public final class Outbox: Sendable {
    public struct Configuration: Sendable {
        /// Most records kept. The default is 1,000,000.
        public var maxCount: Int = 1_000_000
        /// Oldest record kept, in seconds since it was appended. The default is 30 days.
        public var maxAge: Double = 30 * 86_400
        /// This device's id; `nil` (the default) keeps the one stored, or makes one up
        /// (`keeptrack-` and 8 hex digits) the first time.
        public var device: String?

        public init() {}
    }

    /// What the caps evicted.
    public struct Eviction: Hashable, Sendable {
        public var byCount = 0
        public var byAge = 0
        public var total: Int { byCount + byAge }
    }

    /// The outbox's state, for status and metrics.
    public struct Stats: Hashable, Sendable {
        public var pending: Int
        /// When the oldest pending record was appended (seconds since 1970), if any.
        public var oldestAppended: Double?
        public var deadLetters: Int
        /// Records evicted by the caps since the outbox was created.
        public var evicted: Int
        /// The last sequence number given.
        public var lastSequence: Int64
    }

    public let path: String
    public let configuration: Configuration
    public let device: String
    let pool: DatabasePool
    /// The times records are appended and dead-lettered at, and their ages.
    let clock: any EpochClock
    /// When the age cap was last applied.
    let lastAgeCheck = Mutex(-Double.infinity)
    /// How many records wait (counted at open, kept up to date after each commit).
    let pendingCount = Mutex(0)
    /// The upload targets of this run (``useTargets(_:)``): a record leaves once all have it.
    let targets = Mutex<[Target]>([])
    /// Per target, a sequence number at or below which it has every location (its batches' lookups
    /// start above it, so that a target ahead of another does not scan what it already has).
    let locationFloors = Mutex<[String: Int64]>([:])
    /// Records appended through this outbox since it was opened, and the filling batches waiting
    /// for a number of them (``waitForAppends(_:after:until:on:)``).
    let appends = Mutex(Appends())

    /// The page size of a new outbox, in bytes: what one commit of a location writes.
    static let pageSize = 1024

    /// What to do about a write that failed, when there is something to do: a full disk.
    static func hint(_ error: any Error) -> String {
        guard let e = error as? DatabaseError, e.resultCode == .SQLITE_FULL else { return "" }
        return " (its disk is full: free space there; what the outbox holds is kept)"
    }

    /// The device id an outbox made without one is given: `keeptrack-` and `n` as 8 hex digits.
    static func generatedDevice(_ n: UInt32) -> String {
        let hex = String(n, radix: 16)
        return "keeptrack-" + String(repeating: "0", count: 8 - hex.count) + hex
    }

    /// How many records wait to be uploaded, without a query (``Stats/pending`` counts them).
    public var waiting: Int { pendingCount.withLock { $0 } }

    /// Opens (creating and migrating) the outbox at `path`.
    ///
    /// - Parameters:
    ///   - path: the SQLite file (its directory must exist).
    ///   - clock: the time records are appended at, for their ages. The default is the wall clock.
    /// - Throws: ``UploadError`` naming the file when it cannot be opened or migrated.
    public init(
        path: String, configuration: Configuration = Configuration(),
        clock: any EpochClock = WallClock()
    ) throws(UploadError) {
        self.path = path
        self.configuration = configuration
        self.clock = clock
        do {
            var config = GRDB.Configuration()
            config.prepareDatabase { db in
                // Before WAL mode is set and the first table made: a new file gets 1 KB pages (an
                // existing one keeps its own). A commit writes whole pages to the WAL.
                try db.execute(sql: "PRAGMA page_size = \(Outbox.pageSize)")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            try Outbox.convertPageSize(path: path)
            pool = try DatabasePool(path: path, configuration: config)
            try Outbox.migrator.migrate(pool)
            device = try pool.write { db in
                if let stored = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'device'") {
                    if let wanted = configuration.device, wanted != stored {
                        // Renaming a device with records in flight would split its trail.
                        let pending = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0
                        if pending > 0 {
                            throw UploadError(
                                .deviceMismatch,
                                "the outbox \(path) belongs to device '\(stored)' "
                                    + "and holds \(pending) records not yet uploaded; upload them first or use "
                                    + "another data directory")
                        }
                        try db.execute(sql: "UPDATE meta SET value = ? WHERE key = 'device'", arguments: [wanted])
                        return wanted
                    }
                    return stored
                }
                let id = configuration.device ?? Self.generatedDevice(UInt32.random(in: 0...UInt32.max))
                try db.execute(sql: "INSERT INTO meta (key, value) VALUES ('device', ?)", arguments: [id])
                return id
            }
            let count = try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0 }
            pendingCount.withLock { $0 = count }
        } catch let error as UploadError {
            throw error
        } catch {
            throw UploadError(.storage, "cannot open the outbox \(path)", path: path, underlying: error)
        }
    }

    /// Gives an outbox made with another page size (before v6: 4 KB) the page size of a new one,
    /// when at most 10,000 records wait (a `VACUUM`, out of WAL mode and back: milliseconds) and no
    /// other process has it open; otherwise it keeps its pages, and tries again at the next open.
    static func convertPageSize(path: String) throws {
        guard access(path, F_OK) == 0 else { return }
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA page_size") != pageSize,
                try db.tableExists("outbox"),
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? .max <= 10_000,
                try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE") == "delete"
            else { return }
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "VACUUM")
        }
    }

    /// Appends records in one transaction, giving each the next sequence number; returns them as
    /// stored (with their ids) and what the caps evicted to make room.
    ///
    /// The records' `device` and `sequence` are ignored.
    @discardableResult
    public func append(_ records: [TrailRecord]) throws(UploadError) -> (stored: [TrailRecord], evicted: Eviction) {
        guard !records.isEmpty else { return ([], Eviction()) }
        let t = clock.now.secondsSince1970
        let device = self.device
        do {
            let (stored, eviction) = try pool.write { db in
                var stored: [TrailRecord] = []
                stored.reserveCapacity(records.count)
                // Read, not written: the last sequence given is the largest stored or the mark.
                var sequence = try Int64.fetchOne(db.cachedStatement(sql: Outbox.lastSequenceSQL)) ?? 0
                let insert = try db.cachedStatement(
                    sql: """
                        INSERT INTO outbox (seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority,
                                            appended, decided, \(Outbox.spanColumns))
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """)
                for r in records {
                    sequence += 1
                    try insert.execute(
                        arguments: [
                            sequence, r.kind.rawValue, r.region, r.time, r.latitude, r.longitude, r.altitude,
                            r.horizontalAccuracy, r.verticalAccuracy, r.speed, r.course, r.kind.isPosition ? 1 : 0, t,
                            r.decidedAt,
                        ] + Outbox.spanArguments(r))
                    var s = r
                    s.device = device
                    s.sequence = sequence
                    stored.append(s)
                }
                let eviction = try evict(db, now: t, pending: pendingCount.withLock { $0 } + records.count)
                return (stored, eviction)
            }
            // Committed: now the count, and the batches waiting to fill.
            pendingCount.withLock { $0 += records.count - eviction.total }
            appended(records.count)
            return (stored, eviction)
        } catch {
            throw UploadError(
                .storage, "cannot append to the outbox \(path)" + Self.hint(error), path: path, underlying: error)
        }
    }

    /// Applies the caps: the oldest records beyond the count, and those older than the age.
    func evict(_ db: Database, now t: Double, pending: Int) throws -> Eviction {
        var e = Eviction()
        // The age cap is looked at once a minute (it is measured in days); the count at every append.
        let checkAge = lastAgeCheck.withLock { last -> Bool in
            guard t - last >= 60 || t < last else { return false }
            last = t
            return true
        }
        if checkAge, let oldest = try Double.fetchOne(db, sql: "SELECT appended FROM outbox ORDER BY seq LIMIT 1"),
            oldest < t - configuration.maxAge
        {
            try Outbox.rememberLastSequence(db)
            try db.execute(sql: "DELETE FROM outbox WHERE appended < ?", arguments: [t - configuration.maxAge])
            e.byAge = db.changesCount
        }
        let count = pending - e.byAge
        if count > configuration.maxCount {
            try Outbox.rememberLastSequence(db)
            try db.execute(
                sql: "DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox ORDER BY seq LIMIT ?)",
                arguments: [count - configuration.maxCount])
            e.byCount = db.changesCount
        }
        if e.total > 0 {
            try db.execute(sql: "UPDATE meta SET value = value + ? WHERE key = 'evicted'", arguments: [e.total])
        }
        return e
    }

    /// The next records to send: region transitions first (they jump the backlog), then
    /// locations, each in sequence order; or, without `transitionsFirst`, all in sequence order (a
    /// transition right after the location that decided it); at most `maxCount`.
    public func nextBatch(
        maxCount: Int, transitionsFirst: Bool = true,
        target: String? = nil
    ) throws(UploadError) -> [TrailRecord] {
        let device = self.device
        // A target's batch leaves out what it acknowledged while another target lacked it.
        let lacks = target == nil ? "" : Outbox.lacksSQL
        let targetArgument: StatementArguments = target.map { [$0] } ?? []
        let floor = target.flatMap { t in locationFloors.withLock { $0[t] } } ?? 0
        do {
            let (records, newFloor) = try pool.read { db -> ([TrailRecord], Int64?) in
                let columns =
                    "seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, decided, "
                    + Outbox.spanColumns
                guard transitionsFirst else {
                    let rows = try Row.fetchAll(
                        db, sql: "SELECT \(columns) FROM outbox WHERE 1\(lacks) ORDER BY seq LIMIT ?",
                        arguments: targetArgument + [maxCount])
                    return (rows.map { Outbox.record($0, device: device) }, nil)
                }
                // Transitions (their partial index), then locations, each by sequence.
                var rows = try Row.fetchAll(
                    db, sql: "SELECT \(columns) FROM outbox WHERE priority = 0\(lacks) ORDER BY seq LIMIT ?",
                    arguments: targetArgument + [maxCount])
                var newFloor: Int64?
                if rows.count < maxCount {
                    let transitions = rows.count
                    rows += try Row.fetchAll(
                        db,
                        sql:
                            "SELECT \(columns) FROM outbox WHERE priority <> 0 AND seq > ?\(lacks) ORDER BY seq LIMIT ?",
                        arguments: [floor] + targetArgument + [maxCount - rows.count])
                    if target != nil {
                        // Every location before the first one it lacks, it has; with none lacking, all of them.
                        if rows.count > transitions {
                            newFloor = (rows[transitions][0] as Int64) - 1
                        } else {
                            newFloor = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM outbox") ?? floor
                        }
                    }
                }
                return (rows.map { Outbox.record($0, device: device) }, newFloor)
            }
            if let target, let newFloor { locationFloors.withLock { $0[target] = max($0[target] ?? 0, newFloor) } }
            return records
        } catch {
            throw UploadError(.storage, "cannot read the outbox \(path)", path: path, underlying: error)
        }
    }

    /// A record from a row of `seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course,
    /// decided`, then ``spanColumns``.
    static func record(_ row: Row, device: String) -> TrailRecord {
        var r = TrailRecord(
            device: device, sequence: row[0], kind: TrailRecord.Kind(rawValue: row[1]) ?? .location,
            region: row[2], time: row[3], latitude: row[4], longitude: row[5], altitude: row[6],
            horizontalAccuracy: row[7], verticalAccuracy: row[8], speed: row[9], course: row[10])
        r.decidedAt = row[11]
        if r.kind.isVisitOrTrip { r.span = Outbox.span(row, at: 12) }
        return r
    }

    /// Removes records the endpoint has acknowledged; with a `target`, those every target of the
    /// run (``useTargets(_:)``) has, the others kept for the targets that lack them.
    public func acknowledge(_ sequences: [Int64], target: String? = nil) throws(UploadError) {
        guard !sequences.isEmpty else { return }
        do {
            let deleted = try pool.write { db in
                let deleted =
                    try target.map { try acknowledge(db, sequences, target: $0) }
                    ?? deleteOutbox(db, sequences)
                try db.execute(
                    sql: "UPDATE meta SET value = value + ? WHERE key = 'uploaded'",
                    arguments: [sequences.count])
                return deleted
            }
            pendingCount.withLock { $0 -= deleted }
        } catch {
            throw UploadError(
                .storage, "cannot acknowledge in the outbox \(path)" + Self.hint(error), path: path, underlying: error)
        }
    }

    /// Moves records the endpoint rejected for good to the dead-letter table, with its answer; with a
    /// `target`, as that target's dead letters, and the records stay for the targets that lack them.
    public func deadLetter(
        _ sequences: [Int64], status: Int, reason: String,
        target: String? = nil
    ) throws(UploadError) {
        guard !sequences.isEmpty else { return }
        let t = clock.now.secondsSince1970
        do {
            let deleted = try pool.write { db in
                for chunk in stride(from: 0, to: sequences.count, by: 500) {
                    let part = Array(sequences[chunk..<min(chunk + 500, sequences.count)])
                    let marks = part.map { _ in "?" }.joined(separator: ",")
                    try db.execute(
                        sql: """
                            INSERT OR REPLACE INTO dead_letter
                            (seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, appended, status, reason,
                             failed, decided, \(Outbox.spanColumns), target)
                            SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, appended, ?, ?, ?,
                                   decided, \(Outbox.spanColumns), ?
                            FROM outbox WHERE seq IN (\(marks))
                            """,
                        arguments: StatementArguments(
                            [status, reason, t, target ?? ""] as [(any DatabaseValueConvertible)?])
                            + StatementArguments(part))
                }
                return try target.map { try acknowledge(db, sequences, target: $0) } ?? deleteOutbox(db, sequences)
            }
            pendingCount.withLock { $0 -= deleted }
        } catch {
            throw UploadError(.storage, "cannot dead-letter in the outbox \(path)", path: path, underlying: error)
        }
    }

    /// Deletes records by sequence: contiguous runs as ranges, the rest in chunks. Returns how many
    /// went.
    func deleteOutbox(_ db: Database, _ sequences: [Int64]) throws -> Int {
        try Outbox.rememberLastSequence(db)
        var deleted = 0
        var singles: [Int64] = []
        let sorted = sequences.sorted()
        var k = 0
        while k < sorted.count {
            var j = k
            while j + 1 < sorted.count && sorted[j + 1] == sorted[j] + 1 { j += 1 }
            if j - k >= 8 {
                try db.execute(sql: "DELETE FROM outbox WHERE seq BETWEEN ? AND ?", arguments: [sorted[k], sorted[j]])
                deleted += db.changesCount
            } else {
                singles += sorted[k...j]
            }
            k = j + 1
        }
        for chunk in stride(from: 0, to: singles.count, by: 500) {
            let part = Array(singles[chunk..<min(chunk + 500, singles.count)])
            let marks = part.map { _ in "?" }.joined(separator: ",")
            try db.execute(sql: "DELETE FROM outbox WHERE seq IN (\(marks))", arguments: StatementArguments(part))
            deleted += db.changesCount
        }
        return deleted
    }

    /// The dead letters: record, the endpoint's status and reason.
    public func deadLetters() throws(UploadError) -> [(record: TrailRecord, status: Int, reason: String)] {
        try deadLettersWithTargets().map { ($0.record, $0.status, $0.reason) }
    }

    /// The dead letters: record, the endpoint's status and reason, and the target whose they are
    /// (`""`: the only one, from before targets).
    public func deadLettersWithTargets() throws(UploadError)
        -> [(record: TrailRecord, status: Int, reason: String, target: String)]
    {
        let device = self.device
        do {
            return try pool.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, decided, \(Outbox.spanColumns),
                               status, reason, target
                        FROM dead_letter ORDER BY seq, target
                        """
                ).map { row in (Outbox.record(row, device: device), row[17], row[18], row[19]) }
            }
        } catch {
            throw UploadError(.storage, "cannot read the dead letters of \(path)", path: path, underlying: error)
        }
    }

    public func stats() throws(UploadError) -> Stats {
        do {
            return try pool.read { db in
                Stats(
                    pending: pendingCount.withLock { $0 },
                    oldestAppended: try Double.fetchOne(db, sql: "SELECT appended FROM outbox ORDER BY seq LIMIT 1"),
                    deadLetters: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM dead_letter") ?? 0,
                    evicted: try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'evicted'") ?? 0,
                    lastSequence: try Int64.fetchOne(db, sql: Outbox.lastSequenceSQL) ?? 0)
            }
        } catch {
            throw UploadError(.storage, "cannot read the outbox \(path)", path: path, underlying: error)
        }
    }
}
