#if canImport(Glibc)
    import Glibc
#endif

/// Gives back the clean file pages a process mapped while it started: the code and read-only data
/// of argument parsing, configuration, help and library set-up, run once and never again by a
/// tracker that then runs for days.
///
/// Those pages are the file's own contents, shared with the page cache: the kernel would drop
/// them under memory pressure, and meanwhile they count in the process's resident size (about
/// half of a live tracker's: docs/performance.md, "What a tracker keeps resident"). iOS counts a suspended app's footprint without
/// them; this unmaps them at the moments the tracker settles
/// (its first location, a suspension), and what the tracker still runs maps back in from the page
/// cache at its next access.
public enum CleanPages {
    /// One mapping of `/proc/self/smaps`.
    public struct Mapping: Equatable, Sendable {
        public var start: UInt
        public var end: UInt
        public var permissions: Substring
        public var path: Substring
        public var rssKB = 0
        public var anonymousKB = 0

        /// A private, read-only mapping of a file with no page of its own: every resident page is
        /// the file's, and mapping it again from the file gives the same bytes. (A page written
        /// once, such as a relocated one, is anonymous: its mapping is never touched.)
        public var isReleasable: Bool {
            (permissions == "r-xp" || permissions == "r--p") && path.first == "/" && anonymousKB == 0 && rssKB > 0
        }
    }

    /// This process's mappings (`/proc/self/smaps`); none when it cannot be read.
    public static func mappings() -> [Mapping] {
        (try? readFile("/proc/self/smaps")).map(parse) ?? []
    }

    /// Unmaps the resident pages of every releasable mapping (`madvise(MADV_DONTNEED)`).
    ///
    /// - Returns: the bytes released (their resident size before), 0 when `/proc` cannot be read.
    @discardableResult
    public static func release() -> Int {
        var released = 0
        for mapping in mappings() where mapping.isReleasable {
            guard let address = UnsafeMutableRawPointer(bitPattern: mapping.start) else { continue }
            if madvise(address, Int(mapping.end - mapping.start), MADV_DONTNEED) == 0 {
                released += mapping.rssKB * 1024
            }
        }
        return released
    }

    /// The mappings of an smaps text, with the sizes release needs.
    static func parse(_ bytes: [UInt8]) -> [Mapping] {
        var mappings: [Mapping] = []
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            if let colon = line.firstIndex(of: ":"), !line[..<colon].contains(" ") {
                // A field line, "Rss:    123 kB".
                guard !mappings.isEmpty else { continue }
                let value = Int(line[line.index(after: colon)...].split(separator: " ").first ?? "") ?? 0
                switch line[..<colon] {
                case "Rss": mappings[mappings.count - 1].rssKB = value
                case "Anonymous": mappings[mappings.count - 1].anonymousKB = value
                default: break
                }
                continue
            }
            // A mapping's header: "start-end perms offset dev inode [path]".
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, let dash = fields[0].firstIndex(of: "-"),
                let start = UInt(fields[0][..<dash], radix: 16),
                let end = UInt(fields[0][fields[0].index(after: dash)...], radix: 16)
            else { continue }
            let path = fields.count == 6 ? fields[5].drop { $0 == " " } : ""
            mappings.append(Mapping(start: start, end: end, permissions: fields[1], path: path))
        }
        return mappings
    }
}
