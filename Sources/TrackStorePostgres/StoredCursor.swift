/// What the store's listener has published, so that after a reconnection it reads what was stored
/// meanwhile (its notifications were lost with the connection) without losing or doubling a record.
///
/// A record is known by its storage number (`stored`, given at insert, never changed). A statement
/// that stored points is announced with the range of the numbers it gave and, when they fit, the
/// numbers themselves as ranges and its devices (``StoredAnnouncement``). Numbers are given at insert
/// and committed later, by concurrent transactions in any order, and numbers are skipped (a duplicate
/// takes one and is not stored), so "everything above the highest seen" is not enough, and a
/// statement's range can hold another's numbers: the cursor keeps the numbers it published (as
/// ranges, within ``window`` below the highest); a notified range is read only where it holds
/// numbers not published (``unpublished(from:through:)``), and a catch-up reads the numbers not
/// published within ``window`` below the highest published (and above ``base``, where the stream
/// began) and above it.
///
/// Not the row's transaction (`xmin`): an `UPDATE` (the detector's catch-up marks outliers) gives
/// the row another, and a statement's rows read by it were then missing from the stream.
struct StoredCursor: Sendable, Hashable {
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

    /// The numbers from `first` through `last` (`nil`: without end, up to `Int64.max`) that are to be
    /// published (above ``base``, not published yet), as sorted, disjoint ranges: what is left to
    /// read of them.
    func unpublished(from first: Int64, through last: Int64?) -> [ClosedRange<Int64>] {
        var low = first
        if let base, base >= low { low = base + 1 }
        let high = last ?? .max
        guard low <= high else { return [] }
        var gaps: [ClosedRange<Int64>] = []
        // The first range that ends at or above `low`.
        var lo = 0, hi = published.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if published[mid].upperBound < low { lo = mid + 1 } else { hi = mid }
        }
        for range in published[lo...] {
            if range.lowerBound > high { break }
            if range.lowerBound > low { gaps.append(low...(range.lowerBound - 1)) }
            if range.upperBound >= high { return gaps }
            low = range.upperBound + 1
        }
        gaps.append(low...high)
        return gaps
    }

    /// Whether every number of `ranges` was published already, or is at or below ``base``.
    func covers(_ ranges: [ClosedRange<Int64>]) -> Bool {
        ranges.allSatisfy { unpublished(from: $0.lowerBound, through: $0.upperBound).isEmpty }
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

    /// Counts `numbers` as published.
    mutating func publish(_ numbers: [Int64]) {
        var ranges: [ClosedRange<Int64>] = []
        for n in numbers.sorted() {
            if let last = ranges.last, last.upperBound + 1 >= n {
                ranges[ranges.count - 1] = last.lowerBound...max(last.upperBound, n)
            } else {
                ranges.append(n...n)
            }
        }
        publish(ranges: ranges)
    }

    /// Counts the numbers of `ranges` as published (those published already change nothing).
    mutating func publish(ranges new: [ClosedRange<Int64>]) {
        guard !new.isEmpty else { return }
        let ranges = (published + new).sorted { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<Int64>] = []
        for r in ranges {
            if let last = merged.last, last.upperBound == .max || last.upperBound + 1 >= r.lowerBound {
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

/// A notification on `keeptrack_stored`: a statement that stored points, and what it stored. Its
/// payload is `XID FIRST LAST` (the statement's transaction, the lowest and highest storage numbers
/// it gave), then, when they fit in a notification, a line with the numbers it stored as ranges
/// (`LOW-HIGH`, in order, a space between), and a line for each of its devices (a device id holds no
/// control character), in storage order of their first point.
struct StoredAnnouncement: Hashable, Sendable {
    var first: Int64
    var last: Int64
    /// The storage numbers the statement stored, sorted, disjoint ranges (`nil`: not announced).
    var ranges: [ClosedRange<Int64>]?
    /// Its devices, each once (`nil`: not announced).
    var devices: [String]?

    init(first: Int64, last: Int64, ranges: [ClosedRange<Int64>]? = nil, devices: [String]? = nil) {
        self.first = first
        self.last = last
        self.ranges = ranges
        self.devices = devices
    }

    /// The announcement in `payload`; `nil` when its first line is not `XID FIRST LAST`. Ranges and
    /// devices that do not hold together (out of order, outside `FIRST...LAST`, none) are left out:
    /// the statement's rows are then read.
    init?(payload: String) {
        let lines = payload.split(separator: "\n", omittingEmptySubsequences: false)
        let head = lines[0].split(separator: " ")
        guard head.count == 3, let first = Int64(head[1]), let last = Int64(head[2]), first <= last else { return nil }
        self.init(first: first, last: last)
        guard lines.count >= 3 else { return }
        var ranges: [ClosedRange<Int64>] = []
        for part in lines[1].split(separator: " ") {
            let bounds = part.split(separator: "-")
            guard bounds.count == 2, let low = Int64(bounds[0]), let high = Int64(bounds[1]), low <= high,
                ranges.last.map({ $0.upperBound < low }) ?? (low == first)
            else { return }
            ranges.append(low...high)
        }
        let devices = lines[2...].map(String.init)
        guard ranges.last?.upperBound == last, !devices.contains(where: \.isEmpty) else { return }
        self.ranges = ranges
        self.devices = devices
    }
}
