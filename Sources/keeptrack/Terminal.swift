import Formats
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The command line's own output on standard error: messages, and the progress line it draws
// when standard error is a terminal. Libraries hand their lines to closures; only this target writes.

/// Whether standard error carries JSON logs (`--log-format json`): then every line there is one
/// JSON object, the command's own messages too (``printError(_:level:)``).
let standardErrorIsJSON = Atomic<Bool>(false)

/// Writes a line to standard error, in one write (lines from several threads do not interleave).
/// With JSON logs, the line is a record of its own at `level` (a summary is a notice, a failure an
/// error), so a log collector reads every line.
func printError(_ message: String, level: Logger.Level = .notice) {
    if standardErrorIsJSON.load(ordering: .relaxed) {
        let line = JSONLogHandler.line(level: level, label: "keeptrack", message: message)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        return
    }
    var line = message
    line += "\n"
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// `n` and its noun, grouped by thousands: "1 request", "2 requests", "1,500 records".
func counted(_ n: Int, _ noun: String, _ plural: String? = nil) -> String {
    "\(grouped(n)) \(n == 1 ? noun : plural ?? noun + "s")"
}

/// Redraws a one-line status on standard error: carriage return, erase the line, the text.
@Sendable func printErrorInline(_ message: String) {
    var line = "\r\u{1B}[K" + message
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// Whether a command draws a progress line: when standard error is a terminal, never into a pipe
/// or a file, and not over output lines on the same terminal (`stdoutUsed`).
func progressWanted(stdoutUsed: Bool = true) -> Bool { isatty(2) != 0 && (!stdoutUsed || isatty(1) == 0) }
