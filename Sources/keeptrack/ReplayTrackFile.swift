import ArgumentParser
import Formats
import GPSInput
import Geo
import TrackFiles
import Tracking

extension Replay {
    /// `keeptrack replay` on a track file that is not NMEA (GPX, GeoJSON, CSV, `.rec`, Takeout):
    /// the same outputs as an NMEA log's replay, from a ``TrackFileSource``.
    func replayTrackFile(format: TrackFileFormat) async throws {
        let source = TrackFileSource(options: .init(path: file, format: format, speed: speed, loop: loop))
        try await replay(source, logClock: source.logClock, progress: { source.progress }) { seconds in
            source.progress.summary(source.name) + (seconds.map { " in \(formatFixed($0, 3)) s" } ?? "")
        }
    }
}

extension TrackFileSource.Progress {
    /// `walk.gpx (gpx 1.1): 1,234 fixes, 2 points without a time, 0 other records`
    func summary(_ name: String) -> String {
        let version = statistics.version.map { " \($0)" } ?? ""
        return "\(name)\(version): \(grouped(fixes)) fixes, \(grouped(statistics.untimed)) points without a time or "
            + "position, \(grouped(statistics.otherRecords)) other records"
    }
}
