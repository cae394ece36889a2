import GRDB

extension Outbox {
    /// The schema's history, one named migration a step; never edit a shipped one, add another.
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1-outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE outbox (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        kind TEXT NOT NULL,
                        region TEXT,
                        time REAL NOT NULL,
                        lat REAL NOT NULL,
                        lon REAL NOT NULL,
                        alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                        priority INTEGER NOT NULL,
                        appended REAL NOT NULL
                    );
                    CREATE INDEX outbox_order ON outbox (priority, seq);
                    CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL);
                    INSERT INTO meta (key, value) VALUES ('evicted', 0), ('uploaded', 0);
                    """)
        }
        m.registerMigration("v2-dead-letter") { db in
            try db.execute(
                sql: """
                    CREATE TABLE dead_letter (
                        seq INTEGER PRIMARY KEY,
                        kind TEXT NOT NULL,
                        region TEXT,
                        time REAL NOT NULL,
                        lat REAL NOT NULL,
                        lon REAL NOT NULL,
                        alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                        appended REAL NOT NULL,
                        status INTEGER NOT NULL,
                        reason TEXT NOT NULL,
                        failed REAL NOT NULL
                    );
                    """)
        }
        m.registerMigration("v3-pending-count-and-age-index") { db in
            // Caps and stats without scanning: a maintained count and an index on the age.
            try db.execute(
                sql: """
                    CREATE INDEX outbox_appended ON outbox (appended);
                    INSERT INTO meta (key, value) SELECT 'pending', COUNT(*) FROM outbox;
                    """)
        }
        m.registerMigration("v4-count-in-memory") { db in
            // Two fewer pages written per append: the count lives in memory (counted at open) and
            // the oldest record is the first by sequence.
            try db.execute(
                sql: """
                    DROP INDEX outbox_appended;
                    DELETE FROM meta WHERE key = 'pending';
                    """)
        }
        m.registerMigration("v5-decided-at") { db in
            // A transition's deciding location's time: Traccar gets the transition as an event on
            // that position, at that time.
            try db.execute(
                sql: """
                    ALTER TABLE outbox ADD COLUMN decided REAL;
                    ALTER TABLE dead_letter ADD COLUMN decided REAL;
                    """)
        }
        m.registerMigration("v6-one-page-a-commit") { db in
            // A commit per fix (durable before delivered) writes every page it touches to the WAL:
            // with AUTOINCREMENT (sqlite_sequence) and an index on (priority, seq), three 4 KB pages
            // a record, 1.1 GB a day at 1 Hz. Sequence numbers now come from the largest one stored
            // and a high-water mark in meta ('lastseq', written before any delete, never at an
            // append); transitions, which jump the backlog, have a partial index of their own, so a
            // location's commit touches the table's last leaf alone (tools/bench-commit.py).
            try db.execute(
                sql: """
                    CREATE TABLE outbox_v6 (
                        seq INTEGER PRIMARY KEY,
                        kind TEXT NOT NULL,
                        region TEXT,
                        time REAL NOT NULL,
                        lat REAL NOT NULL,
                        lon REAL NOT NULL,
                        alt REAL, hAcc REAL, vAcc REAL, speed REAL, course REAL,
                        priority INTEGER NOT NULL,
                        appended REAL NOT NULL,
                        decided REAL
                    );
                    INSERT INTO outbox_v6
                        SELECT seq, kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority, appended,
                               decided
                        FROM outbox;
                    INSERT INTO meta (key, value) VALUES ('lastseq', max(
                        ifnull((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0),
                        ifnull((SELECT max(seq) FROM dead_letter), 0)));
                    DROP TABLE outbox;
                    ALTER TABLE outbox_v6 RENAME TO outbox;
                    CREATE INDEX outbox_transitions ON outbox (seq) WHERE priority = 0;
                    """)
        }
        registerVisitMigrations(&m)
        registerTargetMigrations(&m)
        return m
    }

    /// The last sequence number given: the largest stored, or the high-water mark kept for numbers
    /// whose records left.
    static let lastSequenceSQL = """
        SELECT max(ifnull((SELECT max(seq) FROM outbox), 0), (SELECT value FROM meta WHERE key = 'lastseq'))
        """

    /// Keeps the last sequence number given in meta before records leave the outbox (or the dead
    /// letters), so that a number is never given twice, even once every record has left: call it in
    /// the transaction that deletes, before the delete.
    static func rememberLastSequence(_ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE meta SET value = max(value, ifnull((SELECT max(seq) FROM outbox), 0),
                                            ifnull((SELECT max(seq) FROM dead_letter), 0))
                WHERE key = 'lastseq'
                """)
    }
}
