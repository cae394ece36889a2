import ArgumentParser
import Tracking
#if canImport(Glibc)
import Glibc
#endif
import Formats
import Geo
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

            JSON Lines fields (see README, "decode output"): time (ISO 8601 UTC with the log's \
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
        if let date, Self.parseDate(date) == nil {
            throw ValidationError("--date must be a date like 2024-03-09, got '\(date)'.")
        }
        if maxWarnings < 0 { throw ValidationError("--max-warnings must be 0 or more.") }
    }

    static func parseDate(_ s: String) -> Int32? {
        let parts = s.split(separator: "-")
        guard parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
              (1...12).contains(m), (1...31).contains(d), (1...9999).contains(y)
        else { return nil }
        return Int32(GNSSTime.daysFromCivil(year: y, month: m, day: d))
    }

    func run() throws {
        if file == "-" && isatty(0) != 0 {
            throw ValidationError("No FILE given and standard input is a terminal. Try: keeptrack decode fixtures/walk-15min.nmea")
        }
        let started = monotonicSeconds()
        var options = NMEADecoder.Options(strict: strict, referenceDay: date.flatMap(Self.parseDate))
        options.sourceName = file == "-" ? "<stdin>" : file
        var decoder = NMEADecoder(options: options)
        var warnings = 0
        let limit = maxWarnings
        decoder.diagnosticHandler = { error in
            warnings += 1
            if warnings <= limit {
                printError("warning: \(error)")
            } else if warnings == limit + 1 {
                printError("warning: more bad sentences follow; see the summary (--max-warnings N shows more)")
            }
        }
        var writer = FixWriter(format: format)
        var out = OutputBuffer()
        writer.begin(into: &out.bytes)
        var writeError: OutputError?
        let includeAll = all && writer.writesFixesWithoutPosition
        let showProgress = stderrIsTerminal && !quiet
        var lastProgress = started
        var failure: NMEAError?
        do throws(NMEAError) {
            try decoder.decodeFile(file, progress: { reader in
                guard showProgress, let size = reader.size, size > 0 else { return }
                let now = monotonicSeconds()
                if now - lastProgress < 0.25 { return }
                lastProgress = now
                let pct = Double(reader.position) / Double(size) * 100
                let mbps = Double(reader.position) / 1e6 / max(now - started, 1e-9)
                let eta = Double(size - reader.position) / 1e6 / max(mbps, 1e-9)
                printErrorInline("decoding \(Int(pct))%  \(Int(mbps)) MB/s  ETA \(Int(eta.rounded())) s")
            }) { fix in
                guard writeError == nil, includeAll || fix.hasPosition else { return }
                writer.write(fix, into: &out.bytes)
                do throws(OutputError) { try out.flushIfNeeded() } catch { writeError = error }
            }
        } catch {
            failure = error
        }
        if showProgress && lastProgress != started { printErrorInline("") }
        writer.end(into: &out.bytes)
        if writeError == nil {
            do throws(OutputError) { try out.flush() } catch { writeError = error }
        }
        let elapsed = monotonicSeconds() - started
        if !quiet { printError(summary(decoder.statistics, elapsed: elapsed)) }
        if let writeError { throw writeError }
        if let failure {
            if failure.code == .io {
                printError("error: \(failure)")
            } else {
                printError("error: stopped at the first bad sentence (--strict): \(failure)")
            }
            throw ExitCode(1)
        }
    }

    func summary(_ s: NMEAStatistics, elapsed: Double) -> String {
        let mb = Double(s.bytes) / 1e6
        var text = "\(inputLabel) \(grouped(s.sentences)) sentences, \(grouped(s.fixes)) fixes "
        text += "(\(grouped(s.positionFixes)) with position), \(grouped(s.badChecksums)) bad checksums, "
        text += "\(grouped(s.rejected - s.badChecksums)) other bad sentences, \(grouped(s.skippedBytes)) skipped bytes, "
        text += "\(grouped(s.unknownSentences)) unknown and \(grouped(s.proprietarySentences)) proprietary sentences; "
        text += "\(format2(mb)) MB in \(format3(elapsed)) s (\(format2(mb / max(elapsed, 1e-9))) MB/s)"
        if s.rejected > 0 {
            let parts = s.errors.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key): \($0.value)" }
            text += "\n  rejected by kind: " + parts.joined(separator: ", ")
        }
        return text
    }

    var inputLabel: String { "\(file == "-" ? "<stdin>" : file):" }
}

func format2(_ v: Double) -> String { formatFixed(v, 2) }
func format3(_ v: Double) -> String { formatFixed(v, 3) }

func formatFixed(_ v: Double, _ decimals: Int) -> String {
    var out: [UInt8] = []
    ByteWriting.appendFixed(v, decimals: decimals, to: &out)
    return String(decoding: out, as: UTF8.self)
}

/// Redraws a one-line status on standard error (terminal only).
func printErrorInline(_ message: String) {
    var line = "\r\u{1B}[K" + message
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}
