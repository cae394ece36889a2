/// What the store's listener has published, so that after a reconnection it reads what was stored
/// meanwhile (its notifications were lost with the connection) without losing or doubling a record.
///
/// A record is known by its storage number (`stored`, given at insert, never changed). A statement
/// that stored points is notified with the range of the numbers it gave (`XID FIRST LAST`). Numbers
/// are given at insert and committed later, by concurrent transactions in any order, and numbers are
/// skipped (a duplicate takes one and is not stored), so "everything above the highest seen" is not
/// enough, and a statement's range can hold another's numbers: the cursor keeps the numbers it
/// published (as ranges, within ``window`` below the highest), a notified range is read whole and
/// what was published already is left out, and a catch-up reads every number within ``window``
/// below the highest published (and above ``base``, where the stream began) the same way.
///
/// Not the row's transaction (`xmin`): an `UPDATE` (the detector's catch-up marks outliers) gives
/// the row another, and a statement's rows read by it were then missing from the stream.
struct StoredCursor: Sendable, Hashable {
    /// A notified statement's range (the payload's transaction id is for a reader of the channel:
    /// the cursor goes by numbers alone).
    struct Statement: Hashable, Sendable {
        var first: Int64
        var last: Int64
    }

    /// How far below the highest published number a catch-up looks for statements committed late.
    let window: Int64
    /// The highest storage number when the stream began: nothing at or below it is caught up.
    private(set) var base: Int64?
    /// The highest storage number published.
    private(set) var highest: Int64 = 0
    /// The numbers published within ``window`` of ``highest``, as sorted, disjoint ranges that do not
    /// touch.
    private(set) var published: [ClosedRange<Int64>] = []

    init(window: Int64 = 100_000) { self.window = window }

    /// The stream begins: the highest storage number then (nothing at or below it is published).
    mutating func begin(at highest: Int64) {
        guard base == nil else { return }
        base = highest
        self.highest = max(self.highest, highest)
    }

    /// Whether every number of `statement` was published already (nothing to read).
    func covers(_ statement: Statement) -> Bool {
        if let base, statement.last <= base { return true }
        return published.contains { $0.lowerBound <= statement.first && statement.last <= $0.upperBound }
    }

    /// Whether `number` is to be published: above ``base`` and not published yet.
    func isNew(_ number: Int64) -> Bool {
        if let base, number <= base { return false }
        // The last range that starts at or below `number`.
        var lo = 0, hi = published.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if published[mid].lowerBound <= number { lo = mid + 1 } else { hi = mid }
        }
        return lo == 0 || published[lo - 1].upperBound < number
    }

    /// Counts `numbers` (each new: ``isNew(_:)``) as published.
    mutating func publish(_ numbers: [Int64]) {
        guard !numbers.isEmpty else { return }
        var ranges = published
        for n in numbers.sorted() {
            if let last = ranges.last, last.upperBound + 1 >= n, last.lowerBound <= n {
                ranges[ranges.count - 1] = last.lowerBound...max(last.upperBound, n)
            } else {
                ranges.append(n...n)
            }
        }
        ranges.sort { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<Int64>] = []
        for r in ranges {
            if let last = merged.last, last.upperBound + 1 >= r.lowerBound {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                merged.append(r)
            }
        }
        highest = max(highest, merged.last?.upperBound ?? highest)
        let floor = highest - window
        if merged.count > 256 || (merged.first?.upperBound ?? floor) < floor {
            merged.removeAll { $0.upperBound < floor }
        }
        published = merged
    }

    /// The storage number a catch-up reads above (exclusive): `nil` before the stream began (nothing
    /// to catch up).
    var catchUpFloor: Int64? {
        guard let base else { return nil }
        return max(base, highest - window)
    }
}
