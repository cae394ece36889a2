import PostgresNIO
import TrackStore

/// The Home Assistant relay's cursors (``HomeAssistantStore``), in the table `homeassistant_cursors`.
extension PostgresTrackStore: HomeAssistantStore {
    /// Migration `v13-homeassistant-cursors`. The time as the relay read it (a double, not a
    /// timestamp rounded to the microsecond).
    static let homeAssistantMigration: [String] = [
        """
        CREATE TABLE homeassistant_cursors (
            target text COLLATE "C" NOT NULL,
            device text COLLATE "C" NOT NULL,
            time double precision NOT NULL,
            PRIMARY KEY (target, device)
        )
        """
    ]

    public func homeAssistantCursors(target: String) async throws -> [String: Double] {
        var out: [String: Double] = [:]
        for try await (device, time) in try await liveQuery(
            "SELECT device, time FROM homeassistant_cursors WHERE target = \(target)",
            logger: logger
        ).decode((String, Double).self) {
            out[device] = time
        }
        return out
    }

    public func setHomeAssistantCursors(_ cursors: [String: Double], target: String) async throws {
        guard !cursors.isEmpty else { return }
        let pairs = cursors.sorted { $0.key < $1.key }
        let devices = pairs.map(\.key), times = pairs.map(\.value)
        for try await _ in try await liveQuery(
            """
            INSERT INTO homeassistant_cursors (target, device, time)
            SELECT \(target), d, t FROM unnest(\(devices)::text[], \(times)::double precision[]) AS u(d, t)
            ON CONFLICT (target, device) DO UPDATE SET time = EXCLUDED.time RETURNING 1
            """, logger: logger)
        {}
    }
}
