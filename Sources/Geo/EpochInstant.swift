/// An instant of the clocks KeepTrack runs on: a duration since 1970-01-01T00:00:00Z, so that the
/// live wall clock, a test's manual clock and a replayed log's clock all tell the same kind of time.
public struct EpochInstant: InstantProtocol, Hashable, Sendable {
    /// Time since 1970-01-01T00:00:00Z.
    public var offset: Duration

    public init(offset: Duration) { self.offset = offset }

    /// The instant at `seconds` since 1970.
    public init(secondsSince1970 seconds: Double) {
        self.offset = .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// Seconds since 1970.
    public var secondsSince1970: Double {
        let c = offset.components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }

    public func advanced(by duration: Duration) -> EpochInstant { EpochInstant(offset: offset + duration) }
    public func duration(to other: EpochInstant) -> Duration { other.offset - offset }
    public static func < (a: EpochInstant, b: EpochInstant) -> Bool { a.offset < b.offset }
}
