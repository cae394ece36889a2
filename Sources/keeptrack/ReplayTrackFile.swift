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
        if location.wantsEvents || lifecycle.isSet || upload.enabled {
            let run = TrackerRun(
                location: location, lifecycle: lifecycle, upload: upload, dataDirectory: data.layout,
                onLogTime: true, lineBuffered: speed != nil, quiet: quiet,
                inputProgress: quiet ? nil : { @Sendable in source.progress.line(elapsed: $0) })
            try await run.run(source, clock: source.logClock)
            if !quiet { printError(source.progress.summary(source.name)) }
            return
        }
        var output = SourceLines(includeAll: all, lineBuffered: speed != nil)
        let started = monotonicSeconds()
        let failed = try await output.pump(
            source,
            tick: progressWanted() && !quiet
                ? { elapsed in printErrorInline(elapsed.map { source.progress.line(elapsed: $0) } ?? "") } : nil)
        if !quiet {
            printError(source.progress.summary(source.name) + " in \(formatFixed(monotonicSeconds() - started, 3)) s")
        }
        if failed { throw ExitCode(1) }
    }
}

extension TrackFileSource.Progress {
    /// The progress line `keeptrack replay` draws for a track file: percent, fixes, fixes per second, ETA.
    func line(elapsed: Double) -> String {
        let rate = Double(fixes) / Swift.max(elapsed, 1e-9)
        guard let fraction else { return "\(grouped(fixes)) fixes, \(Int(rate)) fixes/s" }
        let eta = fraction > 0 ? elapsed / fraction - elapsed : 0
        return "\(Int(fraction * 100))%  \(grouped(fixes)) fixes  \(Int(rate)) fixes/s  ETA \(Int(eta.rounded())) s"
    }

    /// `walk.gpx (gpx 1.1): 1,234 fixes, 2 points without a time, 0 other records`
    func summary(_ name: String) -> String {
        let version = statistics.version.map { " \($0)" } ?? ""
        return "\(name)\(version): \(grouped(fixes)) fixes, \(grouped(statistics.untimed)) points without a time or "
            + "position, \(grouped(statistics.otherRecords)) other records"
    }
}
