#if canImport(Glibc)
    import Glibc
#endif

/// A count the malloc-counting preload library keeps (Benchmarks/malloc-count.c).
public typealias CountFunction = @convention(c) () -> UInt64

/// The heap allocations so far, when the benchmark runs with the malloc-counting preload library
/// (`LD_PRELOAD=malloc-count.so`, as tools/bench.py runs it); nil without it.
public let mallocCount: CountFunction? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "keeptrack_malloc_count") else { return nil }
    return unsafeBitCast(symbol, to: CountFunction.self)
}()

/// Seconds on the monotonic clock, for timing a benchmark's passes.
public func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
