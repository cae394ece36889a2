import Formats
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Buffered writes to a file descriptor (stdout by default), flushed in 64 KiB blocks.
struct OutputBuffer {
    var bytes: [UInt8] = []
    let fd: Int32

    init(fd: Int32 = 1) {
        self.fd = fd
        bytes.reserveCapacity(80 * 1024)
    }

    mutating func flushIfNeeded() throws(OutputError) {
        if bytes.count >= 64 * 1024 { try flush() }
    }

    mutating func flush() throws(OutputError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw OutputError(errno: errno)
            }
            done += n
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

extension OutputBuffer {
    /// Appends a one-line JSON object whose values are all strings: `{"k1":"v1","k2":"v2"}`.
    mutating func appendStringObject(_ pairs: KeyValuePairs<StaticString, String>) {
        bytes.append(UInt8(ascii: "{"))
        for (i, (key, value)) in pairs.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(UInt8(ascii: "\""))
            ByteWriting.appendStatic(key, to: &bytes)
            ByteWriting.appendStatic("\":", to: &bytes)
            ByteWriting.appendJSONString(value, to: &bytes)
        }
        ByteWriting.appendStatic("}\n", to: &bytes)
    }

    /// Appends text as it is.
    mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// Appends a quoted, escaped JSON string.
    mutating func appendJSONString(_ text: String) { ByteWriting.appendJSONString(text, to: &bytes) }

    /// Ends a record: flushed at once for live output, in 64 KiB blocks otherwise.
    mutating func endRecord(lineBuffered: Bool) throws(OutputError) {
        if lineBuffered { try flush() } else { try flushIfNeeded() }
    }
}

struct OutputError: Error, CustomStringConvertible {
    var errno: Int32
    var description: String { "cannot write output: \(String(cString: strerror(errno)))" }
}

/// Writes a line to standard error.
func printError(_ message: String) {
    var line = message
    line += "\n"
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// Whether standard error is a terminal (progress lines are drawn only then).
var stderrIsTerminal: Bool { isatty(2) != 0 }

/// Monotonic seconds, for elapsed-time figures.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// `12345678` → `12,345,678`.
func grouped(_ n: some BinaryInteger) -> String {
    let s = String(n)
    var out = ""
    for (i, c) in s.reversed().enumerated() {
        if i > 0 && i % 3 == 0 && c != "-" { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}
