import Formats
import Geo
import NMEA

/// `keeptrack decode` as a library call: an NMEA log in, one record per GNSS epoch out in a
/// `FixFormat`, bad sentences reported through a handler (at most ``maxWarnings``, then one
/// notice), optional progress, and the statistics and any failure back.
///
/// ```swift
/// var job = LogDecoding(path: "walk.nmea", format: .gpx)
/// let result = try job.run(output: OutputBuffer(fd: fd), warn: { warnings.append($0) })
/// print(result.statistics.positionFixes, result.elapsed)
/// ```
public struct LogDecoding {
    /// The log: a path, or "-" for standard input (gzip is detected by content).
    public var path: String
    public var format: FixFormat
    /// Also write epochs without a position (formats that can say so: jsonl, csv).
    public var includeAll = false
    public var options: NMEADecoder.Options
    /// What ``run(output:warn:progress:)`` reports as it decodes.
    public enum Warning: Sendable {
        /// A bad sentence, skipped (or the one a strict decoding stopped at).
        case badSentence(NMEAError)
        /// ``maxWarnings`` were reported: later bad sentences are only counted, in the statistics.
        case moreFollow
    }

    /// How far a decoding has come, as ``run(output:warn:progress:)`` reports it.
    public struct Progress: Sendable, Hashable {
        /// The share of the file read, 0 to 1.
        public var fraction: Double
        /// Megabytes (10^6 bytes) of the file read a second so far.
        public var megabytesPerSecond: Double
        /// Seconds until the end of the file, at that speed.
        public var secondsLeft: Int

        public init(fraction: Double, megabytesPerSecond: Double, secondsLeft: Int) {
            (self.fraction, self.megabytesPerSecond, self.secondsLeft) = (fraction, megabytesPerSecond, secondsLeft)
        }
    }

    /// Bad-sentence reports passed to `warn` before they are only counted.
    public var maxWarnings = 20

    public init(path: String, format: FixFormat = .jsonl, options: NMEADecoder.Options = .init()) {
        self.path = path
        self.format = format
        self.options = options
        if self.options.sourceName == nil { self.options.sourceName = path == "-" ? "<stdin>" : path }
    }

    /// What a run did.
    public struct Result {
        public var statistics: NMEAStatistics
        /// The error that stopped decoding (`--strict`'s bad sentence, or an I/O error after which
        /// every complete epoch read so far was still written).
        public var failure: NMEAError?
        /// Seconds the decoding took.
        public var elapsed: Double
    }

    /// Decodes the whole log into `output`. `progress`, when given, hears how far it has come at most
    /// four times a second (``Progress``: the share of the file, MB/s, seconds left) and `nil` at
    /// the end when it heard anything.
    ///
    /// - Throws: `TrackerError` when the output cannot be written; decoding problems are in the result.
    public func run(
        output: OutputBuffer = OutputBuffer(), warn: @escaping (Warning) -> Void,
        progress: ((Progress?) -> Void)? = nil
    ) throws(TrackerError) -> Result {
        var out = output
        let started = monotonicSeconds()
        var decoder = NMEADecoder(options: options)
        var warnings = 0
        let limit = maxWarnings
        decoder.diagnosticHandler = { error in
            warnings += 1
            if warnings <= limit {
                warn(.badSentence(error))
            } else if warnings == limit + 1 {
                warn(.moreFollow)
            }
        }
        // Past the notice, bad sentences are only counted: the decoder need not describe them.
        decoder.diagnosticLimit = limit + 1
        var writer = FixWriter(format: format)
        writer.begin(into: &out.bytes)
        var writeError: TrackerError?
        let includeAll = includeAll && writer.writesFixesWithoutPosition
        var lastProgress = started
        var failure: NMEAError?
        do throws(NMEAError) {
            try decoder.decodeFile(
                path,
                progress: { reader in
                    guard let progress, let size = reader.size, size > 0 else { return }
                    let now = monotonicSeconds()
                    if now - lastProgress < 0.25 { return }
                    lastProgress = now
                    let mbps = Double(reader.position) / 1e6 / max(now - started, 1e-9)
                    let eta = Double(size - reader.position) / 1e6 / max(mbps, 1e-9)
                    progress(
                        Progress(
                            fraction: Double(reader.position) / Double(size), megabytesPerSecond: mbps,
                            secondsLeft: Int(eta.rounded())))
                }
            ) { fix in
                guard writeError == nil, includeAll || fix.hasPosition else { return }
                writer.write(fix, into: &out.bytes)
                do throws(TrackerError) { try out.flushIfNeeded() } catch { writeError = error }
            }
        } catch {
            failure = error
        }
        if let progress, lastProgress != started { progress(nil) }
        writer.end(into: &out.bytes)
        if writeError == nil {
            do throws(TrackerError) { try out.flush() } catch { writeError = error }
        }
        if let writeError { throw writeError }
        return Result(statistics: decoder.statistics, failure: failure, elapsed: monotonicSeconds() - started)
    }

    /// A `YYYY-MM-DD` date as days since 1970-01-01 (the decoder's reference day), or nil.
    public static func parseDate(_ s: String) -> Int32? {
        let parts = s.split(separator: "-")
        guard parts.count == 3, let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...12).contains(m), (1...31).contains(d), (1...9999).contains(y)
        else { return nil }
        return Int32(GNSSTime.daysFromCivil(year: y, month: m, day: d))
    }
}
