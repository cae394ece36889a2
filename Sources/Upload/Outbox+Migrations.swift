import GRDB

extension Outbox {
    /// The schema's history, one named migration a step; never edit a shipped one, add another.
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1-outbox") { db in
            try db.execute(sql: """
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
            try db.execute(sql: """
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
            try db.execute(sql: """
                CREATE INDEX outbox_appended ON outbox (appended);
                INSERT INTO meta (key, value) SELECT 'pending', COUNT(*) FROM outbox;
                """)
        }
        m.registerMigration("v4-count-in-memory") { db in
            // Two fewer pages written per append: the count lives in memory (counted at open) and
            // the oldest record is the first by sequence.
            try db.execute(sql: """
                DROP INDEX outbox_appended;
                DELETE FROM meta WHERE key = 'pending';
                """)
        }
        m.registerMigration("v5-decided-at") { db in
            // A transition's deciding location's time: Traccar gets the transition as an event on
            // that position, at that time.
            try db.execute(sql: """
                ALTER TABLE outbox ADD COLUMN decided REAL;
                ALTER TABLE dead_letter ADD COLUMN decided REAL;
                """)
        }
        return m
    }
}
