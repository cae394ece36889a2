import ArgumentParser
import TrackFiles
import Tracking
#if canImport(Glibc)
    import Glibc
#endif
import Formats
import NMEA

extension FixFormat: ExpressibleByArgument {}

struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode an NMEA 0183 log into one record per GNSS epoch.",
        discussion: """
            Reads FILE (gzip is detected by content; '-' or no FILE reads standard input), merges the \
            sentences of each epoch (GGA, RMC, GLL, GSA, GSV, VTG, GNS, ZDA, GST from any talker) into \
            one fix, and prints it. Corrupted sentences are skipped, counted and reported on standard \
            error with their line and byte offset; --strict stops at the first one instead.

            A summary (sentences, fixes, bad checksums, skipped bytes, unknown types, speed) goes to \
            standard error at the end; --quiet drops it.

            JSON Lines fields (see docs/protocols.md): time (ISO 8601 UTC with the log's \
            fractional digits; time of day only while the log has given no date), lat, lon (degrees, \
            9 decimals), alt (m above MSL), speed (m/s), course (degrees true), mode (none/2d/3d), \
            quality, hAcc, vAcc (m), sats, satsInView, hdop, vdop, pdop, geoidSep (m), lines \
            ([first, last] source line). Unknown values are null.

            Examples:
              keeptrack decode fixtures/walk-15min.nmea | head -3
              keeptrack decode --format gpx fixtures/drive-1h.nmea > drive.gpx
              keeptrack decode --strict receiver.log || echo "log has a bad sentence"
              cat /dev/ttyACM0 | keeptrack decode -
            """
    )

    @Argument(help: "The NMEA log to decode ('-' for standard input; .gz files are decompressed).")
    var file: String = "-"

    @Option(name: .shortAndLong, help: "Output format: jsonl, csv, gpx or geojson.")
    var format: FixFormat = .jsonl

    @Flag(help: "Also print epochs without a position (mode \"none\"); jsonl and csv only.")
    var all = false

    @Flag(help: "Stop at the first bad sentence with exit status 1 instead of skipping it.")
    var strict = false

    @Option(help: ArgumentHelp("Date (YYYY-MM-DD, UTC) for fixes before the log gives one.", valueName: "date"))
    var date: String?

    @Option(help: "Print at most this many bad-sentence reports on standard error (0 for none).")
    var maxWarnings = 20

    @Flag(name: .shortAndLong, help: "No summary on standard error.")
    var quiet = false

    func validate() throws {
        if let date, LogDecoding.parseDate(date) == nil {
            throw ValidationError("--date must be a date like 2024-03-09, got '\(date)'.")
        }
        if maxWarnings < 0 { throw ValidationError("--max-warnings must be 0 or more.") }
    }

    func run() throws {
        if file == "-" && isatty(0) != 0 {
            throw ValidationError(
                "No FILE given and standard input is a terminal. Try: keeptrack decode fixtures/walk-15min.nmea")
        }
        // Another track file would be read as NMEA: a warning for every line, and no fix.
        if file != "-", let format = try? TrackFileFormat.sniff(path: file), format != .nmea {
            let kind =
                switch format {
                case .gpx: "a GPX"
                case .geojson: "a GeoJSON"
                case .takeout: "a Google Takeout"
                case .csv: "a CSV"
                case .owntracksRec: "an OwnTracks .rec"
                case .nmea: "an NMEA"
                }
            throw ValidationError(
                "\(file) is \(kind) file, not an NMEA log: decode reads NMEA; keeptrack replay \(file) reads it "
                    + "(fixes as JSON Lines)")
        }
        var job = LogDecoding(
            path: file, format: format,
            options: .init(strict: strict, referenceDay: date.flatMap(LogDecoding.parseDate)))
        job.includeAll = all
        job.maxWarnings = maxWarnings
        let progress: ((LogDecoding.Progress?) -> Void)? =
            progressWanted() && !quiet
            ? { p in
                printErrorInline(p?.line ?? "")
            } : nil
        let result = try job.run(
            warn: { warning in
                switch warning {
                case .badSentence(let error): printError("warning: \(error)", level: .warning)
                case .moreFollow:
                    printError(
                        "warning: more bad sentences follow; see the summary (--max-warnings N shows more)",
                        level: .warning)
                }
            }, progress: progress)
        if !quiet { printError(result.summary(label: "\(file == "-" ? "<stdin>" : file):")) }
        if let failure = result.failure {
            let stopped = failure.code == NMEAError.Code.io ? "" : "stopped at the first bad sentence (--strict): "
            printError("error: \(stopped)\(failure)", level: .error)
            throw ExitCode(1)
        }
    }
}

extension LogDecoding.Result {
    /// The one-paragraph summary `keeptrack decode` prints on standard error.
    func summary(label: String) -> String {
        let s = statistics
        let mb = Double(s.bytes) / 1e6
        var text = "\(label) \(grouped(s.sentences)) sentences, \(grouped(s.fixes)) fixes "
        text += "(\(grouped(s.positionFixes)) with position), \(grouped(s.badChecksums)) bad checksums, "
        text +=
            "\(grouped(s.rejected - s.badChecksums)) other bad sentences, \(grouped(s.skippedBytes)) skipped bytes, "
        text +=
            "\(grouped(s.unknownSentences)) unknown and \(grouped(s.proprietarySentences)) proprietary sentences; "
        text +=
            "\(formatFixed(mb, 2)) MB in \(formatFixed(elapsed, 3)) s (\(formatFixed(mb / max(elapsed, 1e-9), 2)) MB/s)"
        if s.rejected > 0 {
            let parts = s.errors.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key): \($0.value)" }
            text += "\n  rejected by kind: " + parts.joined(separator: ", ")
        }
        return text
    }
}

extension LogDecoding.Progress {
    /// The progress line `keeptrack decode` draws: `decoding 46%  210 MB/s  ETA 3 s`.
    var line: String { "decoding \(Int(fraction * 100))%  \(Int(megabytesPerSecond)) MB/s  ETA \(secondsLeft) s" }
}
