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


/// A duration option's value (`90`, `90s`, `5m`, `2h`, `30d`): `DurationText`, whose error says what is accepted.
@Sendable func parseDuration(_ text: String) throws -> Double { try DurationText.seconds(text) }

/// A duration whose bare number counts days (`--outbox-max-age 30`, `--outbox-max-age 12h`).
@Sendable func parseDurationInDays(_ text: String) throws -> Double { try DurationText.seconds(text, bareUnit: .days) }
