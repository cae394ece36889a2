import PostgresNIO

/// A row's cells read in order, each decoded as its own concrete type.
///
/// postgres-nio's tuple form (`row.decode((Int64, String, ...).self)`) is generic over a parameter
/// pack, which the optimizer leaves unspecialized: every row then looks up its tuple's and its
/// columns' type metadata at run time (7 % of keeptrack's CPU in an ingest load's profile,
/// docs/performance.md). Read here, each cell's decoding is specialized for its type, and the
/// reads that run for every stored record (the catch-up's, the live stream's, the trail's) use it.
struct RowCells {
    private var cells: PostgresRow.Iterator

    init(_ row: PostgresRow) { cells = row.makeIterator() }

    /// The next cell as a `T`.
    mutating func next<T: PostgresDecodable>(_: T.Type = T.self) throws -> T {
        guard let cell = cells.next() else {
            preconditionFailure("a row read past its last column: the query and its reader disagree")
        }
        return try cell.decode(T.self)
    }
}

extension RowCells {
    /// A point as ``PostgresTrackStore/points(device:after:through:from:limit:)`` reads it, from the
    /// next five cells: time, latitude, longitude, accuracy, speed.
    mutating func point() throws -> (
        time: Double, latitude: Double, longitude: Double, accuracy: Double?, speed: Double?
    ) {
        (
            try next(Double.self), try next(Double.self), try next(Double.self), try next(Double?.self),
            try next(Double?.self)
        )
    }
}
