import NMEA
import TrackFiles

/// How far a replay of a file has got, for progress lines: the one shape ``NMEALogSource`` and
/// ``TrackFileSource`` report, with their reader's counters.
public struct ReplayProgress<Statistics: Hashable & Sendable>: Sendable, Hashable {
    /// How far into the file the fixes delivered so far reach, in bytes of the file (compressed
    /// bytes for gzip): within a chunk read ahead, in proportion to its fixes delivered, so a
    /// progress line follows the fixes, not the reader's read-ahead.
    public var position: Int64 = 0
    /// Bytes read from the file so far (ahead of ``position`` by up to one chunk).
    public var read: Int64 = 0
    /// The file's size, when known.
    public var size: Int64?
    public var fixes: Int = 0
    /// Completed passes over the file (loops).
    public var passes: Int = 0
    /// The reader's counters of the current pass.
    public var statistics: Statistics

    public init(statistics: Statistics) {
        self.statistics = statistics
    }

    /// The share of the file the fixes delivered reach (``position``, not the bytes read ahead),
    /// when its size is known.
    public var fraction: Double? {
        guard let size, size > 0 else { return nil }
        return Double(position) / Double(size)
    }
}

extension ReplayProgress where Statistics == NMEAStatistics {
    /// Nothing replayed yet.
    public init() { self.init(statistics: NMEAStatistics()) }
}

extension ReplayProgress where Statistics == TrackFileStatistics {
    /// Nothing replayed yet.
    public init() { self.init(statistics: TrackFileStatistics()) }
}
