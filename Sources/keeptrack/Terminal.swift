#if canImport(Glibc)
    import Glibc
#endif

// The command line's own output on standard error: messages, and the progress line it draws
// when standard error is a terminal. Libraries hand their lines to closures; only this target writes.

/// Writes a line to standard error, in one write (lines from several threads do not interleave).
func printError(_ message: String) {
    var line = message
    line += "\n"
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// Redraws a one-line status on standard error: carriage return, erase the line, the text.
@Sendable func printErrorInline(_ message: String) {
    var line = "\r\u{1B}[K" + message
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// Whether a command draws a progress line: when standard error is a terminal, never into a pipe
/// or a file, and not over output lines on the same terminal (`stdoutUsed`).
func progressWanted(stdoutUsed: Bool = true) -> Bool { isatty(2) != 0 && (!stdoutUsed || isatty(1) == 0) }
