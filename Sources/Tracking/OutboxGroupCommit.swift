import Formats
import Upload

/// When the records a tracker decided are committed to the outbox: together, once `maxRecords`
/// wait or once the oldest has waited `maxDelay` seconds (looked at when the next record comes,
/// and by the tracker's timer at ``fallbackDeadline`` when none comes), and whenever the tracker
/// asks (the input's end, a stop). One SQLite commit for a group instead of one per record.
///
/// A value type: ``add(_:at:)`` takes a record and the time and says whether the group is due;
/// ``take()`` empties it for the commit. No clock, no I/O.
struct OutboxGroupCommit: Sendable {
    let maxRecords: Int
    let maxDelay: Double
    private(set) var records: [TrailRecord] = []
    /// When the oldest waiting record was added.
    private(set) var oldest: Double?

    /// - Parameters:
    ///   - maxRecords: records that make a group (at least 1; 1 commits every record at once).
    ///   - maxDelay: seconds the oldest record may wait (0: every record at once).
    init(maxRecords: Int, maxDelay: Double) {
        self.maxRecords = max(1, maxRecords)
        self.maxDelay = max(0, maxDelay)
    }

    var isEmpty: Bool { records.isEmpty }

    /// Adds `record`, decided at `time`; returns whether the group is due now.
    mutating func add(_ record: TrailRecord, at time: Double) -> Bool {
        if records.isEmpty { oldest = time }
        records.append(record)
        return isDue(at: time)
    }

    /// Whether the waiting records are due at `time` (a clock that went back counts as due).
    func isDue(at time: Double) -> Bool {
        guard let oldest, !records.isEmpty else { return false }
        return records.count >= maxRecords || time - oldest >= maxDelay || time < oldest
    }

    /// When the timer commits a group that no new record completed: twice ``maxDelay`` after its
    /// oldest record (the next record usually commits it first, without a timer wake-up).
    var fallbackDeadline: Double? { oldest.map { $0 + 2 * maxDelay } }

    /// The waiting records, in order, for one commit; the group is empty after.
    mutating func take() -> [TrailRecord] {
        defer {
            records.removeAll(keepingCapacity: true)
            oldest = nil
        }
        return records
    }
}
