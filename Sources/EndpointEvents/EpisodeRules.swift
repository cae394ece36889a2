import Formats

/// Overspeed: a device faster than its limit, one event per episode. An episode starts when the
/// speed is above ``limit`` for ``minimumDuration`` seconds (of the records' own times) and ends when
/// it falls to `limit × (1 - hysteresis)` or below: a driver hovering at the limit is told once.
public struct OverspeedRule: Hashable, Sendable, Codable {
    /// The limit, in m/s.
    public var limit: Double
    /// The fraction of the limit the speed must fall below it to end an episode. The default is 0.1.
    public var hysteresis: Double
    /// Seconds above the limit before the event. The default is 0: the first record above it.
    public var minimumDuration: Double

    public init(limit: Double, hysteresis: Double = 0.1, minimumDuration: Double = 0) {
        self.limit = limit
        self.hysteresis = hysteresis
        self.minimumDuration = minimumDuration
    }

    /// What the rule remembers between records.
    public struct State: Hashable, Sendable {
        /// In an episode (its event given).
        var inEpisode = false
        /// When the speed went above the limit, while not yet an episode.
        var aboveSince: Double?

        public init() {}

        init(inEpisode: Bool, aboveSince: Double?) {
            self.inEpisode = inEpisode
            self.aboveSince = aboveSince
        }
    }

    /// Takes a record's speed (m/s; `nil`: unknown, no evidence); returns the speed to report when
    /// an episode starts.
    public func evaluate(speed: Double?, time: Double, state: inout State) -> Double? {
        guard let speed else { return nil }
        if state.inEpisode {
            if speed <= limit * (1 - hysteresis) {
                state.inEpisode = false
                state.aboveSince = nil
            }
            return nil
        }
        guard speed > limit else {
            state.aboveSince = nil
            return nil
        }
        let since = state.aboveSince ?? time
        state.aboveSince = since
        guard time - since >= minimumDuration else { return nil }
        state.inEpisode = true
        state.aboveSince = nil
        return speed
    }
}

/// Low battery: one event when a device's battery falls to ``threshold`` percent, and none again
/// until it has been at ``rearm`` percent or more (charged).
public struct BatteryRule: Hashable, Sendable, Codable {
    /// Percent. The default is 20.
    public var threshold: Double
    /// Percent at or above which a new event may come. The default is 25.
    public var rearm: Double

    public init(threshold: Double = 20, rearm: Double = 25) {
        precondition(rearm > threshold, "the re-arming level must be above the threshold")
        self.threshold = threshold
        self.rearm = rearm
    }

    /// What the rule remembers between records.
    public struct State: Hashable, Sendable {
        /// Whether the next fall to the threshold is reported.
        var armed = true

        public init() {}

        init(armed: Bool) { self.armed = armed }
    }

    /// Takes a record's battery level (percent; `nil`: unknown); returns the level to report when
    /// it fell to the threshold.
    public func evaluate(level: Double?, state: inout State) -> Double? {
        guard let level else { return nil }
        if state.armed && level <= threshold {
            state.armed = false
            return level
        }
        if !state.armed && level >= rearm { state.armed = true }
        return nil
    }
}

extension TrailRecord {
    /// The battery level in percent the sender gave, from the attributes the formats keep: `batt`
    /// (OwnTracks, OsmAnd: percent), `battery_level` (Overland) and `battery.level` (Traccar Client's
    /// JSON), both fractions of 1. `nil` when none is there or it is not a level (outside 0...100).
    public var batteryPercent: Double? {
        func number(_ key: String) -> Double? {
            attributes[key].flatMap { Double($0) }.flatMap { $0.isFinite ? $0 : nil }
        }
        let percent: Double?
        if let batt = number("batt") {
            percent = batt
        } else if let level = number("battery_level") ?? number("battery.level") {
            // A fraction of 1: to a hundredth of a percent (0.15 × 100 is 15.000000000000002).
            percent = (level * 10_000).rounded() / 100
        } else {
            percent = nil
        }
        guard let percent, percent >= 0, percent <= 100 else { return nil }
        return percent
    }
}
