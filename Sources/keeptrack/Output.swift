import Formats
import Tracking
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a line to standard error.
func printError(_ message: String) {
    var line = message
    line += "\n"
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}

/// Whether a progress line is drawn: on a terminal (standard error), never into a pipe or a file,
/// and not over output lines on the same terminal.
func progressWanted(stdoutUsed: Bool = true) -> Bool { isatty(2) != 0 && (!stdoutUsed || isatty(1) == 0) }
