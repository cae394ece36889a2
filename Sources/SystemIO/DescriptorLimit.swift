#if canImport(Glibc)
    import Glibc
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`): a server's sockets, files and
/// pipes all count against its soft limit, which only the hard limit bounds.
public struct DescriptorLimit: Sendable, Hashable {
    /// The limit in force (`Int.max` when unlimited).
    public var soft: Int
    /// The most the soft limit may be raised to without privileges (`Int.max` when unlimited).
    public var hard: Int

    public init(soft: Int, hard: Int) {
        self.soft = soft
        self.hard = hard
    }

    /// The process's limits now, or nil when the system does not say.
    public static func current() -> DescriptorLimit? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return DescriptorLimit(soft: count(limit.rlim_cur), hard: count(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one (as far as the kernel allows: Linux caps it at
    /// `fs.nr_open`, so an unlimited hard limit raises it to that), and returns the limits before and
    /// after. nil when the system does not say; `after` equals `before` when nothing could be raised.
    public static func raiseSoftToHard() -> (before: DescriptorLimit, after: DescriptorLimit)? {
        guard let before = current() else { return nil }
        guard before.soft < before.hard else { return (before, before) }
        var targets = [before.hard]
        if let open = try? readFile("/proc/sys/fs/nr_open"),
            let value = Int(String(decoding: open.filter { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
        {
            targets.append(min(before.hard, value))
        }
        for target in targets where target > before.soft {
            var limit = rlimit()
            limit.rlim_cur = target == Int.max ? rlim_t.max : rlim_t(target)
            limit.rlim_max = before.hard == Int.max ? rlim_t.max : rlim_t(before.hard)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { break }
        }
        return (before, current() ?? before)
    }

    /// `RLIM_INFINITY` is all ones on Linux.
    private static func count(_ value: rlim_t) -> Int {
        value == rlim_t.max || value > rlim_t(Int.max) ? Int.max : Int(value)
    }
}
