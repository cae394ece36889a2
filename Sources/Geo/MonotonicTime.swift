#if canImport(Glibc)
    import Glibc
#endif

/// Seconds on the system's monotonic clock (CLOCK_MONOTONIC), from an arbitrary origin: for
/// what measures its own run rather than telling time, where an injected ``EpochClock`` cannot
/// reach (a device's reading thread waiting in `poll`, the watchdog's rate limit, how long a
/// command took). Time-dependent parts take an ``EpochClock`` instead.
@Sendable public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
