import GRDB

/// Several upload targets over one outbox (issue 29): a record leaves the outbox once every target
/// of the run acknowledged it (or set it aside: skipped by its format, or a dead letter of its own).
///
/// Per-target acknowledgement rows, not cursors: targets take records out of order (transitions
/// jump the backlog, dead letters leave from the middle, a format skips what it cannot carry), so
/// a cursor would have to be a set anyway. A row `(seq, target)` in `target_ack` says that target
/// has the record while another still lacks it; an append writes nothing more than with one target
/// (the table's last leaf), and a record every target has leaves with its rows in the transaction
/// of the last acknowledgement. A target that is down costs the others one row per record they
/// acknowledged meanwhile, about 20 bytes each, gone when it catches up.
///
/// Targets are named (``Target/name``: an explicit name, or one derived from the URL without its
/// credentials) and registered in `target` by ``useTargets(_:now:)``, so that a restarted run finds
/// its rows again and `keeptrack outbox status` shows each one.
extension Outbox {
    /// An upload target as the outbox knows it.
    public struct Target: Sendable, Hashable {
        /// The stable name its acknowledgements are filed under.
        public var name: String
        /// Its URL without credentials or query, for status.
        public var url: String

        public init(name: String, url: String) {
            self.name = name
            self.url = url
        }
    }

    /// A registered target's state, for `keeptrack outbox status`.
    public struct TargetStatus: Sendable, Hashable {
        public var target: Target
        /// Records in the outbox it has not acknowledged.
        public var pending: Int
        /// Its dead letters.
        public var deadLetters: Int
        /// Whether the latest run that registered targets uploaded to it; `false`: orphaned (its
        /// records leave once that run's targets have them).
        public var inLatestRun: Bool
        /// When it last acknowledged records (seconds since 1970), if known.
        public var lastSuccess: Double?
        /// Its last failure, a sentence without coordinates, until its next success.
        public var lastError: String?
    }

