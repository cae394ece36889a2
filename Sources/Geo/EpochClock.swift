/// The one kind of clock KeepTrack runs on: a `Clock` whose instants are durations since 1970
/// (``EpochInstant``), so that one instant is both a deadline to sleep until and a time of day
/// to stamp a record with.
///
/// Every time-dependent part takes one: ``WallClock`` when live, a ``ManualClock`` in tests and
/// `keeptrack simulate`, and a replayed log's clock (its fix times) in a replay. Parts that keep a
/// clock store `any EpochClock`.
public protocol EpochClock: Clock where Instant == EpochInstant, Duration == Swift.Duration {}
