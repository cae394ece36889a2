/// What the store's listener has published, so that after a reconnection it reads what was stored
/// meanwhile (its notifications were lost with the connection) without losing or doubling a record.
///
/// A statement that stored points is known by its transaction id and the range of storage numbers
/// (`stored`) it gave, as its notification says (`XID FIRST LAST`). Storage numbers are given at
/// insert and committed later, by concurrent transactions in any order, and numbers are skipped (a
/// duplicate takes one and is not stored), so "everything above the highest seen" is not enough: a
/// catch-up reads every statement with numbers within ``window`` below the highest published (and
/// above ``base``, where the stream began) and leaves out those already published.
struct StoredCursor: Sendable, Hashable {
    struct Statement: Hashable, Sendable {
        var xid: String
        var first: Int64
        var last: Int64

        /// Whether `other` is (part of) the same transaction's points.
        func overlaps(_ other: Statement) -> Bool {
            xid == other.xid && first <= other.last && other.first <= last
        }
    }

    /// How far below the highest published number a catch-up looks for statements committed late.
    let window: Int64
    /// The highest storage number when the stream began: nothing at or below it is caught up.
    private(set) var base: Int64?
    /// The highest storage number published.
    private(set) var highest: Int64 = 0
    /// The statements published within ``window`` of ``highest``.
    private(set) var published: [Statement] = []

    init(window: Int64 = 100_000) { self.window = window }

    /// The stream begins: the highest storage number now (read after `LISTEN` is in place).
    mutating func begin(at highest: Int64) {
        guard base == nil else { return }
        base = highest
        self.highest = max(self.highest, highest)
    }

    /// Whether a notified (or caught-up) statement is to be published: not already published. It is
    /// then counted as published.
    mutating func admit(_ statement: Statement) -> Bool {
        guard !published.contains(where: { $0.overlaps(statement) }) else { return false }
        published.append(statement)
        highest = max(highest, statement.last)
        if published.count > 256, published[0].last < highest - window {
            published.removeAll { $0.last < highest - window }
        }
        return true
    }

    /// The storage number a catch-up reads above (exclusive): `nil` before the stream began (nothing
    /// to catch up).
    var catchUpFloor: Int64? {
        guard let base else { return nil }
        return max(base, highest - window)
    }
}