    /// The schema of targets (v8): the registered targets, the acknowledgements of targets ahead
    /// of another, and dead letters per target (the key becomes `(seq, target)`; a v7 dead letter
    /// belongs to the target `''`, any).
    static func registerTargetMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v8-targets") { db in
            try db.execute(
                sql: """
                    CREATE TABLE target (
                        name TEXT PRIMARY KEY,
                        url TEXT NOT NULL,
                        lastRun REAL NOT NULL,
                        lastSuccess REAL,
                        lastError TEXT
                    );
                    CREATE TABLE target_ack (
                        seq INTEGER NOT NULL,
                        target TEXT NOT NULL,
                        PRIMARY KEY (seq, target)
                    ) WITHOUT ROWID;
                    CREATE TABLE dead_letter_v8 (
                        seq INTEGER NOT NULL,
                        kind TEXT NOT NULL,
                        region TEXT,
                        time REAL NOT NULL,
                        lat REAL NOT NULL,
                        lon REAL NOT NULL,
                        alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                        appended REAL NOT NULL,
                        status INTEGER NOT NULL,
                        reason TEXT NOT NULL,
                        failed REAL NOT NULL,
                        decided REAL,
                        spanEnd REAL, endLat REAL, endLon REAL, distance REAL, maxSpeed REAL,
                        target TEXT NOT NULL DEFAULT '',
                        PRIMARY KEY (seq, target)
                    );
                    INSERT INTO dead_letter_v8
                        SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, appended, status,
                               reason, failed, decided, spanEnd, endLat, endLon, distance, maxSpeed, ''
                        FROM dead_letter;
                    DROP TABLE dead_letter;
                    ALTER TABLE dead_letter_v8 RENAME TO dead_letter;
                    """)
        }
    }

    /// The targets of this run, in order; empty until ``useTargets(_:now:)``.
    public var runTargets: [Target] { targets.withLock { $0 } }

    /// Registers the targets of this run: their records are found again under their names; a
    /// record leaves the outbox once all of them have it. Records every one of them already has
    /// (they waited for a target this run does not upload to) leave now.
    ///
    /// - Returns: the registered targets this run does not upload to that still lack records
    ///   (orphans), and how many records left now because only they lacked them.
    /// - Throws: ``UploadError`` when the outbox cannot be written.
    @discardableResult
    public func useTargets(_ run: [Target]) throws(UploadError) -> (orphans: [TargetStatus], released: Int) {
        let t = clock.now.secondsSince1970
        do {
            try pool.write { db in
                for target in run {
                    try db.execute(
                        sql: """
                            INSERT INTO target (name, url, lastRun) VALUES (?, ?, ?)
                            ON CONFLICT (name) DO UPDATE SET url = excluded.url, lastRun = excluded.lastRun
                            """, arguments: [target.name, target.url, t])
                }
            }
            // What the others lacked, before what only they lacked leaves.
            let orphans = try targetStatuses().filter { status in
                !run.contains { $0.name == status.target.name } && status.pending > 0
            }
            let released = try pool.write { db -> Int in
                guard !run.isEmpty else { return 0 }
                let names = run.map(\.name)
                let marks = names.map { _ in "?" }.joined(separator: ",")
                let done = try Int64.fetchAll(
                    db,
                    sql: """
                        SELECT seq FROM target_ack WHERE target IN (\(marks)) GROUP BY seq HAVING count(*) = ?
                        """, arguments: StatementArguments(names) + [names.count])
                guard !done.isEmpty else { return 0 }
                let deleted = try deleteOutbox(db, done)
                try deleteAcknowledgements(db, done)
                return deleted
            }
            pendingCount.withLock { $0 -= released }
            targets.withLock { $0 = run }
            locationFloors.withLock { $0 = [:] }
            return (orphans, released)
        } catch let error as UploadError {
            throw error
        } catch {
            throw UploadError(.storage, "cannot register the upload targets in \(path)", path: path, underlying: error)
        }
    }

    /// Every registered target's state, the latest run's first, by name.
    public func targetStatuses() throws(UploadError) -> [TargetStatus] {
        do {
            return try pool.read { db in
                let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0
                let latest = try Double.fetchOne(db, sql: "SELECT max(lastRun) FROM target")
                return try Row.fetchAll(
                    db,
                    sql: """
                        SELECT name, url, lastRun, lastSuccess, lastError,
                               (SELECT COUNT(*) FROM target_ack a JOIN outbox o ON o.seq = a.seq
                                WHERE a.target = t.name),
                               (SELECT COUNT(*) FROM dead_letter d WHERE d.target = t.name)
                        FROM target t ORDER BY lastRun DESC, name
                        """
                ).map { row in
                    TargetStatus(
                        target: Target(name: row[0], url: row[1]), pending: total - (row[5] as Int),
                        deadLetters: row[6], inLatestRun: (row[2] as Double) == latest, lastSuccess: row[3],
                        lastError: row[4])
                }
            }
        } catch {
            throw UploadError(.storage, "cannot read the upload targets of \(path)", path: path, underlying: error)
        }
    }

    /// Forgets a target: its acknowledgements and dead letters go, and records that only it
    /// lacked leave the outbox.
    ///
    /// - Returns: whether it was registered, and how many records left.
    @discardableResult
    public func forgetTarget(_ name: String) throws(UploadError) -> (known: Bool, released: Int) {
        do {
            let result = try pool.write { db -> (Bool, Int) in
                try db.execute(sql: "DELETE FROM target WHERE name = ?", arguments: [name])
                let known = db.changesCount > 0
                try db.execute(sql: "DELETE FROM target_ack WHERE target = ?", arguments: [name])
                try db.execute(sql: "DELETE FROM dead_letter WHERE target = ?", arguments: [name])
                let rest = try String.fetchAll(db, sql: "SELECT name FROM target")
                guard !rest.isEmpty else { return (known, 0) }
                let marks = rest.map { _ in "?" }.joined(separator: ",")
                let done = try Int64.fetchAll(
                    db,
                    sql: "SELECT seq FROM target_ack WHERE target IN (\(marks)) GROUP BY seq HAVING count(*) = ?",
                    arguments: StatementArguments(rest) + [rest.count])
                let deleted = try deleteOutbox(db, done)
                try deleteAcknowledgements(db, done)
                return (known, deleted)
            }
            pendingCount.withLock { $0 -= result.1 }
            targets.withLock { $0.removeAll { $0.name == name } }
            return result
        } catch {
            throw UploadError(.storage, "cannot forget the target \(name) in \(path)", path: path, underlying: error)
        }
    }

    /// Deletes the acknowledgement rows of `sequences` (records that left).
    func deleteAcknowledgements(_ db: Database, _ sequences: [Int64]) throws {
        guard !sequences.isEmpty, try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM target_ack)") == true
        else { return }
        let delete = try db.cachedStatement(sql: "DELETE FROM target_ack WHERE seq = ?")
        for s in sequences { try delete.execute(arguments: [s]) }
    }

    /// `target` acknowledged (or set aside) `sequences`: those the other targets of the run have
    /// too leave the outbox with their rows, the others are marked as `target`'s. Returns how many
    /// left.
    func acknowledge(_ db: Database, _ sequences: [Int64], target: String) throws -> Int {
        let others = runTargets.map(\.name).filter { $0 != target }
        if others.isEmpty {
            let deleted = try deleteOutbox(db, sequences)
            try deleteAcknowledgements(db, sequences)
            return deleted
        }
        let count = try db.cachedStatement(
            sql:
                "SELECT COUNT(*) FROM target_ack WHERE seq = ? AND target IN (\(others.map { _ in "?" }.joined(separator: ",")))"
        )
        let mark = try db.cachedStatement(sql: "INSERT OR IGNORE INTO target_ack (seq, target) VALUES (?, ?)")
        var done: [Int64] = []
        for s in sequences {
            if try Int.fetchOne(count, arguments: [s] + StatementArguments(others)) == others.count {
                done.append(s)
            } else {
                try mark.execute(arguments: [s, target])
            }
        }
        let deleted = try deleteOutbox(db, done)
        try deleteAcknowledgements(db, done)
        return deleted
    }

    /// Records `target`'s state after an upload: its success time, or its failure.
    public func noteTarget(_ target: String, success: Double?, error: String?) {
        _ = try? pool.write { db in
            if let success {
                try db.execute(
                    sql: "UPDATE target SET lastSuccess = ?, lastError = NULL WHERE name = ?",
                    arguments: [success, target])
            } else {
                try db.execute(sql: "UPDATE target SET lastError = ? WHERE name = ?", arguments: [error, target])
            }
        }
    }

    /// The filter that keeps a target's batch to records it lacks.
    static let lacksSQL = " AND NOT EXISTS (SELECT 1 FROM target_ack a WHERE a.seq = outbox.seq AND a.target = ?)"

    /// When the oldest record `target` lacks was appended (seconds since 1970), if any.
    public func oldestAppended(for target: String) throws(UploadError) -> Double? {
        do {
            return try pool.read { db in
                try Double.fetchOne(
                    db, sql: "SELECT appended FROM outbox WHERE 1\(Outbox.lacksSQL) ORDER BY seq LIMIT 1",
                    arguments: [target])
            }
        } catch {
            throw UploadError(.storage, "cannot read the outbox \(path)", path: path, underlying: error)
        }
    }
}
