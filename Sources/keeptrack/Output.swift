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

/// Whether standard error is a terminal (progress lines are drawn only then).
var stderrIsTerminal: Bool { isatty(2) != 0 }
