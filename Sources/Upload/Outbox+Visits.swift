import Formats
import GRDB

extension Outbox {
    /// The columns of a visit's or trip's ``TrailRecord/Span``, in both tables (all `NULL` for other
    /// records: a byte each in a row's header).
    static let spanColumns = "spanEnd, endLat, endLon, distance, maxSpeed"

    /// The values for ``spanColumns``.
    static func spanArguments(_ r: TrailRecord) -> StatementArguments {
        let s = r.span
        return [s?.end, s?.endLatitude, s?.endLongitude, s?.distance, s?.maximumSpeed]
    }

    /// The span in a row's ``spanColumns`` from `index` on.
    static func span(_ row: Row, at index: Int) -> TrailRecord.Span {
        TrailRecord.Span(
            end: row[index], endLatitude: row[index + 1], endLongitude: row[index + 2], distance: row[index + 3],
            maximumSpeed: row[index + 4])
    }

    /// Visits and trips (issue 27): records with an end. They are not locations, so they have
    /// priority 0 and jump a location backlog as region transitions do. An outbox of an older
    /// version gains the columns (no row is rewritten: `ALTER TABLE ... ADD COLUMN`).
    static func registerVisitMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v7-visits-and-trips") { db in
            try db.execute(
                sql: """
                    ALTER TABLE outbox ADD COLUMN spanEnd REAL;
                    ALTER TABLE outbox ADD COLUMN endLat REAL;
                    ALTER TABLE outbox ADD COLUMN endLon REAL;
                    ALTER TABLE outbox ADD COLUMN distance REAL;
                    ALTER TABLE outbox ADD COLUMN maxSpeed REAL;
                    ALTER TABLE dead_letter ADD COLUMN spanEnd REAL;
                    ALTER TABLE dead_letter ADD COLUMN endLat REAL;
                    ALTER TABLE dead_letter ADD COLUMN endLon REAL;
                    ALTER TABLE dead_letter ADD COLUMN distance REAL;
                    ALTER TABLE dead_letter ADD COLUMN maxSpeed REAL;
                    """)
        }
    }
}
