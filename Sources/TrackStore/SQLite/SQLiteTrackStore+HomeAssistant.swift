import GRDB

/// The Home Assistant relay's cursors (``HomeAssistantStore``), in the table `homeassistant_cursors`.
extension SQLiteTrackStore: HomeAssistantStore {
    static func registerHomeAssistantMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v14-homeassistant-cursors") { db in
            try db.execute(
                sql: """
                    CREATE TABLE homeassistant_cursors (
                        target TEXT NOT NULL,
                        device TEXT NOT NULL,
                        time REAL NOT NULL,
                        PRIMARY KEY (target, device)
                    ) WITHOUT ROWID;
                    """)
        }
    }

    public func homeAssistantCursors(target: String) async throws -> [String: Double] {
        try await pool.read { db in
            var out: [String: Double] = [:]
            let rows = try Row.fetchCursor(
                db, sql: "SELECT device, time FROM homeassistant_cursors WHERE target = ?", arguments: [target])
            while let row = try rows.next() { out[row[0]] = row[1] }
            return out
        }
    }

    public func setHomeAssistantCursors(_ cursors: [String: Double], target: String) async throws {
        guard !cursors.isEmpty else { return }
        try await pool.write { db in
            let statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO homeassistant_cursors (target, device, time) VALUES (?, ?, ?)")
            for (device, time) in cursors { try statement.execute(arguments: [target, device, time]) }
        }
    }
}
