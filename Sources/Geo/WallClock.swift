#if canImport(Glibc)
    import Glibc
#endif

/// The real time (CLOCK_REALTIME), for live tracking and for timestamps of storage.
///
/// Its sleeps wait the time to the deadline as measured when they start (a step of the system clock
/// during a sleep does not move its end).
public struct WallClock: EpochClock {
    public init() {}

    public var now: EpochInstant {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return EpochInstant(offset: .seconds(Int64(ts.tv_sec)) + .nanoseconds(Int64(ts.tv_nsec)))
    }

    public var minimumResolution: Duration { .nanoseconds(1) }

    public func sleep(until deadline: EpochInstant, tolerance: Duration? = nil) async throws {
        // The one real sleep of the package's time-dependent parts.
        try await Task.sleep(for: now.duration(to: deadline), tolerance: tolerance)
    }

    /// Seconds since 1970-01-01T00:00:00Z (CLOCK_REALTIME).
    @Sendable public static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
