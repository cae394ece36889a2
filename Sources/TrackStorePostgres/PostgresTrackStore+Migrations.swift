import Logging
import PostgresNIO
import TrackStore

extension PostgresTrackStore {
    /// The schema's migrations, in order, each applied once and recorded in `keeptrack_migrations` (as
    /// GRDB's migrator does for the SQLite store). Append; never change one that shipped.
    ///
    /// `geography(Point,4326)`, not `geometry`: distances and radii are in metres anywhere on the globe
    /// and its GiST index serves `ST_DWithin` in metres, at a measured ingest cost (docs/endpoint.md,
    /// "On PostgreSQL + PostGIS").
    static let migrations: [(identifier: String, statements: [String])] = [
        (
            "v1-positions",
            [
                """
                CREATE TABLE positions (
                    key text COLLATE "C" NOT NULL,
                    device text COLLATE "C" NOT NULL,
                    seq bigint,
                    kind text NOT NULL,
                    region text,
                    time timestamptz NOT NULL,
                    position geography(Point, 4326) NOT NULL,
                    alt double precision,
                    h_acc double precision,
                    v_acc double precision,
                    speed double precision,
                    course double precision,
                    format text NOT NULL,
                    received timestamptz NOT NULL,
                    valid boolean NOT NULL DEFAULT true,
                    attributes jsonb,
                    CONSTRAINT positions_key PRIMARY KEY (key)
                )
                """,
                "CREATE INDEX positions_device_time ON positions (device, time)",
                "CREATE INDEX positions_position ON positions USING gist (position)",
                """
                CREATE TABLE devices (
                    id text COLLATE "C" PRIMARY KEY,
                    points bigint NOT NULL,
                    first timestamptz NOT NULL,
                    last timestamptz NOT NULL,
                    last_received timestamptz NOT NULL
                )
                """,
            ]
        ),
        ("v2-fleet", fleetMigration),
        ("v3-devices-trigger", devicesTriggerMigration),
        ("v4-device-secrets", secretsMigration),
        ("v5-visits-and-trips", visitsMigration),
        ("v6-stream-notify", streamMigration),
        ("v7-stored-stops", storedStopsMigration),
        ("v8-events", eventsMigration),
        ("v9-outliers", outliersMigration),
        ("v10-statistics", statisticsMigration),
        ("v11-shares", sharesMigration),
        ("v12-place-names", placeNamesMigration),
        ("v13-homeassistant-cursors", homeAssistantMigration),
        ("v14-events-presence", presenceMigration),
        ("v15-device-overspeed", overspeedMigration),
        ("v16-notify-after-commit", notifyAfterCommitMigration),
        ("v17-stop-marks", stopMarksMigration),
        ("v18-stored-ranges", storedRangesMigration),
        ("v19-latest-not-null-island", notNullIslandMigration),
    ]

    /// The devices' summaries kept by the database itself, after each statement that adds points
    /// (a `COPY` or an `INSERT`), from the rows it added (a transition table: the duplicates an
    /// `ON CONFLICT DO NOTHING` skipped are not in it), in the statement's own transaction. A `COPY`
    /// is then one round trip and still one transaction; an AFTER STATEMENT trigger keeps `COPY`'s
    /// multi-insert (a BEFORE ROW trigger would turn it off). The latest position is chosen as
    /// ``refreshLatestSQL(where:)`` chooses it (since ``notNullIslandMigration``): the newest valid
    /// time, then sequence, then key.
    static let devicesTriggerMigration = [
        devicesTriggerFunction(create: "CREATE", latest: "valid"),
        """
        CREATE TRIGGER positions_devices AFTER INSERT ON positions REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION keeptrack_devices_after_insert()
        """,
    ]

    /// A point at 0,0 (a phone's "null island": no position) is never a device's latest position:
    /// the trigger and the refresh leave such points out, and devices whose latest is one get it
    /// again from their points.
    static let notNullIslandMigration = [
        devicesTriggerFunction(create: "CREATE OR REPLACE", latest: "valid AND \(positionSQL)"),
        refreshLatestSQL(where: "d.latest_lat = 0 AND d.latest_lon = 0"),
    ]

    /// What makes a stored point a position a device's latest may be: not at 0,0.
    static let positionSQL = "(ST_X(position::geometry) <> 0 OR ST_Y(position::geometry) <> 0)"

    /// The devices trigger's function; `latest` chooses the added rows that may be the latest.
    static func devicesTriggerFunction(create: String, latest: String) -> String {
        """
        \(create) FUNCTION keeptrack_devices_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO devices AS d (id, points, first, last, last_received, latest_time, latest_lat, latest_lon,
                                      latest_alt, latest_h_acc, latest_speed, latest_course)
            SELECT g.device, g.n, g.first, g.last, g.received, f.time, ST_Y(f.position::geometry),
                   ST_X(f.position::geometry), f.alt, f.h_acc, f.speed, f.course
            FROM (SELECT device, count(*) AS n, min(time) AS first, max(time) AS last, max(received) AS received
                  FROM added GROUP BY device) g
            LEFT JOIN (SELECT DISTINCT ON (device) device, time, position, alt, h_acc, speed, course FROM added
                       WHERE \(latest) ORDER BY device, time DESC, seq DESC NULLS LAST, key DESC) f USING (device)
            ORDER BY g.device
            \(devicesConflictSQL);
            RETURN NULL;
        END
        $$
        """
    }

    /// Creates PostGIS when it is missing (which needs a superuser, or a database owner where it is
    /// trusted), then applies the migrations not yet applied, in one transaction under an advisory
    /// lock: instances starting at once apply each once.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        var postgis = false
        for try await _ in try await connection.query(
            "SELECT 1 FROM pg_extension WHERE extname = 'postgis'",
            logger: logger)
        { postgis = true }
        if !postgis {
            do {
                try await connection.query("CREATE EXTENSION IF NOT EXISTS postgis", logger: logger)
            } catch {
                throw TrackStoreError(
                    .postGISMissing,
                    "PostGIS is not installed in this database; a superuser must run CREATE EXTENSION postgis in it first"
                )
            }
        }
        try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7152015)", logger: logger)
            try await connection.query(
                """
                CREATE TABLE IF NOT EXISTS keeptrack_migrations (
                    identifier text PRIMARY KEY,
                    applied timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            var applied: Set<String> = []
            for try await id in try await connection.query(
                "SELECT identifier FROM keeptrack_migrations",
                logger: logger
            ).decode(String.self) {
                applied.insert(id)
            }
            for (identifier, statements) in migrations where !applied.contains(identifier) {
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO keeptrack_migrations (identifier) VALUES (\(identifier))",
                    logger: logger)
                logger.info("migrated", metadata: ["migration": "\(identifier)"])
            }
        }
    }
}
